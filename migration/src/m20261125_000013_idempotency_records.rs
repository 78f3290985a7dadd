//! `idempotency_records`: the fact that a keyed write ran, and its response, kept in the write's
//! own transaction for the idempotency window (24 h by default). A tenant table, keyed by
//! `(gym_id, key_digest)`: the gym the key acted on and the SHA-256 of the `Idempotency-Key`.
//! `expires_at` is indexed for the sweep that removes records past their window.

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
                    .table(a("idempotency_records"))
                    .if_not_exists()
                    .col(ColumnDef::new(a("gym_id")).uuid().not_null())
                    .col(ColumnDef::new(a("key_digest")).string().not_null())
                    .col(ColumnDef::new(a("fingerprint")).string().not_null())
                    .col(ColumnDef::new(a("status")).integer().not_null())
                    .col(ColumnDef::new(a("content_type")).string().null())
                    .col(ColumnDef::new(a("body")).binary().not_null())
                    .col(ColumnDef::new(a("created_at")).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(a("expires_at")).timestamp_with_time_zone().not_null())
                    .primary_key(Index::create().col(a("gym_id")).col(a("key_digest")))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_idempotency_records_gym_id")
                            .from(a("idempotency_records"), a("gym_id"))
                            .to(a("gyms"), a("id")),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_idempotency_records_expires")
                    .table(a("idempotency_records"))
                    .col(a("expires_at"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(a("idempotency_records")).to_owned()).await
    }
}
