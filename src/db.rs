//! Database connection and migrations (SQLite or PostgreSQL, chosen by URL).

mod across;
mod batch;
mod file_writer;
mod group;
mod retry;
mod secrets;
mod statements;
mod unit;
mod writers;

use std::{sync::Arc, time::Duration};

pub use across::{across_gyms, query_across_gyms};
use anyhow::Context as _;
pub use batch::{Tally, Writes};
use migration::{Migrator, MigratorTrait, citus, tenancy};
pub use retry::must_retry;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, ExecResult, QueryResult, Statement,
};
pub use secrets::server_secret;
pub use statements::StatementPool;
pub use unit::{Outcome, Unit};
pub use writers::Writing;

/// Connects to `url` and applies pending migrations: the database as `gymapi serve` and the
/// operators' commands use it. On a PostgreSQL whose tenant tables are partitioned by gym, every
/// connection then asks for generic plans (docs/performance.md, "Generic plans on partitioned
/// tables").
pub async fn open(url: &str) -> anyhow::Result<DatabaseConnection> {
    let db = connect(url).await?;
    migrate(&db).await?;
    let distributed = citus::is_distributed(&db).await?;
    DISTRIBUTED.store(distributed, std::sync::atomic::Ordering::Relaxed);
    if distributed {
        warn_if_commits_are_asynchronous(&db).await;
    }
    let plans = if distributed {
        Plans::Custom
    } else if tenancy::partitions(&db).await?.is_some() {
        Plans::Generic
    } else {
        return Ok(db);
    };
    db.close().await?;
    connect_with(url, plans).await
}

/// Says so in the log when a node of the cluster commits asynchronously: a shard move by logical
/// replication can then leave an acknowledged write behind (docs/scaling.md). A check that cannot
/// run (no right to ask every node) stops nothing.
async fn warn_if_commits_are_asynchronous(db: &DatabaseConnection) {
    match citus::asynchronous_nodes(db).await {
        Ok(nodes) if !nodes.is_empty() => tracing::warn!(
            nodes = nodes.join(", "),
            "synchronous_commit is off on these Citus nodes: a shard move by logical replication can lose \
             acknowledged writes; set it on, or move shards with shard_transfer_mode => 'block_writes'"
        ),
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "cannot ask the Citus nodes for synchronous_commit"),
    }
}

/// Whether the database this process serves is distributed by gym over a Citus cluster; [`open`]
/// finds out (one process serves one database). Statements that PostgreSQL takes best as one are
/// then sent so that each runs on the gym's node alone (`batch`, `webhooks::audience`).
static DISTRIBUTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// See [`DISTRIBUTED`].
pub fn distributed() -> bool {
    DISTRIBUTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The connection pool's open and idle connections (for `GET /metrics`).
pub fn pool_use(db: &DatabaseConnection) -> (u32, usize) {
    match db.get_database_backend() {
        DbBackend::Postgres => {
            let pool = db.get_postgres_connection_pool();
            (pool.size(), pool.num_idle())
        }
        DbBackend::Sqlite => {
            let pool = db.get_sqlite_connection_pool();
            (pool.size(), pool.num_idle())
        }
        _ => (0, 0),
    }
}

/// How PostgreSQL plans a prepared statement: its own choice, always the generic plan, or always
/// a plan for the values at hand.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plans {
    Chosen,
    Generic,
    /// On Citus: a generic plan of a statement such as `UPDATE … FROM (VALUES …) WHERE gym_id = $n`
    /// cannot tell the gym's shard and runs on every shard; planned with its values it goes to
    /// the gym's node alone.
    Custom,
}

/// Connects to `url`. An in-memory SQLite database keeps exactly one connection (each connection
/// would otherwise see its own empty database).
pub async fn connect(url: &str) -> anyhow::Result<DatabaseConnection> {
    connect_with(url, Plans::Chosen).await
}

