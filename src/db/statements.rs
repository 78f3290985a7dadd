//! Connections for single statements outside a transaction, handed back the moment the
//! statement's answer has been read.
//!
//! sqlx's pool tests every connection handed back to it with a round trip of its own: on
//! PostgreSQL a `Sync`, answered by `ReadyForQuery`, although the statement's answer already ended
//! with `ReadyForQuery` (a second wake-up of the PostgreSQL backend, and of this process, for
//! every statement); on SQLite a message to the connection's thread and its answer (two more
//! thread switches). The test exists for a statement cut off half-way (its future dropped), which
//! could leave the connection in the middle of an answer. Here such a connection is closed instead
//! of reused, and so is one whose statement failed in a way that may have broken it; every other
//! connection goes straight back.

use std::{
    sync::{Arc, Mutex, Weak},
    time::{Duration, Instant},
};

use sea_orm::{
    ConnAcquireErr, DbErr, QueryResult, RuntimeErr, Statement,
    sea_query::Values,
    sqlx::{self, Connection, Executor, IntoArguments, Postgres, Sqlite, pool::PoolOptions},
};
use sea_query_binder::SqlxValues;
use tokio::sync::{Semaphore, SemaphorePermit};

/// How often idle connections past their idle time or lifetime are closed.
const REAP_EVERY: Duration = Duration::from_secs(30);

/// A database whose connections a [`StatementPool`] can hold, and which errors leave one unusable
/// or in doubt.
pub trait Backend: sqlx::Database {
    fn breaks_connection(e: &sqlx::Error) -> bool;
}

impl Backend for Postgres {
    /// Anything but an error the server reported for the statement itself, unless that error is
    /// about the connection (class 08, connection exception; class 57, the server shutting down or
    /// the backend terminated).
    fn breaks_connection(e: &sqlx::Error) -> bool {
        match e {
            sqlx::Error::Database(db) => db.code().is_some_and(|c| c.starts_with("08") || c.starts_with("57")),
            other => breaks_on_the_way(other),
        }
    }
}

impl Backend for Sqlite {
    /// Anything but an error SQLite reported for the statement (the connection's thread gone,
    /// an answer cut off).
    fn breaks_connection(e: &sqlx::Error) -> bool {
        match e {
            sqlx::Error::Database(_) => false,
            other => breaks_on_the_way(other),
        }
    }
}

/// Whether an error that is not the database's own leaves the connection in doubt.
fn breaks_on_the_way(e: &sqlx::Error) -> bool {
    !matches!(e, sqlx::Error::RowNotFound | sqlx::Error::TypeNotFound { .. } | sqlx::Error::ColumnNotFound(_))
}

type Options<B> = <<B as sqlx::Database>::Connection as Connection>::Options;

/// The pool. Connections are opened when needed, up to `max`, and reused newest first, so that
/// under a light load the same few stay warm and the others age out.
pub struct StatementPool<B: Backend> {
    options: Options<B>,
    permits: Semaphore,
    idle: Mutex<Vec<Pooled<B>>>,
    acquire_timeout: Duration,
    idle_timeout: Option<Duration>,
    max_lifetime: Option<Duration>,
}

struct Pooled<B: Backend> {
    conn: B::Connection,
    opened: Instant,
    used: Instant,
}

