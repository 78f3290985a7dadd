//! Each payment job keeps the terminals that took it (`takers`: their ids, 32 hex digits each,
//! each after a space, once): a terminal's late approval of a job it took is a card charged, kept
//! as a refund due, while one from a terminal that never took the job is refused. The jobs taken
//! already name the terminal holding them.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::columns::a;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = ColumnDef::new(a("takers")).text().not_null().default("").to_owned();
        manager.alter_table(Table::alter().table(a("payment_jobs")).add_column(column).to_owned()).await?;
        let db = manager.get_connection();
        let id = match db.get_database_backend() {
            DbBackend::Sqlite => "lower(hex(device_id))",
            _ => "replace(CAST(device_id AS TEXT), '-', '')",
        };
        db.execute_unprepared(&format!(
            "UPDATE payment_jobs SET takers = ' ' || {id} WHERE device_id IS NOT NULL AND state <> 'refund_due'"
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(a("payment_jobs")).drop_column(a("takers")).to_owned()).await
    }
}
