//! Statements the database asks to be run again: a serialization failure or a deadlock. On a
//! Citus cluster a statement planned for a shard that a concurrent split replaced gets the
//! first ("shard for the given value does not exist … Retry the query"); on PostgreSQL a
//! deadlock victim gets the second. Either way the statement took no effect.

use std::{future::Future, time::Duration};

use sea_orm::{DbErr, RuntimeErr, sqlx::Error};

/// Tries of a statement outside a transaction before its error is the caller's.
const TRIES: u32 = 4;

/// Whether the database refused `err`'s statement as one to retry: SQLSTATE 40001
/// (serialization failure) or 40P01 (deadlock detected).
pub fn must_retry(err: &DbErr) -> bool {
    let (DbErr::Exec(RuntimeErr::SqlxError(Error::Database(db)))
    | DbErr::Query(RuntimeErr::SqlxError(Error::Database(db)))) = err
    else {
        return false;
    };
    db.code().is_some_and(|c| c == "40001" || c == "40P01")
}

/// Runs a statement that is its own transaction, again while the database asks for it (up to
/// [`TRIES`] times, 20, 40, 80 ms apart): a split moving a gym's shards lasts a moment.
pub async fn retried<T, F, Fut>(mut run: F) -> Result<T, DbErr>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, DbErr>>,
{
    let mut tried = 1;
    loop {
        match run().await {
            Err(e) if tried < TRIES && must_retry(&e) => {
                tracing::debug!(error = %e, tried, "the database asked for the statement again");
                tokio::time::sleep(Duration::from_millis(10 << tried)).await;
                tried += 1;
            }
            outcome => return outcome,
        }
    }
}