impl<B: Backend> StatementPool<B>
where
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'q> SqlxValues: IntoArguments<'q, B>,
    QueryResult: From<B::Row>,
{
    /// A pool that connects as `options` says, sized and timed like sea-orm's `pool`.
    pub fn new(options: Options<B>, pool: &PoolOptions<B>) -> Arc<Self> {
        let max = pool.get_max_connections().max(1) as usize;
        let this = Arc::new(Self {
            options,
            permits: Semaphore::new(max),
            idle: Mutex::new(Vec::with_capacity(max)),
            acquire_timeout: pool.get_acquire_timeout(),
            idle_timeout: pool.get_idle_timeout(),
            max_lifetime: pool.get_max_lifetime(),
        });
        let weak = Arc::downgrade(&this);
        tokio::spawn(reap(weak));
        this
    }

    /// The statement's rows, or its first row.
    pub async fn query_all(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        let rows = self.run(&stmt, async |c, q| q.fetch_all(c).await).await?;
        Ok(rows.into_iter().map(QueryResult::from).collect())
    }

    pub async fn query_one(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        Ok(self.run(&stmt, async |c, q| q.fetch_optional(c).await).await?.map(QueryResult::from))
    }

    /// Runs `stmt` on a connection of the pool. A `SELECT` whose reused connection turns out to be
    /// dead (closed by the server, a restart, an idle timeout on the way) runs once more on a new
    /// connection: reading twice changes nothing, and the client is spared an error.
    async fn run<T>(
        &self,
        stmt: &Statement,
        f: impl AsyncFn(&mut B::Connection, Query<'_, B>) -> Result<T, sqlx::Error>,
    ) -> Result<T, DbErr> {
        let mut lease = self.lease().await?;
        let result = f(lease.conn(), query(stmt)).await;
        let result = match result {
            Err(e) if B::breaks_connection(&e) && lease.reused && is_read(&stmt.sql) => {
                drop(lease);
                let mut fresh = self.lease_new().await?;
                let again = f(fresh.conn(), query(stmt)).await;
                fresh.settle(again)
            }
            other => lease.settle(other),
        };
        result.map_err(|e| DbErr::Query(RuntimeErr::SqlxError(e)))
    }

    /// A connection: the most recently used idle one, or a new one.
    async fn lease(&self) -> Result<Lease<'_, B>, DbErr> {
        let permit = self.permit().await?;
        let now = Instant::now();
        loop {
            let popped = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match popped {
                Some(p) if self.fresh(&p, now) => {
                    return Ok(Lease { pool: self, pooled: p, reused: true, _permit: permit });
                }
                Some(stale) => close::<B>(stale.conn),
                None => return self.open(permit).await,
            }
        }
    }

    /// A new connection, whatever is idle.
    async fn lease_new(&self) -> Result<Lease<'_, B>, DbErr> {
        let permit = self.permit().await?;
        self.open(permit).await
    }

    async fn permit(&self) -> Result<SemaphorePermit<'_>, DbErr> {
        tokio::time::timeout(self.acquire_timeout, self.permits.acquire())
            .await
            .map_err(|_| DbErr::ConnectionAcquire(ConnAcquireErr::Timeout))?
            .map_err(|_| DbErr::ConnectionAcquire(ConnAcquireErr::ConnectionClosed))
    }

    async fn open<'a>(&'a self, permit: SemaphorePermit<'a>) -> Result<Lease<'a, B>, DbErr> {
        let conn = tokio::time::timeout(self.acquire_timeout, B::Connection::connect_with(&self.options))
            .await
            .map_err(|_| DbErr::ConnectionAcquire(ConnAcquireErr::Timeout))?
            .map_err(|e| DbErr::Conn(RuntimeErr::SqlxError(e)))?;
        let now = Instant::now();
        Ok(Lease { pool: self, pooled: Pooled { conn, opened: now, used: now }, reused: false, _permit: permit })
    }

    /// Whether an idle connection may still be used at `now`.
    fn fresh(&self, p: &Pooled<B>, now: Instant) -> bool {
        self.idle_timeout.is_none_or(|t| now.duration_since(p.used) < t)
            && self.max_lifetime.is_none_or(|t| now.duration_since(p.opened) < t)
    }

    /// Idle connections now.
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

type Query<'q, B> = sqlx::query::Query<'q, B, SqlxValues>;

fn query<B: Backend>(stmt: &Statement) -> Query<'_, B>
where
    for<'q> SqlxValues: IntoArguments<'q, B>,
{
    let values = stmt.values.clone().unwrap_or(Values(Vec::new()));
    sqlx::query_with(&stmt.sql, SqlxValues(values))
}

