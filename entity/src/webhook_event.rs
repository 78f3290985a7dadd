use sea_orm::entity::prelude::*;

use crate::ids::*;

/// An event, written in the same transaction as the change that caused it (the outbox).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_events")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// For example `member.created`.
    pub event_type: String,
    /// The event envelope as sent, JSON.
    pub payload: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
