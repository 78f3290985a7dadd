//! `server_secrets`: secrets every instance of one deployment shares, by name, made once by the
//! first instance that needs one (`INSERT ... ON CONFLICT DO NOTHING`, then read). The first is
//! the key that signs the sign-in form's token. Not a tenant table: it belongs to no gym.

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
                    .table(a("server_secrets"))
                    .if_not_exists()
                    .col(ColumnDef::new(a("name")).string().not_null().primary_key())
                    .col(ColumnDef::new(a("value")).string().not_null())
                    .col(ColumnDef::new(a("created_at")).timestamp_with_time_zone().not_null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(a("server_secrets")).to_owned()).await
    }
}
