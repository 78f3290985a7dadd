use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A doorbell's ring, pending until the front desk answers it.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "rings")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The doorbell.
    pub device_id: Uuid,
    pub facility_id: Uuid,
    pub state: RingState,
    pub message: Option<String>,
    /// The door opened for it, and the command sent to it.
    pub door_id: Option<Uuid>,
    pub command_id: Option<Uuid>,
    pub expires_at: DateTimeUtc,
    pub answered_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
