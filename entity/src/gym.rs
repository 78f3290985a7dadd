use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A gym, or the sandbox of one (`parent_gym_id` set). A sandbox follows its parent's plan and
/// subscription.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gyms")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: GymId,
    pub name: String,
    /// IANA time zone, e.g. `Europe/Berlin`.
    pub timezone: String,
    /// Set on a sandbox: the production gym it belongs to (at most one sandbox per gym).
    #[sea_orm(unique)]
    pub parent_gym_id: Option<GymId>,
    /// Plan feature: the integration API.
    pub api_access: bool,
    /// Plan feature: the front-desk device endpoints.
    pub device_access: bool,
    pub subscription_status: SubscriptionStatus,
    /// End of the grace period of an unpaid subscription; requests get 402 after it.
    pub grace_ends_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
