//! Writes sent together. On PostgreSQL each round trip to the server costs both processes a few
//! system calls and a wake-up, more than most of a transaction's statements cost to run; the
//! statements of a [`Writes`] go as one: every statement but the last becomes a data-modifying
//! `WITH` part of the last, which PostgreSQL runs exactly once each, whether or not anything reads
//! them. On SQLite each statement is handed to the connection's own thread and its answer handed
//! back, two thread switches; the statements go as one text, which SQLite runs one after the other.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, Value};

/// Whether PostgreSQL gets the statements of a [`Writes`] one by one: on a database distributed by
/// gym (`db::distributed`). There a statement whose `WITH` parts insert is not sent to the gym's
/// node whole: Citus runs each part on its own, passes their results through the coordinator, and
/// ends the transaction in a two-phase commit. One by one, each goes to the gym's node.
pub(super) fn one_by_one() -> bool {
    super::distributed()
}

/// The statements in order on `db`, each on its own; the rows the tallied one wrote are told.
pub(super) async fn each(
    db: &impl ConnectionTrait,
    statements: Vec<Statement>,
    tallied: Option<&(usize, Tally)>,
) -> Result<(), DbErr> {
    for (i, statement) in statements.into_iter().enumerate() {
        let rows = db.execute(statement).await?.rows_affected();
        if let Some((_, tally)) = tallied.filter(|(at, _)| *at == i) {
            tally.set(rows);
        }
    }
    Ok(())
}

/// The rows a statement of a [`Writes`] wrote, known once it has run ([`Writes::push_tallied`]).
/// Until then, and where it cannot be told, it reads as "some".
#[derive(Clone)]
pub struct Tally(Arc<AtomicU64>);

impl Tally {
    fn new() -> Self {
        Tally(Arc::new(AtomicU64::new(u64::MAX)))
    }

    pub(super) fn set(&self, rows: u64) {
        self.0.store(rows, Ordering::Relaxed);
    }

    /// Whether the statement wrote a row (or may have).
    pub fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

/// Statements that change rows and return nothing, to run together in one transaction (see the
/// module's documentation). The parts of one PostgreSQL statement see the same snapshot and not
/// each other's changes, so none may need what another writes, and no two may change one row.
/// PostgreSQL runs the parts in an order of its own: rows that must be locked in a given order
/// (a gym's members before its counters, see `attendance::lock_members`) are locked by an earlier
/// statement of the transaction, as the door locks its member when it reads it.
#[derive(Default)]
pub struct Writes {
    statements: Vec<Statement>,
    /// The statement whose rows are told, by its index, and where.
    tallied: Option<(usize, Tally)>,
}

impl Writes {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a statement, written for the backend it will run on (`$n` placeholders on PostgreSQL).
    pub fn push(&mut self, statement: Statement) {
        self.statements.push(statement);
    }

    /// Adds the statements there are (none, one or several).
    pub fn extend(&mut self, statements: impl IntoIterator<Item = Statement>) {
        self.statements.extend(statements);
    }

    /// Adds a PostgreSQL statement that ends with `RETURNING`, and tells how many rows it wrote once
    /// the writes have run (until then it reads as "some").
    pub fn push_tallied(&mut self, statement: Statement) -> Tally {
        let tally = Tally::new();
        self.tallied = Some((self.statements.len(), tally.clone()));
        self.statements.push(statement);
        tally
    }

