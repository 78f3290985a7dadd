//! A receipt is frozen when its sale is paid: its print job keeps the gym's name, the time zone
//! and the moment of payment it was printed with, so a reprint after the gym renamed itself or
//! moved its time zone prints the same receipt. Jobs written before this migration keep these
//! empty and are read as before (from the gym and the sale).

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const COLUMNS: [&str; 3] = ["paid_at", "gym_name", "timezone"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [ts_null("paid_at"), string_null("gym_name"), string_null("timezone")] {
            manager.alter_table(Table::alter().table(a("print_jobs")).add_column(column).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for c in COLUMNS {
            manager.alter_table(Table::alter().table(a("print_jobs")).drop_column(a(c)).to_owned()).await?;
        }
        Ok(())
    }
}
