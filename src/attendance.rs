//! What every write of attendance entries must do, whoever writes them (the importer, the doors):
//! the gym's attendance counters and version change in the write's transaction, and a granted
//! check-in adds to its member's `visits_count` and `last_visit_at`. The entry as the API shows it
//! ([`record`]) is also the payload of `attendance.created`.

use chrono::{DateTime, Utc};
use entity::ids::{GymId, MemberId};
use entity::{
    attendance,
    states::{AttendanceKind, AttendanceStatus},
};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};

use crate::{
    counters::{self, ATTENDANCE_ROWS},
    db::placeholders,
    openapi::{AttendanceEntry, AttendanceEntryObject},
};

/// An entry as the API returns it.
pub fn record(m: attendance::Model) -> AttendanceEntry {
    AttendanceEntry {
        object: AttendanceEntryObject::Attendance,
        id: m.id,
        kind: m.kind.into(),
        status: m.status.into(),
        member_id: m.member_id.map(MemberId::uuid).into(),
        facility_id: m.facility_id,
        device_id: m.device_id.into(),
        occurred_at: m.occurred_at,
        legacy_id: m.legacy_id.into(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

/// Whether an entry is a visit: a granted check-in, which counts in the member's figures.
pub fn is_visit(kind: AttendanceKind, status: AttendanceStatus) -> bool {
    kind == AttendanceKind::CheckIn && status == AttendanceStatus::Granted
}

/// Adds entries of these statuses and dates to the gym's attendance counters and their counts per
/// month and day (and bumps the attendance version, which the statistics' check-ins of the day
/// follow), in the writing transaction `db`.
pub async fn count(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    entries: &[(AttendanceStatus, DateTime<Utc>)],
) -> Result<(), DbErr> {
    for statement in count_statements(db.get_database_backend(), gym_id, entries) {
        db.execute(statement).await?;
    }
    Ok(())
}

/// The statements of [`count`], for a [`crate::db::Writes`] (none for no entries).
pub fn count_statements(
    backend: DbBackend,
    gym_id: GymId,
    entries: &[(AttendanceStatus, DateTime<Utc>)],
) -> Vec<Statement> {
    if entries.is_empty() {
        return Vec::new();
    }
    let mut deltas = vec![(ATTENDANCE_ROWS.name(None), i64::try_from(entries.len()).unwrap_or(i64::MAX))];
    for status in [AttendanceStatus::Granted, AttendanceStatus::Denied] {
        let n = entries.iter().filter(|(s, _)| *s == status).count();
        if n > 0 {
            deltas.push((ATTENDANCE_ROWS.name(Some(status.as_str())), i64::try_from(n).unwrap_or(i64::MAX)));
        }
    }
    deltas.extend(ATTENDANCE_ROWS.written());
    let days = counters::days::deltas(ATTENDANCE_ROWS, entries.iter().map(|(s, at)| (s.as_str(), *at)));
    // The days first: the gym's counters are the rows every writer of the gym meets, held from
    // here to the commit.
    let days = counters::days::add_statement(backend, gym_id, days);
    days.into_iter().chain(counters::add_many_statement(backend, gym_id, &deltas)).collect()
}

/// Locks the rows of these members of a gym for the rest of the transaction, in the order of
/// their ids (PostgreSQL; SQLite's writer holds the whole file already). Every writer that changes
/// several members' rows takes them this way before anything else it locks (the gym's counters
/// come last): two writers then wait for each other in one order, and never both for each other.
pub async fn lock_members(db: &impl ConnectionTrait, gym_id: GymId, ids: &[MemberId]) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    if backend != DbBackend::Postgres || ids.is_empty() {
        return Ok(());
    }
    let list = vec!["?"; ids.len()].join(", ");
    let sql = placeholders(
        backend,
        &format!("SELECT id FROM members WHERE gym_id = ? AND id IN ({list}) ORDER BY id FOR NO KEY UPDATE"),
    );
    let values = std::iter::once(gym_id.into()).chain(ids.iter().map(|id| (*id).into()));
    db.query_all(Statement::from_sql_and_values(backend, sql, values)).await?;
    Ok(())
}

/// Adds visits to members: per member, how many and the latest time, in one statement that adds
/// to the stored figures (so concurrent writers add up). `updated_at` moves with them, so
/// `updated_since` sees the change. The members' rows must have been locked first
/// ([`lock_members`]) where the transaction changes more than one.
pub async fn add_visits(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    visits: &[(MemberId, i64, DateTime<Utc>)],
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    if let Some(statement) = visits_statement(db.get_database_backend(), gym_id, visits, at) {
        db.execute(statement).await?;
    }
    Ok(())
}

/// The statement of [`add_visits`], for a [`crate::db::Writes`]; `None` without visits.
pub fn visits_statement(
    backend: DbBackend,
    gym_id: GymId,
    visits: &[(MemberId, i64, DateTime<Utc>)],
    at: DateTime<Utc>,
) -> Option<Statement> {
    if visits.is_empty() {
        return None;
    }
    // In the order of the text: `updated_at`, the rows, the gym.
    let mut values: Vec<sea_orm::Value> = vec![at.into()];
    let mut rows = Vec::with_capacity(visits.len());
    for (id, n, latest) in visits {
        rows.push("(?, ?, ?)");
        values.extend([(*id).into(), (*n).into(), (*latest).into()]);
    }
    let sql = placeholders(
        backend,
        &format!(
            "UPDATE members SET visits_count = members.visits_count + v.column2, \
             last_visit_at = CASE WHEN members.last_visit_at IS NULL OR members.last_visit_at < v.column3 \
             THEN v.column3 ELSE members.last_visit_at END, updated_at = ? \
             FROM (VALUES {}) AS v WHERE members.gym_id = ? AND members.id = v.column1",
            rows.join(", ")
        ),
    );
    values.push(gym_id.into());
    Some(Statement::from_sql_and_values(backend, sql, values))
}
