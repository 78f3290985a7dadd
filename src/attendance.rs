//! What every write of attendance entries must do, whoever writes them (the importer, the doors):
//! the gym's attendance counters and version change in the write's transaction, every entry of a
//! member adds to the member's `entries_count`, and a granted check-in to their `visits_count`
//! and `last_visit_at`. The entry as the API shows it
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
/// several members' rows takes them this way before the gym's counters, which come last: two
/// writers then wait for each other in one order, and never both for each other. The importer's
/// new entries come before them, written in the order of their legacy ids (the one thing two
/// batches can both hold before their members, and which they then meet in one order too).
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

/// What a write's new entries add to one member's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberEntries {
    pub member_id: MemberId,
    /// Entries of every kind and status (`entries_count`, one member's page's total).
    pub entries: i64,
    /// Visits among them ([`is_visit`]): `visits_count`.
    pub visits: i64,
    /// The latest visit's time, if there is one: `last_visit_at`.
    pub latest_visit: Option<DateTime<Utc>>,
}

impl MemberEntries {
    /// The figures of one entry of the member.
    pub fn of(member_id: MemberId, kind: AttendanceKind, status: AttendanceStatus, at: DateTime<Utc>) -> Self {
        let visit = is_visit(kind, status);
        Self { member_id, entries: 1, visits: i64::from(visit), latest_visit: visit.then_some(at) }
    }

    /// Adds another entry's figures of the same member.
    pub fn add(&mut self, other: Self) {
        self.entries += other.entries;
        self.visits += other.visits;
        self.latest_visit = self.latest_visit.max(other.latest_visit);
    }
}

/// Adds new entries to their members' figures, in one statement that adds to the stored ones (so
/// concurrent writers add up). `updated_at` moves with the visits the API shows, so
/// `updated_since` sees the change; an entry that is no visit changes only the member's count of
/// entries, which the API does not show. The members' rows must have been locked first
/// ([`lock_members`]) where the transaction changes more than one.
pub async fn add_entries(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    members: &[MemberEntries],
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    if let Some(statement) = entries_statement(db.get_database_backend(), gym_id, members, at) {
        db.execute(statement).await?;
    }
    Ok(())
}

/// The statement of [`add_entries`], for a [`crate::db::Writes`]; `None` without members.
pub fn entries_statement(
    backend: DbBackend,
    gym_id: GymId,
    members: &[MemberEntries],
    at: DateTime<Utc>,
) -> Option<Statement> {
    if members.is_empty() {
        return None;
    }
    // In the order of the text: `updated_at`, the rows, the gym.
    let mut values: Vec<sea_orm::Value> = vec![at.into()];
    let mut rows = Vec::with_capacity(members.len());
    for m in members {
        rows.push("(?, ?, ?, ?)");
        values.extend([m.member_id.into(), m.entries.into(), m.visits.into(), m.latest_visit.into()]);
    }
    let sql = placeholders(
        backend,
        &format!(
            "UPDATE members SET entries_count = members.entries_count + v.column2, \
             visits_count = members.visits_count + v.column3, \
             last_visit_at = CASE WHEN v.column4 IS NOT NULL AND (members.last_visit_at IS NULL \
             OR members.last_visit_at < v.column4) THEN v.column4 ELSE members.last_visit_at END, \
             updated_at = CASE WHEN v.column3 > 0 THEN ? ELSE members.updated_at END \
             FROM (VALUES {}) AS v WHERE members.gym_id = ? AND members.id = v.column1",
            rows.join(", ")
        ),
    );
    values.push(gym_id.into());
    Some(Statement::from_sql_and_values(backend, sql, values))
}
