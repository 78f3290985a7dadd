//! PostgreSQL: `gymapi_key_kept(n)`, which a keyed write sent as one statement outside an explicit
//! transaction calls with the number of idempotency records its statement wrote. When that is
//! zero (another request holds the key) it raises SQLSTATE `GY409`, so the whole statement, the
//! handler's writes with it, is undone; otherwise it returns `n`. SQLite needs nothing: its keyed
//! writes run between `BEGIN` and `COMMIT` (see the server's `db::unit`).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const CREATE: &str = "CREATE OR REPLACE FUNCTION gymapi_key_kept(n bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  IF n = 0 THEN
    RAISE EXCEPTION 'the idempotency key is held by another request' USING ERRCODE = 'GY409';
  END IF;
  RETURN n;
END
$$";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == sea_orm::DatabaseBackend::Postgres {
            manager.get_connection().execute_unprepared(CREATE).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == sea_orm::DatabaseBackend::Postgres {
            manager.get_connection().execute_unprepared("DROP FUNCTION IF EXISTS gymapi_key_kept(bigint)").await?;
        }
        Ok(())
    }
}
