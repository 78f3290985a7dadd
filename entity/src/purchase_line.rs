use sea_orm::entity::prelude::*;

use crate::ids::*;

/// An item of a sale made at the counter, priced when it was ordered.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "purchase_lines")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub purchase_id: Uuid,
    /// 1, 2, … in the order of the order.
    #[sea_orm(primary_key, auto_increment = false)]
    pub position: i32,
    pub product_id: Option<Uuid>,
    pub description: String,
    pub quantity: i32,
    /// Minor units of the purchase's currency.
    pub unit_amount: i64,
    pub line_amount: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
