//! SQLite: the one connection through which this process writes a file.
//!
//! SQLite lets one connection write a file at a time, and sqlx hands every statement to its
//! connection's own thread and the answer back, two thread switches each. A writer taking the
//! pool's connections in turn would pay for `BEGIN`, for a statement that takes the write lock,
//! for `COMMIT`, and for the pool's test of each connection handed back, besides its own
//! statements; and losers of the race for the lock sleep in SQLite's busy handler long after it
//! is free. Here every writing transaction of the process waits its turn for the file's one
//! writer connection, in a first-come first-served queue, and its `BEGIN IMMEDIATE` (the write
//! lock from the start: reads see the newest data and writes never meet a stale snapshot) travels
//! with its first statement. A writer of another process (an operator's command) still meets the
//! busy handler. An in-memory database has one connection, the pool's; its writers take that one.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, LazyLock, Mutex},
    time::{Duration, Instant},
};

use futures_util::TryStreamExt as _;
use sea_orm::sqlx::{Either, sqlite::SqliteQueryResult};
use sea_orm::{
    ConnAcquireErr, DatabaseConnection, DbErr, ExecResult, QueryResult, RuntimeErr, Statement,
    sea_query::Values,
    sqlx::{
        self, ConnectOptions as _, Executor as _, Sqlite, SqliteConnection, pool::PoolConnection,
        sqlite::SqliteConnectOptions,
    },
};
use sea_query_binder::SqlxValues;
use tokio::sync::{Mutex as Queue, OwnedMutexGuard};

/// Each file's writer: one entry per file this process writes (a server writes one).
static WRITERS: LazyLock<Mutex<HashMap<PathBuf, Arc<Queue<Writer>>>>> = LazyLock::new(Default::default);

/// A writer connection unused this long is closed (and opened again when needed): a process that
/// wrote a file once, or many files (the test suite), keeps no thread and no file open for it.
const IDLE: Duration = Duration::from_secs(10);

/// The writer connection of a file, opened at its first use and again after it broke or idled.
#[derive(Default)]
struct Writer {
    conn: Option<SqliteConnection>,
    /// A transaction may still be open on it (its holder went without ending it).
    in_doubt: bool,
    used: Option<Instant>,
}

/// This process's turn to write a file: the file's writer connection, held until dropped (or, in
/// memory, the pool's one connection).
pub(super) struct Turn(Conn);

enum Conn {
    File(OwnedMutexGuard<Writer>),
    Memory(PoolConnection<Sqlite>),
}

/// What a transaction on the writer has sent so far.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Begun {
    /// Nothing: its `BEGIN IMMEDIATE` goes with its first statement.
    Not,
    Open,
    /// A statement failed or was cut off: whether the transaction is open is unknown.
    Doubt,
}

/// A writing transaction on the file's writer connection, holding this process's turn to write.
/// Dropped without [`commit`](Self::commit), it is rolled back before the next writer's turn.
pub struct FileTxn {
    inner: tokio::sync::Mutex<Inner>,
}

struct Inner {
    conn: Option<Conn>,
    begun: Begun,
}

/// A statement of a group of statements that failed: which one, and why.
#[derive(Debug)]
pub struct Failed {
    pub statement: usize,
    pub error: DbErr,
}

/// Waits for this process's turn to write `db`'s file and begins a transaction (sent with its first
/// statement).
pub async fn begin(db: &DatabaseConnection) -> Result<FileTxn, DbErr> {
    let Turn(conn) = turn(db).await?;
    Ok(FileTxn { inner: tokio::sync::Mutex::new(Inner { conn: Some(conn), begun: Begun::Not }) })
}

/// Waits for this process's turn to write `db`'s file; a transaction its last holder left open is
/// rolled back first.
pub(super) async fn turn(db: &DatabaseConnection) -> Result<Turn, DbErr> {
    let pool = db.get_sqlite_connection_pool();
    let options = pool.connect_options();
    Ok(Turn(if in_memory(&options) {
        Conn::Memory(pool.acquire().await.map_err(|_| DbErr::ConnectionAcquire(ConnAcquireErr::Timeout))?)
    } else {
        let queue = queue(options.get_filename());
        let mut writer = queue.lock_owned().await;
        if writer.conn.is_none() {
            let options = (*options).clone().pragma("temp_store", "memory");
            let conn = options.connect().await.map_err(|e| DbErr::Conn(RuntimeErr::SqlxError(e)))?;
            *writer = Writer { conn: Some(conn), in_doubt: false, used: None };
        }
        writer.used = Some(Instant::now());
        if writer.in_doubt {
            roll_back(&mut writer).await;
        }
        Conn::File(writer)
    }))
}

