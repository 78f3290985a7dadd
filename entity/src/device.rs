use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A front-desk device of a facility: a door, a doorbell, a card terminal, a fiscal printer or a kiosk.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "devices")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub facility_id: Uuid,
    pub kind: DeviceKind,
    pub name: String,
    /// Its latest request (at most every few seconds).
    pub last_seen_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
