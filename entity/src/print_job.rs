use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// A paid sale's receipt, for a fiscal printer of its facility to print.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "print_jobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub purchase_id: Uuid,
    pub facility_id: Uuid,
    pub state: PrintJobState,
    pub receipt_number: i64,
    /// The printer it was handed to.
    pub device_id: Option<Uuid>,
    pub delivered_at: Option<DateTimeUtc>,
    /// Why the printer could not print it.
    pub reason: Option<String>,
    pub reported_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// When its sale was paid, as the receipt says (frozen with the first print job).
    pub paid_at: Option<DateTimeUtc>,
    /// The gym's name as the receipt says.
    pub gym_name: Option<String>,
    /// The IANA time zone of the receipt's local time.
    pub timezone: Option<String>,
    /// The name of the facility where the sale was paid, as the receipt says (empty on jobs
    /// written before receipts named their facility).
    pub facility_name: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
