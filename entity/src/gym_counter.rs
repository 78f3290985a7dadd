use sea_orm::entity::prelude::*;

use crate::ids::*;

/// A running count per gym (`members`, `members.active`, ...), written in the same transaction as
/// the rows it counts. A counter is the sum of its shards; each write adds to one of them.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gym_counters")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub shard: i16,
    pub value: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