async fn connect_with(url: &str, plans: Plans) -> anyhow::Result<DatabaseConnection> {
    let db = match Database::connect(options(url, plans, Tls::AsAsked)).await {
        Err(e) if refused_certificate(&e) && tls_preferred(url) => {
            // libpq's default `sslmode=prefer` connects without TLS when the handshake fails
            // (a Citus node's own certificate is X.509 v1, which rustls cannot read); so does
            // gymapi when the URL does not name an `sslmode`. A URL that does is kept to it.
            tracing::warn!(
                error = %e,
                "the database server's TLS certificate was refused; connecting without TLS as sslmode=prefer does \
                 (set sslmode=disable to say so, or give the server a certificate rustls accepts and set sslmode=verify-full)"
            );
            Database::connect(options(url, plans, Tls::Off)).await
        }
        other => other,
    }
    .with_context(|| format!("cannot connect to the database ({})", redact(url)))?;
    Ok(db)
}

/// Whether a PostgreSQL connection uses TLS as its URL asks, or not at all.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tls {
    AsAsked,
    Off,
}

/// The pool's options for `url`.
fn options(url: &str, plans: Plans, tls: Tls) -> ConnectOptions {
    let mut options = ConnectOptions::new(url.to_string());
    let memory = url.contains(":memory:") || url.contains("mode=memory");
    let sqlite = url.starts_with("sqlite:");
    options
        .max_connections(if memory {
            1
        } else if sqlite {
            4
        } else {
            16
        })
        .min_connections(if memory { 1 } else { 0 })
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(10))
        .idle_timeout(if memory { Duration::from_secs(u32::MAX as u64) } else { Duration::from_secs(300) })
        // No ping before each use: it doubled the round trips of every query. A connection the
        // server dropped fails its next query (503), and the pool replaces it.
        .test_before_acquire(false)
        .sqlx_logging(false);
    if memory {
        options.max_lifetime(Duration::from_secs(u32::MAX as u64));
    }
    if sqlite {
        // Set on every connection the pool opens, not once: `synchronous` and `busy_timeout` are
        // per-connection settings, and a connection left at SQLite's default `synchronous = FULL`
        // syncs the log to disk on every commit. WAL lets readers run beside the writer; the busy
        // timeout waits for the write lock instead of failing.
        options.map_sqlx_sqlite_opts(|o| {
            use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
            o.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(5))
                .foreign_keys(true)
        });
    }
    // One function sets everything PostgreSQL's connections need (a second would replace it).
    // On partitioned tables: a partitioned table costs each new plan about a millisecond more;
    // PostgreSQL keeps planning anew the statements whose generic plan it misjudges as dearer (its
    // estimate of one gym's rows is the average gym's), which the statement pool's connections
    // then pay on every request.
    options.map_sqlx_postgres_opts(move |o| {
        let o = match plans {
            Plans::Chosen => o,
            Plans::Generic => o.options([("plan_cache_mode", "force_generic_plan")]),
            Plans::Custom => o.options([("plan_cache_mode", "force_custom_plan")]),
        };
        match tls {
            Tls::AsAsked => o,
            Tls::Off => o.ssl_mode(sea_orm::sqlx::postgres::PgSslMode::Disable),
        }
    });
    options
}

/// Whether connecting failed in the TLS handshake (the server's certificate refused, say).
fn refused_certificate(e: &DbErr) -> bool {
    let DbErr::Conn(sea_orm::RuntimeErr::SqlxError(e)) = e else {
        return false;
    };
    match e {
        sea_orm::sqlx::Error::Tls(_) => true,
        sea_orm::sqlx::Error::Io(io) => io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()),
        _ => false,
    }
}

/// Whether `url` is a PostgreSQL URL that leaves `sslmode` to its default (`prefer`).
fn tls_preferred(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "postgres" | "postgresql") && u.query_pairs().all(|(k, v)| k != "sslmode" || v == "prefer")
    })
}

