//! SQLite: keyed writes committed together. A keyed write whose handler left its writes to the
//! commit (`db::defer_to_commit`) hands its statements (its idempotency record, then its writes) to
//! the file's group. Whoever gets the file's writer next takes every unit waiting, up to
//! [`MOST`], and sends them in one text: `BEGIN IMMEDIATE`, each unit between a `SAVEPOINT` and
//! its `RELEASE`, then one `COMMIT`. Units arriving while a text runs wait for the next one, so
//! under load the writer's round trip to its connection's thread, the transaction's begin and the
//! commit's pages are shared; alone, a unit goes as before, in a text of its own.
//!
//! A unit's statement that fails is undone with its unit (`ROLLBACK TO` its savepoint) and the
//! rest of the group goes on in a second text. Every unit gets its answer once the group's
//! `COMMIT` has run: none is told it committed before it has, and a unit refused because its key
//! was taken by another unit of the same group is told so only once that one's record is
//! committed. Should anything but a unit's own statement fail (the `BEGIN`, a savepoint, the
//! `COMMIT`), the whole group is rolled back and every unit in it fails.
//!
//! The group runs in a task of its own: a unit handed to it is committed or refused whether or not
//! its request still waits for the answer.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{LazyLock, Mutex},
};

use sea_orm::{DatabaseConnection, DbBackend, DbErr, RuntimeErr, Statement};
use tokio::sync::oneshot;

use super::file_writer::{self, Failed, Turn};

/// The most units in one text. Each size of group is a text of its own, which sqlx prepares once
/// and keeps in its statement cache: this bounds both the texts kept and a text's length.
pub const MOST: usize = 16;

/// Units waiting for their file's writer, by file.
static WAITING: LazyLock<Mutex<HashMap<PathBuf, Vec<Job>>>> = LazyLock::new(Default::default);

/// A unit's statements and where its answer goes.
struct Job {
    statements: Vec<Statement>,
    answer: oneshot::Sender<Result<(), Failed>>,
}

/// Runs `statements` and commits them, with the units of other requests waiting for the same file
/// (see the module). A statement of them that fails is named by its index in `statements`;
/// `statements.len()` stands for the group's own statements (its `BEGIN`, its `COMMIT`).
pub async fn commit(db: &DatabaseConnection, statements: Vec<Statement>) -> Result<(), Failed> {
    let count = statements.len();
    let (answer, answered) = oneshot::channel();
    let job = Job { statements, answer };
    let db = db.clone();
    tokio::spawn(async move {
        let Some(file) = file_writer::file(&db) else {
            // In memory: one connection, nothing to wait with.
            return run(file_writer::turn(&db).await, vec![job]).await;
        };
        push(&file, job);
        let turn = file_writer::turn(&db).await;
        let jobs = take(&file);
        if !jobs.is_empty() {
            run(turn, jobs).await;
        }
    });
    answered.await.unwrap_or_else(|_| Err(Failed { statement: count, error: gone() }))
}

fn push(file: &Path, job: Job) {
    waiting().entry(file.to_path_buf()).or_default().push(job);
}

/// Up to [`MOST`] of the file's waiting units, oldest first.
fn take(file: &Path) -> Vec<Job> {
    let mut waiting = waiting();
    let Some(jobs) = waiting.get_mut(file) else { return Vec::new() };
    let taken: Vec<Job> = jobs.drain(..jobs.len().min(MOST)).collect();
    if jobs.is_empty() {
        waiting.remove(file);
    }
    taken
}

