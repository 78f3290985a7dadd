//! Requests per API key per day (UTC), for the settings area's chart.
//!
//! The request path only adds to a counter in memory; the counts are added to
//! `api_key_daily_requests` by a background task every [`FLUSH_EVERY`] (one statement for all
//! keys), and before the settings page reads them. A process that dies loses at most the counts
//! since its last flush: these are figures for a chart, not records.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use chrono::{NaiveDate, Utc};
use entity::ids::GymId;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement};
use uuid::Uuid;

use crate::db::{add_up, placeholders};

pub const FLUSH_EVERY: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct Usage {
    pending: Mutex<HashMap<(GymId, Uuid, NaiveDate), i64>>,
}

impl Usage {
    /// Counts one request of `key_id` (a key of `gym_id`, the production gym that owns it).
    pub fn record(&self, gym_id: GymId, key_id: Uuid) {
        if let Ok(mut p) = self.pending.lock() {
            *p.entry((gym_id, key_id, Utc::now().date_naive())).or_default() += 1;
        }
    }

    /// Adds the counts so far to the database.
    pub async fn flush(&self, db: &DatabaseConnection) -> Result<(), DbErr> {
        let batch: Vec<((GymId, Uuid, NaiveDate), i64)> = match self.pending.lock() {
            Ok(mut p) => p.drain().collect(),
            Err(_) => return Ok(()),
        };
        if batch.is_empty() {
            return Ok(());
        }
        let rows = batch.iter().map(|((gym, key, day), n)| (vec![(*gym).into(), (*key).into(), (*day).into()], *n));
        if let Err(e) = add_up_across_gyms(db, rows).await {
            // Keep the counts for the next flush.
            if let Ok(mut p) = self.pending.lock() {
                for (k, n) in batch {
                    *p.entry(k).or_default() += n;
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// Flushes every [`FLUSH_EVERY`], for as long as the process runs.
    pub fn spawn_flusher(self: std::sync::Arc<Self>, db: DatabaseConnection) {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(FLUSH_EVERY).await;
                if let Err(e) = self.flush(&db).await {
                    tracing::warn!(error = %e, "cannot store key usage counts; keeping them for the next flush");
                }
            }
        });
    }
}

/// Adds `rows` to the keys' daily counts: one statement for every gym that was used, in a
/// transaction of its own marked as writing many gyms (`db::across_gyms`).
async fn add_up_across_gyms(
    db: &DatabaseConnection,
    rows: impl IntoIterator<Item = (Vec<sea_orm::Value>, i64)>,
) -> Result<(), DbErr> {
    let txn = crate::db::begin_writing(db).await?;
    crate::db::across_gyms(&txn).await?;
    add_up(&txn, "api_key_daily_requests", &["gym_id", "key_id", "day"], "requests", rows).await?;
    txn.commit().await
}

/// Requests per day of each key of a gym over the last `days` days (UTC), oldest first, every day
/// present: `key_id -> [(day, requests)]`.
pub async fn daily(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    days: i64,
) -> Result<HashMap<Uuid, Vec<(NaiveDate, i64)>>, DbErr> {
    #[derive(sea_orm::FromQueryResult)]
    struct Row {
        key_id: Uuid,
        day: NaiveDate,
        requests: i64,
    }
    use sea_orm::FromQueryResult;
    let first = Utc::now().date_naive() - chrono::Duration::days(days - 1);
    let backend = db.get_database_backend();
    let sql =
        placeholders(backend, "SELECT key_id, day, requests FROM api_key_daily_requests WHERE gym_id = ? AND day >= ?");
    let rows = Row::find_by_statement(Statement::from_sql_and_values(backend, sql, [gym_id.into(), first.into()]))
        .all(db)
        .await?;
    let mut out: HashMap<Uuid, Vec<(NaiveDate, i64)>> = HashMap::new();
    for r in rows {
        let series =
            out.entry(r.key_id).or_insert_with(|| (0..days).map(|i| (first + chrono::Duration::days(i), 0)).collect());
        if let Ok(i) = usize::try_from((r.day - first).num_days())
            && let Some(slot) = series.get_mut(i)
        {
            slot.1 += r.requests;
        }
    }
    Ok(out)
}
