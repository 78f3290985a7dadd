//! Keys issued from now on end in a checksum of the rest, so a mistyped or made-up key is refused
//! without a database query. Keys issued before keep working as they are; `checksummed` tells the
//! two apart, so the few earlier ones can be known in memory (`auth::legacy`).

use sea_orm_migration::prelude::*;

use crate::columns::a;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = ColumnDef::new(a("checksummed")).boolean().not_null().default(false).to_owned();
        manager.alter_table(Table::alter().table(a("api_keys")).add_column(column).to_owned()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(a("api_keys")).drop_column(a("checksummed")).to_owned()).await
    }
}
