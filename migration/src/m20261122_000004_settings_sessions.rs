//! Sessions of gym users in the settings area. Only a SHA-256 of the session token is stored (like
//! API keys); the CSRF token of the session is checked on every form the user sends.

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
                    .table(a("user_sessions"))
                    .if_not_exists()
                    .col(ColumnDef::new(a("id")).string().not_null().primary_key())
                    .col(ColumnDef::new(a("user_id")).uuid().not_null())
                    .col(ColumnDef::new(a("gym_id")).uuid().not_null())
                    .col(ColumnDef::new(a("csrf_token")).string().not_null())
                    .col(ColumnDef::new(a("created_at")).timestamp_with_time_zone().not_null())
                    .col(ColumnDef::new(a("expires_at")).timestamp_with_time_zone().not_null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_user_sessions_user_id")
                            .from(a("user_sessions"), a("user_id"))
                            .to(a("users"), a("id")),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_user_sessions_gym_id")
                            .from(a("user_sessions"), a("gym_id"))
                            .to(a("gyms"), a("id")),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_user_sessions_gym_user")
                    .table(a("user_sessions"))
                    .col(a("gym_id"))
                    .col(a("user_id"))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(a("user_sessions")).to_owned()).await
    }
}
