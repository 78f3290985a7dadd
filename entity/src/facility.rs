use sea_orm::entity::prelude::*;

use crate::ids::*;

/// A location of a gym. A gym's "first facility" is its oldest. `timezone` empty means the
/// gym's; an archived facility keeps its history but takes nothing new.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "facilities")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub timezone: Option<String>,
    pub address: Option<String>,
    pub legacy_id: Option<String>,
    pub archived_at: Option<DateTimeUtc>,
    /// The id while the facility is open, empty once archived: members and devices refer to it.
    pub open_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
