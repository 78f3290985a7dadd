//! Events are kept for [`EVENTS_KEPT`] after they happened (`GET /events` reads them meanwhile),
//! then removed with their finished deliveries, gym by gym: each statement names its gym, so that
//! on a database distributed by gym it runs on the one node that holds it. A delivery still
//! pending (a redelivery of an old event) keeps its event until it ends.

use chrono::{DateTime, Duration, Utc};
use entity::{ids::GymId, states::DeliveryStatus};
use sea_orm::{ActiveEnum, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QuerySelect, Statement};

use crate::db::placeholders;

/// How long an event is kept after it happened.
pub const EVENTS_KEPT: Duration = Duration::days(30);

/// How many rows one statement removes at most (so that a sweep never holds SQLite's write lock
/// long).
const BATCH: u32 = 1_000;

/// Removes every event of every gym past [`EVENTS_KEPT`] at `now` with its finished deliveries;
/// returns how many events it removed.
pub async fn sweep(db: &DatabaseConnection, now: DateTime<Utc>) -> Result<u64, DbErr> {
    let gyms: Vec<GymId> =
        entity::gym::Entity::find().select_only().column(entity::gym::Column::Id).into_tuple().all(db).await?;
    let mut removed = 0;
    for gym in gyms {
        removed += sweep_gym(db, gym, now - EVENTS_KEPT).await?;
    }
    Ok(removed)
}

/// The gym's events before `cutoff` and their finished deliveries, a batch per transaction.
async fn sweep_gym(db: &DatabaseConnection, gym: GymId, cutoff: DateTime<Utc>) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let pending = DeliveryStatus::Pending.to_value();
    let deliveries = placeholders(
        backend,
        "DELETE FROM webhook_deliveries WHERE gym_id = ? AND id IN (SELECT id FROM webhook_deliveries \
         WHERE gym_id = ? AND created_at < ? AND status <> ? LIMIT ?)",
    );
    let events = placeholders(
        backend,
        "DELETE FROM webhook_events WHERE gym_id = ? AND id IN (SELECT e.id FROM webhook_events e \
         WHERE e.gym_id = ? AND e.created_at < ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d \
         WHERE d.gym_id = e.gym_id AND d.event_id = e.id) LIMIT ?)",
    );
    let mut removed = 0;
    loop {
        let txn = crate::db::begin_writing(db).await?;
        let values = [gym.into(), gym.into(), cutoff.into(), pending.clone().into(), i64::from(BATCH).into()];
        let gone = txn.execute(Statement::from_sql_and_values(backend, &deliveries, values)).await?.rows_affected();
        let values = [gym.into(), gym.into(), cutoff.into(), i64::from(BATCH).into()];
        let swept = txn.execute(Statement::from_sql_and_values(backend, &events, values)).await?.rows_affected();
        txn.commit().await?;
        removed += swept;
        if gone < u64::from(BATCH) && swept < u64::from(BATCH) {
            return Ok(removed);
        }
    }
}

/// Sweeps every `every`, in a task of its own.
pub fn spawn_sweeper(db: DatabaseConnection, every: std::time::Duration) {
    crate::db::sweep_every(db, every, "remove events past their time", |db| async move {
        sweep(&db, crate::records::now()).await.map(|_| ())
    });
}
