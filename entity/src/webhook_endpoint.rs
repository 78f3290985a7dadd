use sea_orm::entity::prelude::*;

use crate::ids::*;

/// A receiver of webhook events.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_endpoints")]
pub struct Model {
    /// The gym or sandbox whose events it receives.
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub url: String,
    /// Subscribed event types, comma-separated; `None` for all.
    pub event_types: Option<String>,
    pub enabled: bool,
    /// Why the endpoint was disabled (`410 Gone` from the receiver, or a person).
    pub disabled_reason: Option<String>,
    /// `whsec_...` signing secret.
    pub secret: String,
    /// The secret before the last rotation, valid until `previous_secret_expires_at`.
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
