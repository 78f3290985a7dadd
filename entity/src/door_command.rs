use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// What a door is told to do; handed out to one poll at most, before `expires_at`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "door_commands")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The door.
    pub device_id: Uuid,
    pub ring_id: Option<Uuid>,
    pub action: DoorAction,
    pub state: CommandState,
    pub expires_at: DateTimeUtc,
    pub delivered_at: Option<DateTimeUtc>,
    pub reported_at: Option<DateTimeUtc>,
    pub detail: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
