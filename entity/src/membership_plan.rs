use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A plan of the membership catalogue (`/memberships`).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "membership_plans")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub description: Option<String>,
    pub price_amount: i64,
    pub currency: String,
    pub duration_days: Option<i32>,
    pub visit_limit: Option<i32>,
    /// `active` or `inactive`.
    pub status: PlanStatus,
    pub legacy_id: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