/// The database as the API's handlers use it: sea-orm's pool for transactions and writes, and a
/// [`StatementPool`] for the queries run outside a transaction, which hands a connection back
/// without sqlx's extra round trip (on SQLite, for a file: an in-memory database has one
/// connection, sea-orm's). A handle of a keyed write ([`Db::keyed`]) runs its statements in the
/// write's transaction ([`Unit`], see [`unit::transaction`]); outside one, a statement the database asks for again
/// (a serialization failure or deadlock, see [`must_retry`]) is run again, a few times. Everything
/// else of sea-orm's connection is reached through `Deref`.
#[derive(Clone)]
pub struct Db {
    orm: DatabaseConnection,
    reads: Reads,
    /// The keyed write this handle's statements run in, if it is one's.
    unit: Option<Unit>,
    /// Where the reads sent outside a transaction are copied, when someone asked (`recording`).
    recorded: Option<Recorded>,
}

/// The reads a [`Db`] sent outside a transaction, in order: tests and benches read a request's
/// statements from it to ask the database how it plans them.
pub type Recorded = Arc<std::sync::Mutex<Vec<Statement>>>;

#[derive(Clone)]
enum Reads {
    Pg(Arc<StatementPool<sea_orm::sqlx::Postgres>>),
    Sqlite(Arc<StatementPool<sea_orm::sqlx::Sqlite>>),
    Orm,
}

impl Db {
    /// Wraps sea-orm's connection; the statement pool connects with its options and has as many
    /// connections at most. Needs a Tokio runtime (the pool closes idle connections in a task of
    /// its own).
    pub fn new(orm: DatabaseConnection) -> Self {
        let reads = match &orm {
            DatabaseConnection::SqlxPostgresPoolConnection(_) => {
                let pool = orm.get_postgres_connection_pool();
                Reads::Pg(StatementPool::new((*pool.connect_options()).clone(), pool.options()))
            }
            DatabaseConnection::SqlxSqlitePoolConnection(_) => {
                let pool = orm.get_sqlite_connection_pool();
                if file_writer::in_memory(&pool.connect_options()) {
                    Reads::Orm
                } else {
                    Reads::Sqlite(StatementPool::new((*pool.connect_options()).clone(), pool.options()))
                }
            }
            _ => Reads::Orm,
        };
        Self { orm, reads, unit: None, recorded: None }
    }

    /// This database, copying every read it sends outside a transaction into `into` (a test's or
    /// a bench's look at a request's statements; nothing else records).
    pub fn recording(self, into: Recorded) -> Self {
        Self { recorded: Some(into), ..self }
    }

    fn record(&self, stmt: &Statement) {
        if let Some(Ok(mut kept)) = self.recorded.as_ref().map(|r| r.lock()) {
            kept.push(stmt.clone());
        }
    }

    /// This database as a keyed write's handler uses it: every transaction it begins a part of
    /// `unit`, every statement in the unit's transaction once one has begun, every hook after the
    /// unit's commit. `None` is this handle as it is.
    pub fn keyed(&self, unit: Option<&Unit>) -> Self {
        Self { orm: self.orm.clone(), reads: self.reads.clone(), unit: unit.cloned(), recorded: self.recorded.clone() }
    }

    pub fn orm(&self) -> &DatabaseConnection {
        &self.orm
    }

    /// The statement pool, on PostgreSQL.
    pub fn statements(&self) -> Option<&StatementPool<sea_orm::sqlx::Postgres>> {
        match &self.reads {
            Reads::Pg(pool) => Some(pool),
            _ => None,
        }
    }
}

impl std::ops::Deref for Db {
    type Target = DatabaseConnection;