/// A connection lent for one statement. Dropped without `settle` (the statement's future was
/// dropped half-way), it closes its connection rather than hand back one in an unknown state.
struct Lease<'a, B: Backend> {
    pool: &'a StatementPool<B>,
    pooled: Pooled<B>,
    /// Whether the connection had served an earlier statement.
    reused: bool,
    /// Held until the connection is back or closed.
    _permit: SemaphorePermit<'a>,
}

impl<B: Backend> Lease<'_, B> {
    fn conn(&mut self) -> &mut B::Connection {
        &mut self.pooled.conn
    }

    /// Hands the connection back after its statement answered `result`, unless that answer says
    /// the connection may be broken; then it is closed.
    fn settle<T>(self, result: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
        let Lease { pool, mut pooled, _permit: permit, .. } = self;
        match &result {
            Err(e) if B::breaks_connection(e) => drop(pooled),
            _ => {
                pooled.used = Instant::now();
                pool.idle.lock().unwrap_or_else(|e| e.into_inner()).push(pooled);
            }
        }
        // Only now may a waiting statement take the connection.
        drop(permit);
        result
    }
}

/// Whether a statement only reads, so that running it twice is harmless.
fn is_read(sql: &str) -> bool {
    let head = sql.trim_start().get(..6).unwrap_or_default();
    head.eq_ignore_ascii_case("select")
}

/// Closes a connection politely (a `Terminate` message), off the caller's path.
fn close<B: Backend>(conn: B::Connection) {
    tokio::spawn(async move {
        let _ = conn.close().await;
    });
}

/// Closes idle connections past their time, until the pool is gone.
async fn reap<B: Backend>(pool: Weak<StatementPool<B>>)
where
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'q> SqlxValues: IntoArguments<'q, B>,
    QueryResult: From<B::Row>,
{
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        let Some(pool) = pool.upgrade() else { return };
        let now = Instant::now();
        let stale: Vec<Pooled<B>> = {
            let mut idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner());
            let (keep, stale) = std::mem::take(&mut *idle).into_iter().partition(|p| pool.fresh(p, now));
            *idle = keep;
            stale
        };
        for p in stale {
            close::<B>(p.conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{DbBackend, Statement};

    use super::is_read;
    use crate::db::{Db, connect};

    /// A statement whose future is dropped half-way leaves its connection in the middle of an
    /// answer: that connection is closed, and the next statement gets its own answer on another.
    #[tokio::test]
    async fn a_statement_cut_off_is_not_handed_back() -> anyhow::Result<()> {
        let Some(url) = std::env::var("TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) else {
            return Ok(());
        };
        let db = Db::new(connect(&url).await?);
        let pool = db.statements().ok_or_else(|| anyhow::anyhow!("no statement pool on PostgreSQL"))?;
        let sql = |s: &str| Statement::from_string(DbBackend::Postgres, s);
        pool.query_one(sql("SELECT 1")).await?;
        assert_eq!(pool.idle(), 1);
        let cut =
            tokio::time::timeout(std::time::Duration::from_millis(100), pool.query_one(sql("SELECT pg_sleep(1)")));
        assert!(cut.await.is_err(), "the sleep was cut off");
        assert_eq!(pool.idle(), 0, "the connection that was cut off is not idle in the pool");
        let row = pool.query_one(sql("SELECT 7 AS n")).await?.ok_or_else(|| anyhow::anyhow!("no row"))?;
        assert_eq!(row.try_get::<i32>("", "n")?, 7);
        assert_eq!(pool.idle(), 1);
        Ok(())
    }

    #[test]
    fn only_selects_are_run_again() {
        assert!(is_read("SELECT 1"));
        assert!(is_read("  select \"members\".\"id\" FROM members"));
        assert!(!is_read("INSERT INTO members (id) VALUES ($1) RETURNING id"));
        assert!(!is_read("UPDATE api_keys SET last_used_at = $1"));
        assert!(!is_read("SEL"));
    }
}
