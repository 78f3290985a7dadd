//! A receipt names the facility where its sale was paid: its print job keeps the facility's name
//! as it was then, frozen with the rest of the receipt (`m20261127_000018_frozen_receipts`). Jobs
//! written before keep it empty.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = string_null("facility_name");
        manager.alter_table(Table::alter().table(a("print_jobs")).add_column(column).to_owned()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(a("print_jobs")).drop_column(a("facility_name")).to_owned()).await
    }
}
