//! Cheap exact totals and fast member search.
//!
//! - `gym_counters`: per-gym running counts (e.g. `members`, `members.active`), written in the same
//!   transaction as the rows they count, so a list's `total` needs no `COUNT(*)` over the gym.
//! - `members.search_text`: first name, last name and email, lowercased by the service (Unicode,
//!   the same on every backend), searched with `LIKE '%term%'`; on PostgreSQL a trigram GIN index
//!   serves it.

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
                    .table(a("gym_counters"))
                    .if_not_exists()
                    .col(ColumnDef::new(a("gym_id")).uuid().not_null())
                    .col(ColumnDef::new(a("name")).string().not_null())
                    .col(ColumnDef::new(a("value")).big_integer().not_null())
                    .primary_key(Index::create().col(a("gym_id")).col(a("name")))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_gym_counters_gym_id")
                            .from(a("gym_counters"), a("gym_id"))
                            .to(a("gyms"), a("id")),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(a("members"))
                    .add_column(ColumnDef::new(a("search_text")).text().not_null().default(""))
                    .to_owned(),
            )
            .await?;

        // A counted total subtracts the rows created after `as_of`: every counted table needs a
        // `(gym_id, created_at)` index for that range (members and the catalogues have one).
        for table in ["attendance", "purchases"] {
            manager
                .create_index(
                    Index::create()
                        .name(format!("ix_{table}_gym_created"))
                        .table(a(table))
                        .col(a("gym_id"))
                        .col(a("created_at"))
                        .to_owned(),
                )
                .await?;
        }

        // Backfill what earlier versions wrote: counts, and search text (lowercased in SQL here;
        // the service rewrites it with Unicode lowercasing on the next change of the member).
        let db = manager.get_connection();
        let newline = match manager.get_database_backend() {
            sea_orm::DatabaseBackend::Postgres => "chr(10)",
            _ => "char(10)",
        };
        db.execute_unprepared(&format!(
            "UPDATE members SET search_text = lower(first_name || ' ' || last_name || {newline} || coalesce(email_normalized, ''))"
        ))
        .await?;
        db.execute_unprepared(
            "INSERT INTO gym_counters (gym_id, name, value) SELECT gym_id, 'members', COUNT(*) FROM members GROUP BY gym_id",
        )
        .await?;
        db.execute_unprepared(
            "INSERT INTO gym_counters (gym_id, name, value) SELECT gym_id, 'members.' || status, COUNT(*) FROM members GROUP BY gym_id, status",
        )
        .await?;

        if manager.get_database_backend() == sea_orm::DatabaseBackend::Postgres {
            // pg_trgm is a trusted extension: the database owner may create it.
            db.execute_unprepared("CREATE EXTENSION IF NOT EXISTS pg_trgm").await?;
            db.execute_unprepared(
                "CREATE INDEX IF NOT EXISTS ix_members_search_trgm ON members USING gin (search_text gin_trgm_ops)",
            )
            .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == sea_orm::DatabaseBackend::Postgres {
            manager.get_connection().execute_unprepared("DROP INDEX IF EXISTS ix_members_search_trgm").await?;
        }
        for table in ["attendance", "purchases"] {
            manager
                .drop_index(Index::drop().name(format!("ix_{table}_gym_created")).table(a(table)).to_owned())
                .await?;
        }
        manager.alter_table(Table::alter().table(a("members")).drop_column(a("search_text")).to_owned()).await?;
        manager.drop_table(Table::drop().table(a("gym_counters")).if_exists().to_owned()).await
    }
}
