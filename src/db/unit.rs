//! The unit of a keyed write. A request that carries an `Idempotency-Key` runs its handler with a
//! [`Unit`], held by the handle of the database the handler is given (`Db::keyed`, through
//! `RequestContext::db`): every transaction the handler begins through that handle
//! ([`super::begin_writing`]) is a part of one database transaction, every statement it sends
//! through the handle once that transaction has begun runs in it too (so the handler reads what it
//! wrote), and what the handler wants done after its commit ([`super::after_commit`]) waits for the
//! real one. Nothing but the handle says whether a statement runs in the unit. The middleware that kept
//! the key commits the unit together with the write's idempotency record, once the response is
//! known, or rolls it back: a keyed write and the record of its response are committed together,
//! or neither is.
//!
//! A part dropped without its commit (the handler's error, a retried import attempt) rolls back the
//! whole unit at once; a later part begins it anew.
//!
//! A handler whose reads are done may leave its last writes to the commit
//! ([`super::defer_to_commit`]). On PostgreSQL they become one statement with the record (its
//! data-modifying `WITH` parts), sent just before `COMMIT` in the transaction the handler's reads
//! began. On SQLite, where nothing of the unit may have begun a transaction, the record, the writes
//! and `COMMIT` reach the file's writer connection in one text, with those of other keyed writes
//! waiting for it (`db::group`). Should one of the writes fail, nothing of it is written and the
//! handler's refusal, made from the error, answers.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
};

use futures_util::future::BoxFuture;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, Statement};

use super::writers::{self, Txn, Writing};
use super::{batch::Tally, file_writer::Failed, group};

type Hook = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What answers instead of the handler's response when one of its deferred writes fails: the
/// handler's own refusal, made from the database's error.
pub type Refusal = Box<dyn FnOnce(DbErr) -> BoxFuture<'static, Box<dyn std::error::Error + Send + Sync>> + Send>;

/// Writes a handler left to run with the unit's commit ([`super::defer_to_commit`]).
struct Deferred {
    writes: Vec<Statement>,
    /// The write whose rows are told once committed, by its index in `writes`.
    tallied: Option<(usize, Tally)>,
    refusal: Refusal,
}

/// How a unit's commit ended.
pub enum Outcome {
    Committed,
    /// Another request with the key committed first (its record holds the key): nothing of this
    /// one was written.
    Taken,
    /// A deferred write failed, so nothing was written: the handler's refusal, to answer with.
    Refused(Box<dyn std::error::Error + Send + Sync>),
}

/// One keyed write's transaction, shared by the parts its handler begins (see the module).
#[derive(Clone, Default)]
pub struct Unit(Arc<Mutex<State>>);

impl std::fmt::Debug for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unit").field("open", &self.state().open.is_some()).finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    open: Option<Open>,
    /// What the handler asked to run after its commit, in order.
    hooks: Vec<Hook>,
    deferred: Option<Deferred>,
}

struct Open {
    /// On SQLite it holds this process's turn to write the file, to the real commit.
    txn: Arc<Txn>,
}

impl Unit {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the state was held leaves it as consistent as before: keep using it.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The unit's transaction, if a part has begun it.
    fn txn(&self) -> Option<Arc<Txn>> {
        self.state().open.as_ref().map(|o| o.txn.clone())
    }

    /// A part of the unit: its transaction, begun now if no part has begun it yet.
    pub(super) async fn part(&self, db: &DatabaseConnection) -> Result<Arc<Txn>, DbErr> {
        if let Some(txn) = self.txn() {
            return Ok(txn);
        }
        if self.state().deferred.is_some() {
            // They would run after what this part writes: out of the handler's order.
            return Err(DbErr::Custom("a keyed write began a transaction after deferring its writes".into()));
        }
        let txn = Arc::new(Txn::begin(db).await?);
        self.state().open = Some(Open { txn: txn.clone() });
        Ok(txn)
    }

    /// A part ended without its commit: everything of the unit is rolled back (the transaction goes
    /// with its last holder) and the hooks are dropped.
    pub(super) fn abandon(&self) {
        let mut state = self.state();
        state.open = None;
        state.hooks.clear();
        state.deferred = None;
    }

