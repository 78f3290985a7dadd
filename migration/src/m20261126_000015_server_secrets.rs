//! `server_secrets`: secrets every instance of one deployment shares, by name, made once by the
//! first instance that needs one (`INSERT ... ON CONFLICT DO NOTHING`, then read). The first is
//! the key that signs the sign-in form's token. Not a tenant table: it belongs to no gym.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(a("server_secrets"))
                    .if_not_exists()
                    .col(string("name").primary_key())
                    .col(string("value"))
                    .col(ts("created_at"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(a("server_secrets")).to_owned()).await
    }
}
