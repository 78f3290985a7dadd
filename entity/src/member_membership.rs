use sea_orm::entity::prelude::*;

use crate::ids::*;

/// A member's holding of a plan, for a period.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "member_memberships")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub member_id: MemberId,
    /// Exactly one of the two plan references is set.
    pub membership_plan_id: Option<Uuid>,
    pub subscription_plan_id: Option<Uuid>,
    pub starts_on: Date,
    /// `None` for open-ended.
    pub ends_on: Option<Date>,
    pub legacy_id: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
