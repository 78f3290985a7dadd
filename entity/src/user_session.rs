use sea_orm::entity::prelude::*;

use crate::ids::*;

/// A signed-in gym user in the settings area.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "user_sessions")]
pub struct Model {
    /// SHA-256 (hex) of the session token; the token itself lives only in the user's cookie.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub user_id: Uuid,
    pub gym_id: GymId,
    /// Sent back with every form of the session.
    pub csrf_token: String,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