    fn deref(&self) -> &DatabaseConnection {
        &self.orm
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Db {
    fn get_database_backend(&self) -> DbBackend {
        self.orm.get_database_backend()
    }

    async fn execute(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        match unit::transaction(self.unit.as_ref(), &self.orm).await? {
            Some(txn) => txn.execute(stmt).await,
            None => retry::retried(|| self.orm.execute(stmt.clone())).await,
        }
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        match unit::transaction(self.unit.as_ref(), &self.orm).await? {
            Some(txn) => txn.execute_unprepared(sql).await,
            None => retry::retried(|| self.orm.execute_unprepared(sql)).await,
        }
    }

    async fn query_one(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        if let Some(txn) = unit::transaction(self.unit.as_ref(), &self.orm).await? {
            return txn.query_one(stmt).await;
        }
        self.record(&stmt);
        retry::retried(|| async {
            match &self.reads {
                Reads::Pg(pool) => pool.query_one(stmt.clone()).await,
                Reads::Sqlite(pool) => pool.query_one(stmt.clone()).await,
                Reads::Orm => self.orm.query_one(stmt.clone()).await,
            }
        })
        .await
    }

    async fn query_all(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        if let Some(txn) = unit::transaction(self.unit.as_ref(), &self.orm).await? {
            return txn.query_all(stmt).await;
        }
        self.record(&stmt);
        retry::retried(|| async {
            match &self.reads {
                Reads::Pg(pool) => pool.query_all(stmt.clone()).await,
                Reads::Sqlite(pool) => pool.query_all(stmt.clone()).await,
                Reads::Orm => self.orm.query_all(stmt.clone()).await,
            }
        })
        .await
    }

    fn support_returning(&self) -> bool {
        self.orm.support_returning()
    }
}

/// Applies pending migrations. On a PostgreSQL whose tenant tables are partitioned by gym, or
/// distributed by gym over a Citus cluster, the tables the migrations just created are
/// partitioned or placed the same way.
pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    Migrator::up(db, None).await.context("migrations failed")?;
    if let Some(n) = tenancy::partitions(db).await? {
        tenancy::partition_by_gym(db, n).await.context("partitioning the new tenant tables failed")?;
    }
    if citus::is_distributed(db).await? {
        citus::distribute(db).await.context("placing the new tables on the Citus cluster failed")?;
    }
    Ok(())
}

/// Makes the reference tables reference tables and distributes every tenant table by `gym_id`,
/// colocated, on a Citus coordinator (see docs/scaling.md). Rows, keys and foreign keys are kept;
/// tables already placed are left as they are. `None` when the database has no Citus extension.
pub async fn distribute(db: &DatabaseConnection) -> anyhow::Result<Option<citus::Distributed>> {
    if !citus::has_citus(db).await? {
        return Ok(None);
    }
    if tenancy::partitions(db).await?.is_some() {
        anyhow::bail!("the tenant tables are hash-partitioned; Citus distributes plain tables");
    }
    Ok(Some(citus::distribute(db).await.context("distributing the tables failed")?))
}

/// Hash-partitions every tenant table by `gym_id` in `partitions` partitions (PostgreSQL; see
/// docs/scaling.md). Rows are kept; tables already partitioned are left as they are.
pub async fn partition(db: &DatabaseConnection, partitions: u32) -> anyhow::Result<()> {
    if let Some(n) = tenancy::partitions(db).await?.filter(|n| *n != partitions) {
        anyhow::bail!("the tenant tables already have {n} partitions; repartitioning is not supported");
    }
    tenancy::partition_by_gym(db, partitions).await.context("partitioning the tenant tables failed")
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Runs `sweep` on `db` every `every`, first at once, in a task of its own (a tick that comes late
/// waits for the sweep before it rather than bunching up); a sweep that fails is logged as
/// "could not `what`" and tried again at the next tick. The sweepers of expired idempotency
/// records and of events past their time run so.
pub fn sweep_every<F, Fut>(db: DatabaseConnection, every: Duration, what: &'static str, sweep: F)
where
    F: Fn(DatabaseConnection) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), DbErr>> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = sweep(db.clone()).await {
                tracing::warn!(error = %e, "could not {what}");
            }
        }
    });
}

/// A transaction that reads before it writes. On SQLite it first waits for this process's turn to
/// write the file (`writers`), then takes the write lock (a write that changes nothing): its reads
/// then see the newest data, and its writes never meet a snapshot another connection made stale
/// (`SQLITE_BUSY_SNAPSHOT`, which no wait cures). PostgreSQL needs nothing: its writers lock rows.
/// Begun through the handle of a keyed write, the transaction is a part of the write's [`Unit`].
pub async fn begin_writing(db: &impl Handle) -> Result<Writing, DbErr> {
    unit::begin(db.unit(), db.connection()).await
}

