//! Transactions that write, and on SQLite the queue in which they take turns.
//!
//! SQLite lets one connection write a file at a time. A connection that finds the write lock taken
//! sleeps in SQLite's busy handler for 1, 2, 5, 10, 15, 20, 25 ms and more between tries, and one
//! that keeps losing to newcomers waits tens of milliseconds while the lock is free most of the
//! time. Here the writing transactions of this process wait instead in one first-come first-served
//! queue per file, and take the lock only when their turn comes, which it then nearly always is
//! free for. A writer of another process (an operator's command) still meets the busy handler.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, LazyLock, Mutex},
};

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, ExecResult, QueryResult, Statement,
    TransactionTrait,
};
use tokio::sync::OwnedMutexGuard;

/// A write that changes nothing, prepared once per connection, on a column no foreign key refers
/// to (SQLite compiles a check of every referring table into an update of a referred-to key).
const TAKE_THE_LOCK: &str = "UPDATE gym_counters SET value = value WHERE 0";

/// The queue of each SQLite file this process writes: one entry per file it opens (a server opens
/// one).
static QUEUES: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = LazyLock::new(Default::default);

/// A transaction begun by [`begin_writing`](super::begin_writing). On SQLite it holds this
/// process's turn to write the file until it is committed, rolled back or dropped. Inside a keyed
/// write it is a part of the write's unit (`db::unit`): its commit waits for the unit's, and
/// dropping it uncommitted rolls the whole unit back.
pub struct Writing {
    holder: Holder,
}

enum Holder {
    Own {
        // Declared first, so dropped first: the transaction ends before the turn passes on.
        txn: DatabaseTransaction,
        _turn: Option<OwnedMutexGuard<()>>,
    },
    Part {
        txn: Arc<DatabaseTransaction>,
        ending: PartEnding,
    },
}

/// What a part does when it goes without a commit (its unit rolls back).
struct PartEnding {
    abandon: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Drop for PartEnding {
    fn drop(&mut self) {
        if let Some(abandon) = self.abandon.take() {
            abandon();
        }
    }
}

/// Begins a transaction of its own that reads before it writes (see [`super::begin_writing`]).
pub async fn begin(db: &DatabaseConnection) -> Result<Writing, DbErr> {
    let (txn, turn) = begin_own(db).await?;
    Ok(Writing { holder: Holder::Own { txn, _turn: turn } })
}

impl Writing {
    /// A part of a shared transaction (`db::unit`): its commit does nothing, and `abandon` runs
    /// when it goes without one.
    pub(super) fn part(txn: Arc<DatabaseTransaction>, abandon: impl FnOnce() + Send + Sync + 'static) -> Self {
        Writing { holder: Holder::Part { txn, ending: PartEnding { abandon: Some(Box::new(abandon)) } } }
    }
}

/// A transaction of its own, and on SQLite the turn it holds.
pub(super) async fn begin_own(
    db: &DatabaseConnection,
) -> Result<(DatabaseTransaction, Option<OwnedMutexGuard<()>>), DbErr> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return Ok((db.begin().await?, None));
    }
    let turn = queue(db).lock_owned().await;
    let txn = db.begin().await?;
    txn.execute(Statement::from_string(DbBackend::Sqlite, TAKE_THE_LOCK)).await?;
    Ok((txn, Some(turn)))
}

fn queue(db: &DatabaseConnection) -> Arc<tokio::sync::Mutex<()>> {
    let options = db.get_sqlite_connection_pool().connect_options();
    let file = options.get_filename();
    // A panic elsewhere while the map was held leaves it as consistent as before: keep using it.
    let mut queues = QUEUES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(queue) = queues.get(file) {
        return queue.clone();
    }
    queues.entry(file.to_path_buf()).or_default().clone()
}

impl Writing {
    /// Commits; a `Writing` dropped instead rolls back. A part of a keyed write commits with it.
    pub async fn commit(self) -> Result<(), DbErr> {
        match self.holder {
            Holder::Own { txn, _turn } => txn.commit().await,
            Holder::Part { txn, mut ending } => {
                ending.abandon = None;
                drop(txn);
                Ok(())
            }
        }
    }

    fn txn(&self) -> &DatabaseTransaction {
        match &self.holder {
            Holder::Own { txn, .. } => txn,
            Holder::Part { txn, .. } => txn,
        }
    }
}

impl std::ops::Deref for Writing {
    type Target = DatabaseTransaction;

    fn deref(&self) -> &DatabaseTransaction {
        self.txn()
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Writing {
    fn get_database_backend(&self) -> DbBackend {
        self.txn().get_database_backend()
    }

    async fn execute(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        self.txn().execute(stmt).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.txn().execute_unprepared(sql).await
    }

    async fn query_one(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        self.txn().query_one(stmt).await
    }

    async fn query_all(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.txn().query_all(stmt).await
    }

    fn support_returning(&self) -> bool {
        self.txn().support_returning()
    }
}
