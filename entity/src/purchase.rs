use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A sale.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "purchases")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub member_id: Option<MemberId>,
    pub product_id: Option<Uuid>,
    pub description: String,
    pub quantity: i32,
    pub total_amount: i64,
    pub currency: String,
    /// `pending`, `paid`, `failed`, `cancelled` or `refunded`.
    pub payment_status: PaymentStatus,
    pub purchased_at: DateTimeUtc,
    pub legacy_id: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// The device that took the order (a sale at the counter), and its facility.
    pub device_id: Option<Uuid>,
    pub facility_id: Option<Uuid>,
    /// Sequential per gym, given when the sale is paid at the counter.
    pub receipt_number: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
