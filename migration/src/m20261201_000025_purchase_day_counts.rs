//! The sales join the check-ins in `gym_day_counts`: counted per UTC month and day of
//! `purchased_at` (the list's order), for the whole list and per `payment_status`, so that a page
//! of sales asked by its number starts from its day. The counts of the sales already written are
//! filled in here.

use sea_orm_migration::prelude::*;

use crate::m20261129_000023_day_counts::fill;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        fill(manager, "purchases", "payment_status", "purchased_at").await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("DELETE FROM gym_day_counts WHERE list LIKE 'purchases%'").await?;
        Ok(())
    }
}
