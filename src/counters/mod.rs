//! Per-gym running counts behind the exact `total` of the lists: `<table>` and
//! `<table>.<label value>` (e.g. `members`, `members.active`; see [`Counted::name`]).
//!
//! Every write that adds, removes or re-labels a row changes its counters in the same transaction,
//! so they always equal the rows they count. A list pinned at `as_of` subtracts the rows created
//! after it, an index range that is empty or tiny.
//!
//! The rule for every writer of a counted table (see [`ALL`]): change the counters in the same
//! transaction (`add_many`), or rebuild them after a bulk load (`recount`). The demo data test compares
//! every counted total with a real count.
//!
//! A list may also have a version ([`Counted::version`]: [`MEMBERS_VERSION`], [`PURCHASES_VERSION`]):
//! a counter of writes rather than rows, bumped through [`Counted::written`]. The members'
//! memberships have a version without a list ([`MEMBERSHIPS_VERSION`]). Whoever adds a writer of
//! one of these tables bumps its version in the same transaction: what is kept per version (search
//! totals, statistics) is used again for as long as the version reads the same.
//!
//! A counter is stored as [`SHARDS`] rows (`shard`), and its value is their sum. A writer adds to
//! one shard, picked at random for its statement: a counter row is locked from the write's change
//! of it until its commit, and with one row every concurrent write to a gym's members waited for
//! the one before it. Readers sum the shards (one index range of at most [`SHARDS`] rows), in one
//! statement, so they see one committed state.

use chrono::{DateTime, Utc};
use entity::ids::{GymId, MemberId};
use rand::Rng;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Statement, Value};

use crate::db::{add_up_statement, placeholders};

pub mod days;
pub mod search_totals;
pub mod statistics;

/// Rows per counter (see the module's documentation).
pub const SHARDS: i16 = 16;

/// Adds several deltas to counters of one gym in one statement (names must differ), all to one
/// shard picked at random, creating the rows that do not exist. The rows are written in the order
/// of their names, so two writers that meet on a shard lock its rows in the same order.
pub async fn add_many(db: &impl ConnectionTrait, gym_id: GymId, deltas: &[(String, i64)]) -> Result<(), DbErr> {
    if let Some(statement) = add_many_statement(db.get_database_backend(), gym_id, deltas) {
        db.execute(statement).await?;
    }
    Ok(())
}

/// The statement of [`add_many`], for a [`crate::db::Writes`]; `None` when every delta is 0.
pub fn add_many_statement(backend: DbBackend, gym_id: GymId, deltas: &[(String, i64)]) -> Option<Statement> {
    let mut deltas: Vec<&(String, i64)> = deltas.iter().filter(|(_, d)| *d != 0).collect();
    if deltas.is_empty() {
        return None;
    }
    deltas.sort_by(|a, b| a.0.cmp(&b.0));
    let shard = rand::thread_rng().gen_range(0..SHARDS);
    let rows = deltas.iter().map(|(name, delta)| (vec![gym_id.into(), name.as_str().into(), shard.into()], *delta));
    add_up_statement(backend, "gym_counters", &["gym_id", "name", "shard"], "value", rows)
}

/// A counter's value as a scalar SQL expression: the sum of its shards (`?`: the gym, the name).
pub(crate) const COUNTER: &str = "COALESCE((SELECT SUM(value) FROM gym_counters WHERE gym_id = ? AND name = ?), 0)";

#[derive(FromQueryResult)]
struct Count {
    n: i64,
}

/// A counted list: its table and the one column whose values have counters of their own.
#[derive(Clone, Copy, Debug)]
pub struct Counted {
    pub table: &'static str,
    pub label: &'static str,
    /// The counter of writes that adding rows to the list bumps too (see [`MEMBERS_VERSION`]).
    pub version: Option<&'static str>,
    /// The date the list is ordered by, when the list keeps its counts per month and day too
    /// ([`days`]).
    pub day: Option<&'static str>,
}

impl Counted {
    /// The delta for [`add_many`] that bumps the list's version, if it has one.
    pub fn written(&self) -> Option<(String, i64)> {
        self.version.map(|v| (v.to_string(), 1))
    }