/// What a writer is given: sea-orm's connection, and the keyed write whose handle it is, if any
/// ([`Db::keyed`]). A bare connection runs in no keyed write.
pub trait Handle: Sync {
    fn connection(&self) -> &DatabaseConnection;
    fn unit(&self) -> Option<&Unit>;
}

impl Handle for Db {
    fn connection(&self) -> &DatabaseConnection {
        &self.orm
    }
    fn unit(&self) -> Option<&Unit> {
        self.unit.as_ref()
    }
}

impl Handle for DatabaseConnection {
    fn connection(&self) -> &DatabaseConnection {
        self
    }
    fn unit(&self) -> Option<&Unit> {
        None
    }
}

/// Runs `hook` once what the caller just committed through `db` is committed for real: at once,
/// or, through the handle of a keyed write whose transaction is open or whose writes wait for its
/// commit, after the unit's commit (never if it rolls back). For what must not be seen before the
/// data it announces (waking a long poll that then looks).
pub async fn after_commit(db: &impl Handle, hook: impl std::future::Future<Output = ()> + Send + 'static) {
    unit::after_commit(db.unit(), hook).await
}

/// Through the handle of a keyed write, `writes` (the handler's last: it reads nothing after them) are kept to run
/// with the write's commit. On PostgreSQL they and the idempotency record are one statement, sent
/// before `COMMIT`: one round trip instead of two. On SQLite, when the keyed write has not begun a
/// transaction, its record, these writes and `COMMIT` go to the file's writer connection in one
/// text, so the writer is held for one round trip instead of two. Should one of them fail, nothing
/// is written and `refusal`, given the database's error, makes what answers instead of the
/// handler's response. Anywhere else they are handed back with `refusal`: run them now, and answer
/// their error with it.
pub fn defer_to_commit<R, F, E>(db: &Db, writes: Writes, refusal: R) -> Option<(Writes, R)>
where
    R: FnOnce(DbErr) -> F + Send + 'static,
    F: std::future::Future<Output = E> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    use futures_util::FutureExt as _;
    let Some(unit) = writes.backend().and_then(|backend| db.unit.as_ref().filter(|u| u.may_defer(backend))) else {
        return Some((writes, refusal));
    };
    let (writes, tallied) = writes.into_parts();
    unit.defer(
        writes,
        tallied,
        Box::new(move |e| {
            refusal(e).map(|refused| Box::new(refused) as Box<dyn std::error::Error + Send + Sync>).boxed()
        }),
    );
    None
}

/// Adds to counting rows of `table` in one statement: each row is its key's values (in the order
/// of `keys`) and an amount, added to `column` of the row with that key, created when missing.
/// Keys must differ between rows.
pub async fn add_up(
    db: &impl ConnectionTrait,
    table: &str,
    keys: &[&str],
    column: &str,
    rows: impl IntoIterator<Item = (Vec<sea_orm::Value>, i64)>,
) -> Result<(), DbErr> {
    if let Some(statement) = add_up_statement(db.get_database_backend(), table, keys, column, rows) {
        db.execute(statement).await?;
    }
    Ok(())
}

/// The statement of [`add_up`], for a [`Writes`]; `None` when there is nothing to add.
pub fn add_up_statement(
    backend: DbBackend,
    table: &str,
    keys: &[&str],
    column: &str,
    rows: impl IntoIterator<Item = (Vec<sea_orm::Value>, i64)>,
) -> Option<Statement> {
    let mut values: Vec<sea_orm::Value> = Vec::new();
    let mut tuples = Vec::new();
    let tuple = format!("({}?)", "?, ".repeat(keys.len()));
    for (key, amount) in rows {
        values.extend(key);
        values.push(amount.into());
        tuples.push(tuple.as_str());
    }
    if tuples.is_empty() {
        return None;
    }
    let keys = keys.join(", ");
    let sql = placeholders(
        backend,
        &format!(
            "INSERT INTO {table} ({keys}, {column}) VALUES {} \
             ON CONFLICT ({keys}) DO UPDATE SET {column} = {table}.{column} + excluded.{column}",
            tuples.join(", ")
        ),
    );
    Some(Statement::from_sql_and_values(backend, sql, values))
}