    pub fn len(&self) -> usize {
        self.statements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    /// The statements, in order, and the one tallied.
    pub(super) fn into_parts(self) -> (Vec<Statement>, Option<(usize, Tally)>) {
        (self.statements, self.tallied)
    }

    /// The backend the statements were written for (`None` when there are none).
    pub(super) fn backend(&self) -> Option<DbBackend> {
        self.statements.first().map(|s| s.db_backend)
    }

    /// Runs the statements on `db`, in one call. On PostgreSQL the tallied statement's rows are
    /// told wherever it stands among them; on SQLite only when it is alone.
    pub async fn run(self, db: &impl ConnectionTrait) -> Result<(), DbErr> {
        let (mut statements, tallied) = (self.statements, self.tallied);
        match (db.get_database_backend(), tallied) {
            (_, _) if statements.is_empty() => {}
            (DbBackend::Postgres, tallied) if one_by_one() => each(db, statements, tallied.as_ref()).await?,
            (DbBackend::Postgres, Some((at, tally))) => {
                let row = db.query_one(told(statements, at)).await?;
                tally.set(rows_told(row.as_ref(), 0));
            }
            (DbBackend::Postgres, None) => {
                if let Some(statement) = one(statements) {
                    db.execute(statement).await?;
                }
            }
            (backend, _) if statements.len() > 1 => {
                db.execute(in_sequence(backend, statements)).await?;
            }
            (_, tallied) => {
                if let Some(statement) = statements.pop() {
                    let rows = db.execute(statement).await?.rows_affected();
                    if let Some((_, tally)) = tallied {
                        tally.set(rows);
                    }
                }
            }
        }
        Ok(())
    }
}

/// The rows a tally reads from column `at` of the row a told statement returned ("some" when it
/// cannot be read).
pub(super) fn rows_told(row: Option<&sea_orm::QueryResult>, at: usize) -> u64 {
    row.and_then(|r| r.try_get_by_index::<i64>(at).ok()).and_then(|n| u64::try_from(n).ok()).unwrap_or(u64::MAX)
}

/// The statements one after the other in one text, their values in order: SQLite runs such a text
/// statement by statement, each taking the values of its own `?` (one hand-over to its connection's
/// thread instead of one per statement).
pub(super) fn in_sequence(backend: DbBackend, statements: Vec<Statement>) -> Statement {
    let mut sql = String::new();
    let mut values: Vec<Value> = Vec::new();
    for statement in statements {
        if !sql.is_empty() {
            sql.push_str("; ");
        }
        sql.push_str(&statement.sql);
        values.extend(statement.values.map(|v| v.0).unwrap_or_default());
    }
    Statement::from_sql_and_values(backend, sql, values)
}

/// PostgreSQL: the statements as one (`None` when there are none), whose rows affected are the
/// last statement's.
pub(super) fn one(mut statements: Vec<Statement>) -> Option<Statement> {
    let main = statements.pop()?;
    Some(if statements.is_empty() { main } else { combined(statements, main) })
}

/// PostgreSQL: `statements` as one that answers one row, the rows the statement at `tallied`
/// wrote: `WITH w0 AS (…), … SELECT (SELECT count(*) FROM w<tallied>)` (it ends in `RETURNING`).
fn told(statements: Vec<Statement>, tallied: usize) -> Statement {
    let (mut sql, values) = with_parts(numbered(statements));
    sql.push_str(&format!(" SELECT (SELECT count(*) FROM w{tallied})"));
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// PostgreSQL, a keyed write's last statement: `writes` and `record` (an upsert ending in
/// `RETURNING`, which returns no row when another request holds the key) as one statement,
/// `WITH w0 AS (…), …, rec AS (record) SELECT gymapi_key_kept((SELECT count(*) FROM rec)),
/// (SELECT count(*) FROM w<tallied>)`. When the record was not written the function raises `GY409`
/// and the statement, writes and all, is undone; otherwise its one row gives the tallied
/// statement's rows (-1 without one).
pub(super) fn kept_with(writes: Vec<Statement>, tallied: Option<usize>, record: Statement) -> Statement {
    let parts = writes.len();
    let (mut sql, values) = with_parts(numbered(writes).chain([("rec".to_string(), record)]));
    let told = match tallied.filter(|t| *t < parts) {
        Some(t) => format!("(SELECT count(*) FROM w{t})"),
        None => "CAST(-1 AS bigint)".to_string(),
    };
    sql.push_str(&format!(" SELECT gymapi_key_kept((SELECT count(*) FROM rec)), {told}"));
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// `WITH w0 AS (s0), w1 AS (s1), … main`, each statement's `$n` moved past the values of those
/// before it.
fn combined(parts: Vec<Statement>, main: Statement) -> Statement {
    let (mut sql, mut values) = with_parts(numbered(parts));
    sql.push(' ');
    sql.push_str(&shift_placeholders(&main.sql, values.len()));
    values.extend(main.values.map(|v| v.0).unwrap_or_default());
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// The statements named `w0`, `w1`, … for [`with_parts`].
fn numbered(statements: Vec<Statement>) -> impl Iterator<Item = (String, Statement)> {
    statements.into_iter().enumerate().map(|(i, s)| (format!("w{i}"), s))
}

/// `WITH name AS (s), …` for `parts`, each statement's `$n` moved past the values of those before
/// it, and their values in order.
fn with_parts(parts: impl IntoIterator<Item = (String, Statement)>) -> (String, Vec<Value>) {
    let mut named = Vec::new();
    let mut values: Vec<Value> = Vec::new();
    for (name, statement) in parts {
        named.push(format!("{name} AS ({})", shift_placeholders(&statement.sql, values.len())));
        values.extend(statement.values.map(|v| v.0).unwrap_or_default());
    }
    (format!("WITH {}", named.join(", ")), values)
}

/// `sql` with every `$n` placeholder outside quotes made `$(n + by)`.
fn shift_placeholders(sql: &str, by: usize) -> String {
    if by == 0 {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '$') if chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut n = 0usize;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    n = n * 10 + d as usize;
                    chars.next();
                }
                out.push('$');
                out.push_str(&(n + by).to_string());
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_move_past_the_values_before_them_and_quotes_are_left_alone() {
        assert_eq!(shift_placeholders("a = $1 AND b = $12", 3), "a = $4 AND b = $15");
        assert_eq!(shift_placeholders("x = '$1' AND \"$2\" = $2", 10), "x = '$1' AND \"$2\" = $12");
        assert_eq!(shift_placeholders("a = $1", 0), "a = $1");
    }

    /// SQLite runs the statements of one text in order, each with the values of its own `?`.
    #[tokio::test]
    async fn sqlite_runs_the_statements_in_order_with_their_values() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("w.db").display());
        let db = crate::db::connect(&url).await?;
        db.execute_unprepared("CREATE TABLE t (a INTEGER, b TEXT)").await?;
        let lite = |sql: &str, values: Vec<Value>| Statement::from_sql_and_values(DbBackend::Sqlite, sql, values);
        let mut writes = Writes::new();
        writes.push(lite("INSERT INTO t (a, b) VALUES (?, ?)", vec![1.into(), "x".into()]));
        writes.push(lite("INSERT INTO t (a, b) VALUES (?, ?)", vec![2.into(), "y".into()]));
        writes.push(lite("UPDATE t SET b = ? WHERE a = ?", vec!["z".into(), 2.into()]));
        writes.run(&db).await?;
        let rows = db.query_all(Statement::from_string(DbBackend::Sqlite, "SELECT a, b FROM t ORDER BY a")).await?;
        let got = rows
            .iter()
            .map(|r| Ok((r.try_get_by_index::<i32>(0)?, r.try_get_by_index::<String>(1)?)))
            .collect::<Result<Vec<_>, DbErr>>()?;
        assert_eq!(got, [(1, "x".to_string()), (2, "z".to_string())]);
        Ok(())
    }

    #[test]
    fn statements_become_parts_of_the_last() {
        let pg = |sql: &str, values: Vec<Value>| Statement::from_sql_and_values(DbBackend::Postgres, sql, values);
        let s = combined(
            vec![
                pg("INSERT INTO a (x) VALUES ($1)", vec![1.into()]),
                pg("UPDATE b SET y = $1 WHERE z = $2", vec![2.into(), 3.into()]),
            ],
            pg("INSERT INTO c (w) VALUES ($1)", vec![4.into()]),
        );
        assert_eq!(
            s.sql,
            "WITH w0 AS (INSERT INTO a (x) VALUES ($1)), w1 AS (UPDATE b SET y = $2 WHERE z = $3) \
             INSERT INTO c (w) VALUES ($4)"
        );
        assert_eq!(s.values.map(|v| v.0.len()), Some(4));
    }
}