    /// The counter's name: `<table>`, or `<table>.<label value>` (e.g. `members.active`).
    pub fn name(&self, label: Option<&str>) -> String {
        label.map_or_else(|| self.table.to_string(), |v| format!("{}.{v}", self.table))
    }
}

pub const MEMBER_ROWS: Counted =
    Counted { table: "members", label: "status", version: Some(MEMBERS_VERSION), day: None };
pub const MEMBERSHIP_PLAN_ROWS: Counted =
    Counted { table: "membership_plans", label: "status", version: None, day: None };
pub const SUBSCRIPTION_PLAN_ROWS: Counted =
    Counted { table: "subscription_plans", label: "status", version: None, day: None };
pub const PRODUCT_ROWS: Counted = Counted { table: "products", label: "status", version: None, day: None };
pub const PURCHASE_ROWS: Counted = Counted {
    table: "purchases",
    label: "payment_status",
    version: Some(PURCHASES_VERSION),
    day: Some("purchased_at"),
};
pub const ATTENDANCE_ROWS: Counted =
    Counted { table: "attendance", label: "status", version: Some(ATTENDANCE_VERSION), day: Some("occurred_at") };
pub const ALL: [Counted; 6] =
    [MEMBER_ROWS, MEMBERSHIP_PLAN_ROWS, SUBSCRIPTION_PLAN_ROWS, PRODUCT_ROWS, PURCHASE_ROWS, ATTENDANCE_ROWS];

/// Rows of a gym's list (optionally with one label value) created at or before `as_of`: the
/// counter minus the rows created after `as_of`, in one statement, so both parts see one snapshot.
pub async fn total_as_of(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    list: Counted,
    label: Option<&str>,
    as_of: DateTime<Utc>,
) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    let (expr, values) = total_as_of_sql(gym_id, list, label, as_of);
    let sql = placeholders(backend, &format!("SELECT {expr} AS n"));
    let row = Count::find_by_statement(Statement::from_sql_and_values(backend, sql, values)).one(db).await?;
    Ok(row.map_or(0, |c| c.n.max(0)))
}

/// [`total_as_of`] as a scalar SQL expression (`?` placeholders) and its values, for a statement
/// that reads several figures at once.
pub fn total_as_of_sql(
    gym_id: GymId,
    list: Counted,
    label: Option<&str>,
    as_of: DateTime<Utc>,
) -> (String, Vec<Value>) {
    let name = list.name(label);
    let Counted { table, label: column, .. } = list;
    let (label_filter, mut values): (String, Vec<Value>) = match label {
        Some(v) => (format!(" AND {column} = ?"), vec![gym_id.into(), name.into(), gym_id.into(), v.into()]),
        None => (String::new(), vec![gym_id.into(), name.into(), gym_id.into()]),
    };
    values.push(as_of.into());
    let expr = format!(
        "CAST({COUNTER} - (SELECT COUNT(*) FROM {table} WHERE gym_id = ?{label_filter} AND created_at > ?) AS BIGINT)"
    );
    (expr, values)
}

/// The counter every writer bumps, in its transaction, when it adds members to a gym or changes
/// what a member's `search_text` or `status` holds. It never goes down ([`recount`] keeps it and
/// bumps it too), so a figure counted over a gym's members at one version holds for as long as
/// the version reads the same (see [`search_totals`]).
pub const MEMBERS_VERSION: &str = "members:version";

/// Like [`MEMBERS_VERSION`], for the sales: bumped by every write that adds purchases to a gym.
pub const PURCHASES_VERSION: &str = "purchases:version";

/// Like [`MEMBERS_VERSION`], for attendance (the statistics' check-ins of the day): bumped by every
/// write that adds attendance entries to a gym.
pub const ATTENDANCE_VERSION: &str = "attendance:version";

/// Like [`MEMBERS_VERSION`], for the members' memberships (the holdings behind the statistics'
/// `active_memberships`), which have no list and no counts of their own: bumped by every write
/// that adds some.
pub const MEMBERSHIPS_VERSION: &str = "member_memberships:version";

/// The delta that bumps a gym's [`MEMBERSHIPS_VERSION`], for [`add_many`].
pub fn memberships_written() -> (String, i64) {
    (MEMBERSHIPS_VERSION.to_string(), 1)
}