    /// Whether writes may be left to the commit: nothing was deferred before and, on SQLite, nothing
    /// of the unit has begun a transaction (its group begins its own).
    pub(super) fn may_defer(&self, backend: DbBackend) -> bool {
        let state = self.state();
        state.deferred.is_none() && (backend == DbBackend::Postgres || state.open.is_none())
    }

    /// Keeps `writes` to run with the commit (the caller asked [`Self::may_defer`]; the unit is its
    /// request's alone).
    pub(super) fn defer(&self, writes: Vec<Statement>, tallied: Option<(usize, Tally)>, refusal: Refusal) {
        self.state().deferred = Some(Deferred { writes, tallied, refusal });
    }

    /// Rolls back whatever the unit holds.
    pub fn rollback(&self) {
        self.abandon();
    }

    /// Runs `last` (statements whose last one writes the row that marks the unit done, the
    /// idempotency record) in the unit's transaction (begun now if the handler wrote nothing) and
    /// commits when it wrote its row, then runs the hooks; rolls back when it did not (see
    /// [`Txn::commit_with`]). Deferred writes go with `last`: in the same statement on PostgreSQL
    /// ([`Self::commit_kept`]), after it in the group's text on SQLite.
    pub async fn commit_with(&self, db: &DatabaseConnection, last: Vec<Statement>) -> Result<Outcome, DbErr> {
        let deferred = self.state().deferred.take();
        match deferred {
            Some(d) if db.get_database_backend() == DbBackend::Sqlite => {
                return self.commit_deferred(db, last, d).await;
            }
            Some(d) => return self.commit_kept(db, last, d).await,
            None => {}
        }
        drop(self.part(db).await?);
        let (Some(txn), hooks) = self.take_open()? else {
            return Err(DbErr::Custom("the keyed write's transaction was rolled back".into()));
        };
        if !txn.commit_with(last).await? {
            return Ok(Outcome::Taken);
        }
        for hook in hooks {
            hook.await;
        }
        Ok(Outcome::Committed)
    }

    /// The unit's open transaction, if a part began one, and the hooks, both taken from the unit.
    fn take_open(&self) -> Result<(Option<Txn>, Vec<Hook>), DbErr> {
        let (open, hooks) = {
            let mut state = self.state();
            (state.open.take(), std::mem::take(&mut state.hooks))
        };
        let Some(Open { txn }) = open else { return Ok((None, hooks)) };
        let txn = Arc::try_unwrap(txn)
            .map_err(|_| DbErr::Custom("a part of the keyed write is still running at its commit".into()))?;
        Ok((Some(txn), hooks))
    }

    /// PostgreSQL: the deferred writes and `last` (the record, an upsert that returns its row) are
    /// one statement (`batch::kept_with`), run in the transaction the handler's reads began, then
    /// committed, or on its own when nothing began one. When another request holds the key the
    /// statement fails with `GY409` and nothing of it is written: the key is taken. Either way the
    /// statement tells the rows of the tallied write.
    async fn commit_kept(
        &self,
        db: &DatabaseConnection,
        mut last: Vec<Statement>,
        d: Deferred,
    ) -> Result<Outcome, DbErr> {
        let Some(record) = last.pop() else { return Err(DbErr::Custom("no statement to commit with".into())) };
        if super::batch::one_by_one() {
            return self.commit_one_by_one(db, last, d, record).await;
        }
        let tallied = d.tallied.as_ref().map(|(at, _)| *at);
        let statement = super::batch::kept_with(d.writes.into_iter().chain(last).collect(), tallied, record);
        let (open, hooks) = self.take_open()?;
        let ran = match open {
            Some(txn) => match txn.query_one(statement).await {
                Ok(row) => txn.commit().await.map(|()| row),
                Err(e) => Err(e),
            },
            None => db.query_one(statement).await,
        };
        match ran {
            Ok(row) => {
                if let Some((_, tally)) = &d.tallied {
                    tally.set(super::batch::rows_told(row.as_ref(), 1));
                }
                for hook in hooks {
                    hook.await;
                }
                Ok(Outcome::Committed)
            }
            Err(e) if key_held(&e) => Ok(Outcome::Taken),
            Err(e) => Ok(Outcome::Refused((d.refusal)(e).await)),
        }
    }

