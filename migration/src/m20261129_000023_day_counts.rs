//! Counts of a dated list per UTC month and day (`gym_day_counts`): a page of check-ins asked by
//! its number finds the day it starts in from them, instead of skipping every newer check-in.
//! `list` names the counter (`attendance@month`, `attendance.denied@day`), `bucket` the month or
//! day since 1970-01; a count is spread over `shard`s as the gym's counters are. The counts of
//! the check-ins already written are filled in here.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The month and the day of `occurred_at`, since 1970-01(-01), UTC.
fn buckets(backend: sea_orm::DatabaseBackend) -> [(&'static str, String); 2] {
    match backend {
        sea_orm::DatabaseBackend::Postgres => [
            (
                "month",
                "CAST((EXTRACT(YEAR FROM occurred_at AT TIME ZONE 'UTC') - 1970) * 12 \
                 + EXTRACT(MONTH FROM occurred_at AT TIME ZONE 'UTC') - 1 AS BIGINT)"
                    .into(),
            ),
            ("day", "CAST(FLOOR(EXTRACT(EPOCH FROM occurred_at) / 86400) AS BIGINT)".into()),
        ],
        _ => [
            (
                "month",
                "((CAST(substr(occurred_at, 1, 4) AS INTEGER) - 1970) * 12 \
                 + CAST(substr(occurred_at, 6, 2) AS INTEGER) - 1)"
                    .into(),
            ),
            ("day", "CAST(julianday(substr(occurred_at, 1, 10)) - 2440587.5 AS INTEGER)".into()),
        ],
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut counts = Table::create();
        counts
            .table(a("gym_day_counts"))
            .if_not_exists()
            .col(uuid("gym_id"))
            .col(string("list"))
            .col(big("bucket"))
            .col(ColumnDef::new(a("shard")).small_integer().not_null().default(0))
            .col(big("value"))
            .primary_key(Index::create().col(a("gym_id")).col(a("list")).col(a("bucket")).col(a("shard")));
        create_tenant_table(manager, "gym_day_counts", counts.to_owned(), vec![gym_fk("gym_day_counts")]).await?;
        let db = manager.get_connection();
        for (span, bucket) in buckets(manager.get_database_backend()) {
            db.execute_unprepared(&format!(
                "INSERT INTO gym_day_counts (gym_id, list, bucket, value) SELECT gym_id, list, bucket, n FROM (\
                 SELECT gym_id, 'attendance@{span}' AS list, {bucket} AS bucket, COUNT(*) AS n FROM attendance \
                 GROUP BY gym_id, {bucket} \
                 UNION ALL SELECT gym_id, 'attendance.' || status || '@{span}', {bucket}, COUNT(*) FROM attendance \
                 GROUP BY gym_id, status, {bucket}) AS counted"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(a("gym_day_counts")).if_exists().to_owned()).await
    }
}