/// Every version counter: those of the counted lists and [`MEMBERSHIPS_VERSION`].
fn versions() -> Vec<(String, i64)> {
    ALL.iter().filter_map(Counted::written).chain([memberships_written()]).collect()
}

/// Members of a gym (optionally of one status) created at or before `as_of`.
pub async fn members_as_of(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    status: Option<&str>,
    as_of: DateTime<Utc>,
) -> Result<i64, DbErr> {
    total_as_of(db, gym_id, MEMBER_ROWS, status, as_of).await
}

/// One member's attendance entries created at or before `as_of`: the member's `entries_count`
/// (kept by every writer of attendance, see `attendance::add_entries`) minus their entries created
/// after `as_of`, in one statement. Those are read along `(gym_id, created_at)` and the member is
/// tested on each: a condition on `member_id` would take the planner to the member's index and
/// through their whole history. 0 for a member the gym does not have.
pub async fn member_entries_as_of(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    member_id: MemberId,
    as_of: DateTime<Utc>,
) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        "SELECT CAST(COALESCE((SELECT entries_count FROM members WHERE gym_id = ? AND id = ?), 0) \
         - (SELECT COUNT(CASE WHEN member_id = ? THEN 1 END) FROM attendance WHERE gym_id = ? AND created_at > ?) \
         AS BIGINT) AS n",
    );
    let values: [Value; 5] = [gym_id.into(), member_id.into(), member_id.into(), gym_id.into(), as_of.into()];
    let row = Count::find_by_statement(Statement::from_sql_and_values(backend, sql, values)).one(db).await?;
    Ok(row.map_or(0, |c| c.n.max(0)))
}

/// Rebuilds every counter of a gym from its rows (after a bulk load, or to repair) into shard 0, and bumps
/// the lists' versions, which it keeps; and its members' counts of attendance entries.
pub async fn recount(db: &impl ConnectionTrait, gym_id: GymId) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let run =
        |sql: String, values: Vec<Value>| Statement::from_sql_and_values(backend, placeholders(backend, &sql), values);
    let bumps = versions();
    let mut values: Vec<Value> = vec![gym_id.into()];
    values.extend(bumps.iter().map(|(name, _)| Value::from(name.as_str())));
    let kept = vec!["?"; bumps.len()].join(", ");
    let keep = if bumps.is_empty() { String::new() } else { format!(" AND name NOT IN ({kept})") };
    db.execute(run(format!("DELETE FROM gym_counters WHERE gym_id = ?{keep}"), values)).await?;
    db.execute(run("DELETE FROM gym_day_counts WHERE gym_id = ?".into(), vec![gym_id.into()])).await?;
    db.execute(run(
        "UPDATE members SET entries_count = 0 WHERE gym_id = ? AND entries_count <> 0".into(),
        vec![gym_id.into()],
    ))
    .await?;
    db.execute(run(
        "UPDATE members SET entries_count = counted.n FROM (SELECT member_id, COUNT(*) AS n FROM attendance \
         WHERE gym_id = ? AND member_id IS NOT NULL GROUP BY member_id) AS counted \
         WHERE members.gym_id = ? AND members.id = counted.member_id"
            .into(),
        vec![gym_id.into(), gym_id.into()],
    ))
    .await?;
    add_many(db, gym_id, &bumps).await?;
    for list in ALL {
        for statement in days::rebuild(backend, gym_id, list) {
            db.execute(statement).await?;
        }
        let Counted { table, label, .. } = list;
        db.execute(run(
            format!(
                // The union inside a subquery: Citus, pushing an `INSERT … SELECT … UNION ALL`
                // down to a shard, loses the default of `shard` ("more target columns than
                // expressions").
                "INSERT INTO gym_counters (gym_id, name, value) SELECT gym_id, name, n FROM (\
                 SELECT gym_id, '{table}' AS name, COUNT(*) AS n FROM {table} WHERE gym_id = ? GROUP BY gym_id \
                 UNION ALL SELECT gym_id, '{table}.' || {label}, COUNT(*) FROM {table} WHERE gym_id = ? GROUP BY gym_id, {label}\
                 ) AS counted"
            ),
            vec![gym_id.into(), gym_id.into()],
        ))
        .await?;
    }
    Ok(())
}