    /// PostgreSQL distributed by gym (see `batch::one_by_one`): the deferred writes, the rest of
    /// `last` and the record one by one in the unit's transaction (begun now if nothing began it);
    /// committed when the record was written, rolled back when another request holds the key.
    async fn commit_one_by_one(
        &self,
        db: &DatabaseConnection,
        last: Vec<Statement>,
        d: Deferred,
        record: Statement,
    ) -> Result<Outcome, DbErr> {
        let (open, hooks) = self.take_open()?;
        let txn = match open {
            Some(txn) => txn,
            None => Txn::begin(db).await?,
        };
        let writes: Vec<Statement> = d.writes.into_iter().chain(last).collect();
        let recorded = match super::batch::each(&txn, writes, d.tallied.as_ref()).await {
            Ok(()) => txn.query_one(record).await,
            Err(e) => Err(e),
        };
        match recorded {
            Ok(Some(_)) => {
                txn.commit().await?;
                for hook in hooks {
                    hook.await;
                }
                Ok(Outcome::Committed)
            }
            Ok(None) => Ok(Outcome::Taken),
            Err(e) => Ok(Outcome::Refused((d.refusal)(e).await)),
        }
    }

    /// SQLite: `last` and the deferred writes go to the file's group (`db::group`), committed in
    /// one text with the other keyed writes waiting for the writer.
    async fn commit_deferred(
        &self,
        db: &DatabaseConnection,
        last: Vec<Statement>,
        d: Deferred,
    ) -> Result<Outcome, DbErr> {
        let hooks = std::mem::take(&mut self.state().hooks);
        let (row, writes) = (last.len().saturating_sub(1), last.len()..last.len() + d.writes.len());
        let statements = last.into_iter().chain(d.writes).collect();
        match group::commit(db, statements).await {
            Ok(()) => {
                for hook in hooks {
                    hook.await;
                }
                Ok(Outcome::Committed)
            }
            Err(Failed { statement, error }) if statement == row && super::is_unique_violation(&error) => {
                Ok(Outcome::Taken)
            }
            Err(Failed { statement, error }) if writes.contains(&statement) => {
                Ok(Outcome::Refused((d.refusal)(error).await))
            }
            Err(Failed { error, .. }) => Err(error),
        }
    }
}

/// Whether PostgreSQL refused a keyed write's statement because another request holds its key
/// (`gymapi_key_kept`, SQLSTATE `GY409`).
fn key_held(err: &DbErr) -> bool {
    let (DbErr::Query(sea_orm::RuntimeErr::SqlxError(e)) | DbErr::Exec(sea_orm::RuntimeErr::SqlxError(e))) = err else {
        return false;
    };
    e.as_database_error().and_then(|d| d.code()).is_some_and(|code| code == "GY409")
}

/// A transaction for a writer: a part of `unit`, the keyed write its handle runs in, if any.
pub(super) async fn begin(unit: Option<&Unit>, db: &DatabaseConnection) -> Result<Writing, DbErr> {
    let Some(unit) = unit else { return writers::begin(db).await };
    let txn = unit.part(db).await?;
    let unit = unit.clone();
    Ok(Writing::part(txn, move || unit.abandon()))
}

/// Where a statement sent through a handle of `unit` runs: in the write's transaction. On
/// PostgreSQL the first statement begins it, so a keyed write is one transaction, its reads
/// included. On SQLite only a writer begins it (`begin_writing`): reads before it run outside,
/// without holding the file's write lock.
pub(super) async fn transaction(unit: Option<&Unit>, db: &DatabaseConnection) -> Result<Option<Arc<Txn>>, DbErr> {
    let Some(unit) = unit else { return Ok(None) };
    if let Some(txn) = unit.txn() {
        return Ok(Some(txn));
    }
    if db.get_database_backend() == DbBackend::Postgres {
        return unit.part(db).await.map(Some);
    }
    Ok(None)
}

/// Runs `hook` once what was just committed is committed for real: at once, or, when `unit` has
/// its transaction open or writes waiting for its commit, after the unit's commit (never if it
/// rolls back).
pub(super) async fn after_commit(unit: Option<&Unit>, hook: impl Future<Output = ()> + Send + 'static) {
    if let Some(unit) = unit {
        let mut state = unit.state();
        if state.open.is_some() || state.deferred.is_some() {
            state.hooks.push(Box::pin(hook));
            return;
        }
    }
    hook.await;
}