/// The condition `id …` of an `UPDATE` that claims the rows `subquery` selects (their ids, with
/// its own `LIMIT`): `= ANY(ARRAY(… FOR UPDATE SKIP LOCKED))` on PostgreSQL, which runs the
/// subquery once and never waits for rows another claim holds (with `IN (…)` it may run it again
/// for every row it joins, and claim more than the limit); `IN (…)` on SQLite, whose writer holds
/// the file.
pub fn claimed(backend: DbBackend, subquery: &str) -> String {
    match backend {
        DbBackend::Postgres => format!("= ANY(ARRAY({subquery} FOR UPDATE SKIP LOCKED))"),
        _ => format!("IN ({subquery})"),
    }
}

/// The facility the device `?` of the gym `?` is at when the statement runs (`gym_id = ? AND id =
/// ?`): a statement that hands a device its facility's work reads it here, so a device moved a
/// moment before takes the work of its new facility and none of its old one's.
pub const DEVICE_FACILITY: &str = "(SELECT facility_id FROM devices WHERE gym_id = ? AND id = ?)";

/// The condition that the API key `?` is in force for devices (neither revoked nor rolled), to
/// add to a statement that hands something to a device: a key revoked or rolled a moment before
/// is never handed a command, a payment or a receipt.
pub const KEY_IN_FORCE: &str =
    "EXISTS (SELECT 1 FROM api_keys WHERE id = ? AND revoked_at IS NULL AND expires_at IS NULL)";

/// Whether a statement broke a unique index or constraint.
pub fn is_unique_violation(err: &sea_orm::DbErr) -> bool {
    matches!(err.sql_err(), Some(sea_orm::SqlErr::UniqueConstraintViolation(_)))
}

/// `select` (with `?` placeholders, as [`placeholders`] makes them) whose rows stay locked for the
/// rest of the transaction: `FOR UPDATE` on PostgreSQL; on SQLite the file's one writer holds
/// them already.
pub fn for_update(backend: DbBackend, select: &str) -> String {
    let lock = if backend == DbBackend::Postgres { " FOR UPDATE" } else { "" };
    placeholders(backend, &format!("{select}{lock}"))
}

/// `?` placeholders in the form of the backend (`$1`, `$2`, ... on PostgreSQL).
pub fn placeholders(backend: DbBackend, sql: &str) -> String {
    if backend != DbBackend::Postgres {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_backend() {
        assert_eq!(placeholders(DbBackend::Postgres, "a = ? AND b = ?"), "a = $1 AND b = $2");
        assert_eq!(placeholders(DbBackend::Sqlite, "a = ? AND b = ?"), "a = ? AND b = ?");
    }

    /// Every connection of a SQLite pool syncs in WAL's `NORMAL` mode and enforces foreign keys,
    /// not only the first: four transactions held at once each hold a connection of their own.
    #[tokio::test]
    async fn every_sqlite_connection_gets_the_settings() -> anyhow::Result<()> {
        use sea_orm::{ConnectionTrait, Statement, TransactionTrait};
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("gymapi.db").display());
        let db = connect(&url).await?;
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(db.begin().await?);
        }
        for txn in &held {
            let pragma = |name: &str| Statement::from_string(DbBackend::Sqlite, format!("PRAGMA {name}"));
            let value = |row: Option<sea_orm::QueryResult>| -> anyhow::Result<String> {
                let row = row.context("no row")?;
                Ok(row
                    .try_get_by_index::<i64>(0)
                    .map(|v| v.to_string())
                    .or_else(|_| row.try_get_by_index::<String>(0))?)
            };
            assert_eq!(value(txn.query_one(pragma("journal_mode")).await?)?, "wal");
            assert_eq!(value(txn.query_one(pragma("synchronous")).await?)?, "1", "NORMAL");
            assert_eq!(value(txn.query_one(pragma("foreign_keys")).await?)?, "1");
            assert_eq!(value(txn.query_one(pragma("busy_timeout")).await?)?, "5000");
        }
        Ok(())
    }
}
