//! Requests per API key per day (UTC), for the settings area's chart. Counted in memory by each
//! instance and added here every few seconds, one statement per flush.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(a("api_key_daily_requests"))
                    .if_not_exists()
                    .col(ColumnDef::new(a("gym_id")).uuid().not_null())
                    .col(ColumnDef::new(a("key_id")).uuid().not_null())
                    .col(ColumnDef::new(a("day")).date().not_null())
                    .col(ColumnDef::new(a("requests")).big_integer().not_null())
                    .primary_key(Index::create().col(a("gym_id")).col(a("key_id")).col(a("day")))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_api_key_daily_requests_gym_id")
                            .from(a("api_key_daily_requests"), a("gym_id"))
                            .to(a("gyms"), a("id")),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(a("api_key_daily_requests")).to_owned()).await
    }
}
