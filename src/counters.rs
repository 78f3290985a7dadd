//! Per-gym running counts behind the exact `total` of the member lists.
//!
//! Every write that adds, removes or re-labels a member changes its counters in the same
//! transaction, so `members` and `members.<status>` always equal the rows they count. A list pinned
//! at `as_of` subtracts the rows created after it, an index range that is empty or tiny.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Statement, Value};
use uuid::Uuid;

pub const MEMBERS: &str = "members";

/// The counter of members with a status: `members.active`, `members.inactive`.
pub fn members_with_status(status: &str) -> String {
    format!("{MEMBERS}.{status}")
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

/// Adds `delta` to a counter, creating it at `delta` if it does not exist.
pub async fn add(db: &impl ConnectionTrait, gym_id: Uuid, name: &str, delta: i64) -> Result<(), DbErr> {
    if delta == 0 {
        return Ok(());
    }
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        "INSERT INTO gym_counters (gym_id, name, value) VALUES (?, ?, ?) \
         ON CONFLICT (gym_id, name) DO UPDATE SET value = gym_counters.value + excluded.value",
    );
    db.execute(Statement::from_sql_and_values(backend, sql, [gym_id.into(), name.into(), delta.into()])).await?;
    Ok(())
}

#[derive(FromQueryResult)]
struct Count {
    n: i64,
}

/// Members of a gym (optionally of one status) created at or before `as_of`: the counter minus
/// the rows created after `as_of`, in one statement, so both parts see one snapshot.
pub async fn members_as_of(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    status: Option<&str>,
    as_of: DateTime<Utc>,
) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    let name = status.map_or_else(|| MEMBERS.to_string(), members_with_status);
    let (status_filter, mut values): (&str, Vec<Value>) = match status {
        Some(s) => (" AND status = ?", vec![gym_id.into(), name.into(), gym_id.into(), s.into()]),
        None => ("", vec![gym_id.into(), name.into(), gym_id.into()]),
    };
    values.push(as_of.into());
    let sql = placeholders(
        backend,
        &format!(
            "SELECT CAST(COALESCE((SELECT value FROM gym_counters WHERE gym_id = ? AND name = ?), 0) \
             - (SELECT COUNT(*) FROM members WHERE gym_id = ?{status_filter} AND created_at > ?) AS BIGINT) AS n"
        ),
    );
    let row = Count::find_by_statement(Statement::from_sql_and_values(backend, sql, values)).one(db).await?;
    Ok(row.map_or(0, |c| c.n.max(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_backend() {
        assert_eq!(placeholders(DbBackend::Postgres, "a = ? AND b = ?"), "a = $1 AND b = $2");
        assert_eq!(placeholders(DbBackend::Sqlite, "a = ? AND b = ?"), "a = ? AND b = ?");
    }
}
