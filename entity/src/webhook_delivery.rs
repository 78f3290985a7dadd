use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// One event for one endpoint, with its attempts.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_deliveries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub status: DeliveryStatus,
    /// Attempts so far, a JSON array.
    pub attempts: String,
    pub attempt_count: i32,
    pub next_attempt_at: Option<DateTimeUtc>,
    /// A dispatcher's lease while it sends; the row is skipped by others until it ends.
    pub claimed_until: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
