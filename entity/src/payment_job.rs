use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A sale's total, for a card terminal of its facility to take.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payment_jobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub purchase_id: Uuid,
    pub facility_id: Uuid,
    pub state: PaymentJobState,
    pub amount: i64,
    pub currency: String,
    /// The terminal that took it.
    pub device_id: Option<Uuid>,
    /// Until when the terminal holds it; after, it is offered again.
    pub reserved_until: Option<DateTimeUtc>,
    pub card_scheme: Option<String>,
    pub card_last4: Option<String>,
    /// Why the terminal declined it.
    pub reason: Option<String>,
    pub reported_at: Option<DateTimeUtc>,
    /// The terminals that took it: their ids (32 hex digits, no dashes), each after a space, once.
    pub takers: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
