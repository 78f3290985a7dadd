//! Transactions that write: PostgreSQL's through sea-orm's pool, SQLite's on the file's one writer
//! connection (`file_writer`).

use std::sync::Arc;

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, ExecResult, QueryResult, Statement,
    TransactionTrait,
};

use super::file_writer::{self, FileTxn};

/// A writing transaction on either backend.
pub(super) enum Txn {
    Pg(DatabaseTransaction),
    File(FileTxn),
}

impl Txn {
    /// Begins one: on SQLite it waits for this process's turn to write the file. On PostgreSQL the
    /// `BEGIN` runs in a task of its own, so that a request cut off meanwhile (its client gone)
    /// cannot stop it between sending `BEGIN` and reading its answer: the driver counts a
    /// transaction only once answered, and would hand the connection back to the pool inside one
    /// that nobody ends. Begun without a taker, the transaction is dropped, and so rolled back.
    pub(super) async fn begin(db: &DatabaseConnection) -> Result<Txn, DbErr> {
        match db.get_database_backend() {
            DbBackend::Sqlite => Ok(Txn::File(file_writer::begin(db).await?)),
            _ => {
                let db = db.clone();
                let begun = tokio::spawn(async move { db.begin().await }).await;
                Ok(Txn::Pg(begun.map_err(|e| DbErr::Custom(format!("beginning a transaction failed: {e}")))??))
            }
        }
    }

    pub(super) async fn commit(self) -> Result<(), DbErr> {
        match self {
            Txn::Pg(txn) => txn.commit().await,
            Txn::File(txn) => txn.commit().await,
        }
    }

    /// Runs `last`, statements whose last one writes one row or, when its row's key is taken,
    /// changes nothing (PostgreSQL) or breaks a unique index (SQLite), and commits if it wrote;
    /// rolls back and answers `false` if not. On PostgreSQL `last` is one statement (every statement
    /// but the last a part of it, see `db::batch`), or on a distributed database one statement
    /// after another; on SQLite `last` and `COMMIT` go in one text.
    pub(super) async fn commit_with(self, last: Vec<Statement>) -> Result<bool, DbErr> {
        match self {
            Txn::Pg(txn) => {
                let mut last = last;
                let row = if super::batch::one_by_one() {
                    let row = last.pop();
                    super::batch::each(&txn, last, None).await?;
                    row
                } else {
                    super::batch::one(last)
                };
                let Some(row) = row else {
                    return Err(DbErr::Custom("no statement to commit with".into()));
                };
                if txn.execute(row).await?.rows_affected() == 0 {
                    return Ok(false);
                }
                txn.commit().await?;
                Ok(true)
            }
            Txn::File(txn) => match txn.commit_with(super::batch::in_sequence(DbBackend::Sqlite, last)).await {
                Ok(()) => Ok(true),
                Err(e) if super::is_unique_violation(&e) => Ok(false),
                Err(e) => Err(e),
            },
        }
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Txn {
    fn get_database_backend(&self) -> DbBackend {
        match self {
            Txn::Pg(txn) => txn.get_database_backend(),
            Txn::File(_) => DbBackend::Sqlite,
        }
    }

    async fn execute(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        match self {
            Txn::Pg(txn) => txn.execute(stmt).await,
            Txn::File(txn) => txn.execute(stmt).await,
        }
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        match self {
            Txn::Pg(txn) => txn.execute_unprepared(sql).await,
            Txn::File(txn) => txn.execute_unprepared(sql).await,
        }
    }

    async fn query_one(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        match self {
            Txn::Pg(txn) => txn.query_one(stmt).await,
            Txn::File(txn) => txn.query_one(stmt).await,
        }
    }

    async fn query_all(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        match self {
            Txn::Pg(txn) => txn.query_all(stmt).await,
            Txn::File(txn) => txn.query_all(stmt).await,
        }
    }

    fn support_returning(&self) -> bool {
        self.get_database_backend().support_returning()
    }
}

/// A transaction begun by [`begin_writing`](super::begin_writing). On SQLite it holds this
/// process's turn to write the file until it is committed, rolled back or dropped. Inside a keyed
/// write it is a part of the write's unit (`db::unit`): its commit waits for the unit's, and
/// dropping it uncommitted rolls the whole unit back.
pub struct Writing {
    holder: Holder,
}

enum Holder {
    Own(Txn),
    Part { txn: Arc<Txn>, ending: PartEnding },
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
    Ok(Writing { holder: Holder::Own(Txn::begin(db).await?) })
}

impl Writing {
    /// A part of a shared transaction (`db::unit`): its commit does nothing, and `abandon` runs
    /// when it goes without one.
    pub(super) fn part(txn: Arc<Txn>, abandon: impl FnOnce() + Send + Sync + 'static) -> Self {
        Writing { holder: Holder::Part { txn, ending: PartEnding { abandon: Some(Box::new(abandon)) } } }
    }

    /// Commits; a `Writing` dropped instead rolls back. A part of a keyed write commits with it.
    pub async fn commit(self) -> Result<(), DbErr> {
        match self.holder {
            Holder::Own(txn) => txn.commit().await,
            Holder::Part { txn, mut ending } => {
                ending.abandon = None;
                drop(txn);
                Ok(())
            }
        }
    }

    fn txn(&self) -> &Txn {
        match &self.holder {
            Holder::Own(txn) => txn,
            Holder::Part { txn, .. } => txn,
        }
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
