use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A person who signs in to the settings area of a gym.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "users")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub gym_id: GymId,
    #[sea_orm(unique)]
    pub email: String,
    /// Argon2 PHC string.
    pub password_hash: String,
    pub role: Role,
    /// Granted permissions, comma-separated (e.g. `settings.manage`).
    pub permissions: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