fn waiting() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Vec<Job>>> {
    // A panic elsewhere while the map was held leaves it as consistent as before: keep using it.
    WAITING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn gone() -> DbErr {
    DbErr::Custom("the keyed write's commit ended without an answer".into())
}

/// What one statement of a group's text is.
#[derive(Clone, Copy)]
enum Step {
    /// The group's own: `BEGIN IMMEDIATE`, a savepoint's begin or end, `COMMIT`.
    Group,
    /// A unit's statement: the unit's index in the group, the statement's in the unit.
    Unit(usize, usize),
}

/// Runs the group to its `COMMIT` and answers every unit.
async fn run(turn: Result<Turn, DbErr>, jobs: Vec<Job>) {
    let mut turn = match turn {
        Ok(turn) => turn,
        Err(e) => return fail_all(jobs, &e),
    };
    let (statements, answers): (Vec<_>, Vec<_>) = jobs.into_iter().map(|j| (j.statements, j.answer)).unzip();
    let outcomes = commit_group(&mut turn, statements).await;
    for (answer, outcome) in answers.into_iter().zip(outcomes) {
        let _ = answer.send(outcome);
    }
}

fn fail_all(jobs: Vec<Job>, error: &DbErr) {
    for job in jobs {
        let _ = job.answer.send(Err(failed_with_group(&job.statements, error)));
    }
}

/// A unit's outcome when its group failed (`error` is the group's, told to each unit): named at
/// `statements.len()`, past the unit's own statements.
fn failed_with_group(statements: &[Statement], error: &DbErr) -> Failed {
    Failed { statement: statements.len(), error: DbErr::Exec(RuntimeErr::Internal(error.to_string())) }
}

/// Each unit's outcome, in order. A group of one takes no savepoint: its failure rolls back the
/// transaction, which holds nothing else.
async fn commit_group(turn: &mut Turn, units: Vec<Vec<Statement>>) -> Vec<Result<(), Failed>> {
    let saved = units.len() > 1;
    let mut outcomes: Vec<Option<Result<(), Failed>>> = units.iter().map(|_| None).collect();
    let (mut from, mut begun, mut undo) = (0, false, false);
    loop {
        let (text, steps) = text(&units[from..], from, (begun, undo, saved));
        match turn.run_text(text).await {
            Ok(()) => break,
            Err((ran, error)) => match steps.get(ran) {
                Some(&Step::Unit(unit, statement)) => {
                    outcomes[unit] = Some(Err(Failed { statement, error }));
                    if !saved {
                        turn.roll_back().await;
                        break;
                    }
                    (from, begun, undo) = (unit + 1, true, true);
                }
                _ => {
                    turn.roll_back().await;
                    for (unit, outcome) in units.iter().zip(outcomes.iter_mut()) {
                        if outcome.is_none() {
                            *outcome = Some(Err(failed_with_group(unit, &error)));
                        }
                    }
                    break;
                }
            },
        }
    }
    outcomes.into_iter().map(|o| o.unwrap_or(Ok(()))).collect()
}

/// The text for `units` (the group's from index `first` on), and what each of its statements is.
/// `begun`: the transaction is open; `undo`: the unit before these failed, and its savepoint is to
/// be rolled back and ended first; `saved`: each unit goes between a savepoint and its release.
fn text(units: &[Vec<Statement>], first: usize, (begun, undo, saved): (bool, bool, bool)) -> (Statement, Vec<Step>) {
    let mut text = Text::default();
    if !begun {
        text.group("BEGIN IMMEDIATE");
    }
    if undo {
        text.group("ROLLBACK TO unit");
        text.group("RELEASE unit");
    }
    for (i, unit) in units.iter().enumerate() {
        if saved {
            text.group("SAVEPOINT unit");
        }
        text.steps.extend((0..unit.len()).map(|s| Step::Unit(first + i, s)));
        text.statements.extend(unit.iter().cloned());
        if saved {
            text.group("RELEASE unit");
        }
    }
    text.group("COMMIT");
    (super::batch::in_sequence(DbBackend::Sqlite, text.statements), text.steps)
}

#[derive(Default)]
struct Text {
    statements: Vec<Statement>,
    steps: Vec<Step>,
}

impl Text {
    fn group(&mut self, sql: &str) {
        self.statements.push(Statement::from_string(DbBackend::Sqlite, sql.to_string()));
        self.steps.push(Step::Group);
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait as _, DatabaseConnection, DbBackend, Statement};

    use super::{commit, commit_group};
    use crate::db::file_writer::{self, Failed};

    fn insert(v: &str) -> Statement {
        Statement::from_sql_and_values(DbBackend::Sqlite, "INSERT INTO t (v) VALUES (?)", [v.into()])
    }

    async fn rows(db: &DatabaseConnection) -> anyhow::Result<Vec<String>> {
        let sql = Statement::from_string(DbBackend::Sqlite, "SELECT v FROM t ORDER BY v");
        let rows = db.query_all(sql).await?;
        Ok(rows.iter().map(|r| r.try_get_by_index::<String>(0)).collect::<Result<_, _>>()?)
    }

    fn failed_at(outcome: &Result<(), Failed>) -> Option<usize> {
        outcome.as_ref().err().map(|f| f.statement)
    }

    /// Three units in one text, the middle one breaking a unique index with its second statement:
    /// its first statement is undone with it, the others commit, and each is told its own outcome.
    #[tokio::test]
    async fn a_unit_that_fails_is_undone_alone_and_its_group_commits() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let db = crate::db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display())).await?;
        db.execute_unprepared("CREATE TABLE t (v TEXT UNIQUE)").await?;
        let units = vec![vec![insert("a"), insert("b")], vec![insert("c"), insert("a")], vec![insert("d")]];
        let mut turn = file_writer::turn(&db).await?;
        let outcomes = commit_group(&mut turn, units).await;
        drop(turn);
        assert_eq!(outcomes.iter().map(failed_at).collect::<Vec<_>>(), [None, Some(1), None]);
        assert_eq!(rows(&db).await?, ["a", "b", "d"]);

        // The last unit of a group failing, and a group of one failing: nothing is left open.
        let mut turn = file_writer::turn(&db).await?;
        let outcomes = commit_group(&mut turn, vec![vec![insert("e")], vec![insert("b")]]).await;
        drop(turn);
        assert_eq!(outcomes.iter().map(failed_at).collect::<Vec<_>>(), [None, Some(0)]);
        assert_eq!(failed_at(&commit(&db, vec![insert("f"), insert("d")]).await), Some(1));
        assert_eq!(failed_at(&commit(&db, vec![insert("g")]).await), None);
        assert_eq!(rows(&db).await?, ["a", "b", "d", "e", "g"]);
        Ok(())
    }
}
