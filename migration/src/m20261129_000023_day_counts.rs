//! Counts of a dated list per UTC month and day (`gym_day_counts`): a page of check-ins asked by
//! its number finds the day it starts in from them, instead of skipping every newer check-in.
//! `list` names the counter (`attendance@month`, `attendance.denied@day`), `bucket` the month or
//! day since 1970-01; a count is spread over `shard`s as the gym's counters are. The counts of
//! the check-ins already written are filled in here.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The month and the day of `column` (a time), since 1970-01(-01), UTC.
pub(crate) fn buckets(backend: sea_orm::DatabaseBackend, column: &str) -> [(&'static str, String); 2] {
    match backend {
        sea_orm::DatabaseBackend::Postgres => [
            (
                "month",
                format!(
                    "CAST((EXTRACT(YEAR FROM {column} AT TIME ZONE 'UTC') - 1970) * 12 \
                     + EXTRACT(MONTH FROM {column} AT TIME ZONE 'UTC') - 1 AS BIGINT)"
                ),
            ),
            ("day", format!("CAST(FLOOR(EXTRACT(EPOCH FROM {column}) / 86400) AS BIGINT)")),
        ],
        _ => [
            (
                "month",
                format!(
                    "((CAST(substr({column}, 1, 4) AS INTEGER) - 1970) * 12 \
                     + CAST(substr({column}, 6, 2) AS INTEGER) - 1)"
                ),
            ),
            ("day", format!("CAST(julianday(substr({column}, 1, 10)) - 2440587.5 AS INTEGER)")),
        ],
    }
}

/// Fills in the counts of `table`'s rows (under its name and `table.<label value>`) by `column`.
pub(crate) async fn fill(manager: &SchemaManager<'_>, table: &str, label: &str, column: &str) -> Result<(), DbErr> {
    let db = manager.get_connection();
    for (span, bucket) in buckets(manager.get_database_backend(), column) {
        db.execute_unprepared(&format!(
            "INSERT INTO gym_day_counts (gym_id, list, bucket, value) SELECT gym_id, list, bucket, n FROM (\
             SELECT gym_id, '{table}@{span}' AS list, {bucket} AS bucket, COUNT(*) AS n FROM {table} \
             GROUP BY gym_id, {bucket} \
             UNION ALL SELECT gym_id, '{table}.' || {label} || '@{span}', {bucket}, COUNT(*) FROM {table} \
             GROUP BY gym_id, {label}, {bucket}) AS counted"
        ))
        .await?;
    }
    Ok(())
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
        fill(manager, "attendance", "status", "occurred_at").await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(a("gym_day_counts")).if_exists().to_owned()).await
    }
}
