//! The database's idempotency records: the fact that a keyed write ran, and its response, written
//! in the write's own transaction (`db::Unit`), so a response once acknowledged is never lost and
//! the write never runs twice, whatever happens to the store's kept replays (a Redis flush, a
//! failed write to it, a crash before it, the embedded default's restart). The store stays the
//! fast path; these are read when it has nothing.

use chrono::{DateTime, Utc};
use entity::idempotency_record;
use entity::ids::GymId;
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, Statement};

use super::StoredResponse;
use crate::db::placeholders;

/// Where a record lives: the gym the key acted on, and the SHA-256 (hex) of the key.
#[derive(Clone, Debug)]
pub struct RecordKey {
    pub gym_id: GymId,
    pub key_digest: String,
}

/// A record as read back.
#[derive(Clone, Debug)]
pub struct Kept {
    pub fingerprint: String,
    pub response: StoredResponse,
    pub expires_at: DateTime<Utc>,
}

/// The statements that keep `response` under `key` until `expires_at`; the last one writes the
/// record. When a record under the key is still within its window (another request with the key
/// came first) it changes no row on PostgreSQL, and fails on the key's unique index on SQLite
/// (where the transaction's `COMMIT` is sent in the same text, and must not run: see
/// `db::Unit::commit_with`); a record past its window is replaced (on SQLite, deleted by the
/// statement before it).
pub fn insert(
    backend: DbBackend,
    key: &RecordKey,
    fingerprint: &str,
    response: &StoredResponse,
    at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Vec<Statement> {
    let columns = "INSERT INTO idempotency_records \
         (gym_id, key_digest, fingerprint, status, content_type, body, created_at, expires_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    let row: [sea_orm::Value; 8] = [
        key.gym_id.into(),
        key.key_digest.as_str().into(),
        fingerprint.into(),
        i32::from(response.status).into(),
        response.content_type.clone().into(),
        response.body.clone().into(),
        at.into(),
        expires_at.into(),
    ];
    if backend == DbBackend::Sqlite {
        let clear = "DELETE FROM idempotency_records WHERE gym_id = ? AND key_digest = ? AND expires_at <= ?";
        let past: [sea_orm::Value; 3] = [key.gym_id.into(), key.key_digest.as_str().into(), at.into()];
        return vec![
            Statement::from_sql_and_values(backend, clear, past),
            Statement::from_sql_and_values(backend, columns, row),
        ];
    }
    let sql = placeholders(
        backend,
        &format!(
            "{columns} ON CONFLICT (gym_id, key_digest) DO UPDATE SET \
             fingerprint = excluded.fingerprint, status = excluded.status, content_type = excluded.content_type, \
             body = excluded.body, created_at = excluded.created_at, expires_at = excluded.expires_at \
             WHERE idempotency_records.expires_at <= excluded.created_at RETURNING 1"
        ),
    );
    vec![Statement::from_sql_and_values(backend, sql, row)]
}

/// The record under `key` that is still within its window at `now`.
pub async fn find(db: &impl ConnectionTrait, key: &RecordKey, now: DateTime<Utc>) -> Result<Option<Kept>, DbErr> {
    use idempotency_record::Column as C;
    let found = idempotency_record::Entity::find()
        .filter(C::GymId.eq(key.gym_id))
        .filter(C::KeyDigest.eq(key.key_digest.as_str()))
        .filter(C::ExpiresAt.gt(now))
        .one(db)
        .await?;
    Ok(found.map(|r| Kept {
        fingerprint: r.fingerprint,
        response: StoredResponse {
            status: u16::try_from(r.status).unwrap_or(500),
            content_type: r.content_type,
            body: r.body,
        },
        expires_at: r.expires_at,
    }))
}

/// Removes up to `batch` records past their window; returns how many it removed.
pub async fn sweep(db: &impl ConnectionTrait, now: DateTime<Utc>, batch: u32) -> Result<u64, DbErr> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        "DELETE FROM idempotency_records WHERE (gym_id, key_digest) IN \
         (SELECT gym_id, key_digest FROM idempotency_records WHERE expires_at <= ? LIMIT ?)",
    );
    let done = db.execute(Statement::from_sql_and_values(backend, sql, [now.into(), i64::from(batch).into()])).await?;
    Ok(done.rows_affected())
}

/// How often expired records are swept, and how many one statement removes at most.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
const SWEEP_BATCH: u32 = 1_000;

/// Sweeps expired records every minute, in a task of its own, a batch per transaction until none
/// is left (so a sweep never holds SQLite's write lock long).
pub fn spawn_sweeper(db: sea_orm::DatabaseConnection) {
    crate::db::sweep_every(
        db,
        SWEEP_EVERY,
        "sweep expired idempotency records",
        |db| async move { sweep_all(&db).await },
    );
}

async fn sweep_all(db: &sea_orm::DatabaseConnection) -> Result<(), DbErr> {
    let now = crate::records::now();
    loop {
        let txn = crate::db::begin_writing(db).await?;
        crate::db::across_gyms(&txn).await?;
        let removed = sweep(&txn, now, SWEEP_BATCH).await?;
        txn.commit().await?;
        if removed < u64::from(SWEEP_BATCH) {
            return Ok(());
        }
    }
}
