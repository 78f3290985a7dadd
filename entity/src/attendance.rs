use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A check-in or a door access event.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "attendance")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub facility_id: Uuid,
    pub member_id: Option<MemberId>,
    /// `check_in` or `access`.
    pub kind: AttendanceKind,
    /// `granted` or `denied`.
    pub status: AttendanceStatus,
    pub occurred_at: DateTimeUtc,
    pub legacy_id: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// The door that made the entry, for a decision at a door.
    pub device_id: Option<Uuid>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