/// The file `db` writes; `None` for a database in memory.
pub(super) fn file(db: &DatabaseConnection) -> Option<PathBuf> {
    let options = db.get_sqlite_connection_pool().connect_options();
    (!in_memory(&options)).then(|| options.get_filename().to_path_buf())
}

/// Whether the database is in memory (its one connection is the pool's). sqlx keeps that in a
/// field it shows only in the options' debug form.
pub(super) fn in_memory(options: &SqliteConnectOptions) -> bool {
    format!("{options:?}").contains("in_memory: true")
}

/// The file's writer; the writers of other files idle for [`IDLE`] are closed on the way.
fn queue(file: &std::path::Path) -> Arc<Queue<Writer>> {
    // A panic elsewhere while the map was held leaves it as consistent as before: keep using it.
    let mut writers = WRITERS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    writers.retain(|path, writer| path == file || !idle(writer));
    writers.entry(file.to_path_buf()).or_default().clone()
}

/// Whether a writer is unused, unwaited for and past [`IDLE`] (then its connection is closed).
fn idle(writer: &Arc<Queue<Writer>>) -> bool {
    let Ok(mut w) = writer.try_lock() else { return false };
    if w.in_doubt || w.used.is_none_or(|at| at.elapsed() < IDLE) {
        return false;
    }
    w.conn = None;
    true
}

/// Ends whatever transaction the writer may hold. A connection that cannot is closed (the next
/// writer opens a new one; closing it ends its transaction).
async fn roll_back(writer: &mut Writer) {
    if let Some(conn) = writer.conn.as_mut() {
        let broken = match conn.execute("ROLLBACK").await {
            Ok(_) => false,
            // Nothing was open: the transaction's BEGIN never ran, or its COMMIT did.
            Err(sqlx::Error::Database(e)) if e.message().contains("no transaction is active") => false,
            Err(e) => {
                tracing::warn!(error = %e, "the SQLite writer connection could not roll back; reopening it");
                true
            }
        };
        if broken {
            writer.conn = None;
        }
    }
    writer.in_doubt = false;
}

impl Conn {
    fn sqlite(&mut self) -> Result<&mut SqliteConnection, DbErr> {
        match self {
            Conn::File(writer) => writer.conn.as_mut().ok_or_else(closed),
            Conn::Memory(conn) => Ok(&mut **conn),
        }
    }
}

impl Turn {
    /// Runs a text of statements that ends the transaction it may begin (its last statement is
    /// `COMMIT`). When one fails the rest do not run, the transaction stays open, and the error
    /// comes with the count of statements that ran before it.
    pub(super) async fn run_text(&mut self, text: Statement) -> Result<(), (usize, DbErr)> {
        if let Conn::File(writer) = &mut self.0 {
            // Until the text has run to its COMMIT, a transaction may be open.
            writer.in_doubt = true;
        }
        let conn = self.0.sqlite().map_err(|e| (0, e))?;
        let values = text.values.unwrap_or(Values(Vec::new()));
        let mut ran = 0;
        each_result(conn, sqlx::query_with(&text.sql, SqlxValues(values)), |_| ran += 1)
            .await
            .map_err(|e| (ran, DbErr::Exec(RuntimeErr::SqlxError(e))))?;
        if let Conn::File(writer) = &mut self.0 {
            writer.in_doubt = false;
        }
        Ok(())
    }

    /// Rolls back whatever transaction is open on the connection.
    pub(super) async fn roll_back(&mut self) {
        match &mut self.0 {
            Conn::File(writer) => roll_back(writer).await,
            Conn::Memory(conn) => {
                let _ = conn.execute("ROLLBACK").await;
            }
        }
    }
}

/// Runs `query` (one or more statements), handing each statement's own result to `f` in order.
async fn each_result(
    conn: &mut SqliteConnection,
    query: Query<'_>,
    mut f: impl FnMut(SqliteQueryResult),
) -> Result<(), sqlx::Error> {
    // Each statement's own result; sqlx marks the call deprecated because only SQLite runs several
    // statements in one text, which is what this module is for.
    #[allow(deprecated)]
    let mut each = query.fetch_many(conn);
    while let Some(step) = each.try_next().await? {
        if let Either::Left(result) = step {
            f(result);
        }
    }
    Ok(())
}

