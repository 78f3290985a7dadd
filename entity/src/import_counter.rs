use sea_orm::entity::prelude::*;

use crate::ids::*;

/// Running totals of `POST /import/{entity}` per gym and kind.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "import_counters")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub entity: String,
    pub received: i64,
    pub created: i64,
    pub skipped: i64,
    pub last_batch_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