fn closed() -> DbErr {
    DbErr::ConnectionAcquire(ConnAcquireErr::ConnectionClosed)
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqlxValues>;

impl FileTxn {
    /// Runs `stmt` in the transaction: with its `BEGIN IMMEDIATE` if it is the first.
    async fn run<T>(
        &self,
        stmt: &Statement,
        f: impl AsyncFn(&mut SqliteConnection, Query<'_>, bool) -> Result<T, sqlx::Error>,
    ) -> Result<T, sqlx::Error> {
        let mut inner = self.inner.lock().await;
        if inner.begun == Begun::Doubt {
            // As on PostgreSQL, a transaction whose statement failed takes no more statements.
            return Err(sqlx::Error::Protocol("a statement of this transaction failed; it must be rolled back".into()));
        }
        let first = inner.begun == Begun::Not;
        let sql = if first { format!("BEGIN IMMEDIATE; {}", stmt.sql) } else { stmt.sql.clone() };
        let values = stmt.values.clone().unwrap_or(Values(Vec::new()));
        inner.begun = Begun::Doubt;
        let conn = inner.conn.as_mut().ok_or_else(|| sqlx::Error::PoolClosed)?;
        let conn = conn.sqlite().map_err(|_| sqlx::Error::PoolClosed)?;
        let result = f(conn, sqlx::query_with(&sql, SqlxValues(values)), first).await;
        if result.is_ok() {
            inner.begun = Begun::Open;
        }
        result
    }

    /// The rows the statement changed. SQLite reports for a statement that changes no rows (the
    /// `BEGIN IMMEDIATE` sent with a first statement) the count of the connection's latest change,
    /// so that statement's count is left out.
    pub async fn execute(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        let done = self
            .run(&stmt, async |c, q, begins| {
                let (mut done, mut skip) = (SqliteQueryResult::default(), begins);
                each_result(c, q, |result| {
                    if !std::mem::take(&mut skip) {
                        done.extend([result]);
                    }
                })
                .await?;
                Ok(done)
            })
            .await;
        done.map(ExecResult::from).map_err(|e| DbErr::Exec(RuntimeErr::SqlxError(e)))
    }

    pub async fn query_all(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        let rows = self.run(&stmt, async |c, q, _| q.fetch_all(c).await).await;
        let rows = rows.map_err(|e| DbErr::Query(RuntimeErr::SqlxError(e)))?;
        Ok(rows.into_iter().map(QueryResult::from).collect())
    }

    pub async fn query_one(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        let row = self.run(&stmt, async |c, q, _| q.fetch_optional(c).await).await;
        Ok(row.map_err(|e| DbErr::Query(RuntimeErr::SqlxError(e)))?.map(QueryResult::from))
    }

    /// A statement without values, run as it is written (several statements, `;`-separated).
    pub async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.execute(Statement::from_string(sea_orm::DbBackend::Sqlite, sql.to_string())).await
    }

    /// Runs `last` and commits, in one text; a `last` that fails leaves the transaction to be
    /// rolled back when it is dropped.
    pub async fn commit_with(self, last: Statement) -> Result<(), DbErr> {
        let last = Statement { sql: format!("{}; COMMIT", last.sql), ..last };
        self.execute(last).await?;
        self.inner.lock().await.begun = Begun::Not;
        Ok(())
    }

    /// Commits what the transaction wrote and hands the turn on.
    pub async fn commit(self) -> Result<(), DbErr> {
        let mut inner = self.inner.lock().await;
        match inner.begun {
            Begun::Not => return Ok(()),
            // What ran before the failed statement is not committed without it.
            Begun::Doubt => {
                return Err(DbErr::Custom("a statement of this transaction failed; it was rolled back".into()));
            }
            Begun::Open => inner.begun = Begun::Doubt,
        }
        let conn = inner.conn.as_mut().ok_or_else(closed)?.sqlite()?;
        conn.execute("COMMIT").await.map_err(|e| DbErr::Exec(RuntimeErr::SqlxError(e)))?;
        inner.begun = Begun::Not;
        Ok(())
    }
}

impl Drop for FileTxn {
    /// A transaction that did not commit is rolled back before another writer may begin: by a
    /// task holding the turn, or, without a runtime, by the next writer.
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        let Some(conn) = inner.conn.take() else { return };
        if inner.begun == Begun::Not {
            return;
        }
        match conn {
            Conn::File(mut writer) => {
                writer.in_doubt = true;
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move { roll_back(&mut writer).await });
                }
            }
            // The pool tests a connection handed back, and a transaction left open is rolled back
            // (sqlx does so for a connection whose transaction went without an end).
            Conn::Memory(mut conn) => {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        let _ = conn.execute("ROLLBACK").await;
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sea_orm::sqlx::sqlite::SqliteConnectOptions;

    use super::in_memory;

    #[test]
    fn databases_in_memory_are_told_from_files() -> Result<(), sea_orm::sqlx::Error> {
        assert!(in_memory(&SqliteConnectOptions::from_str("sqlite::memory:")?));
        assert!(in_memory(&SqliteConnectOptions::from_str("sqlite://shared.db?mode=memory")?));
        assert!(!in_memory(&SqliteConnectOptions::from_str("sqlite:///var/lib/gymapi/gym.db?mode=rwc")?));
        Ok(())
    }
}
