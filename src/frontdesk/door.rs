//! The door's question, "may this member enter now?", answered by the rules of
//! `openapi-devices.yaml` in their order, and written as an attendance entry in the same
//! transaction as everything it changes: the counters, the member's visits, the webhook event.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use entity::ids::{GymId, MemberId};
use entity::{
    attendance, device, member,
    states::{AttendanceKind, AttendanceStatus, MemberStatus},
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, FromQueryResult, QueryFilter, QueryTrait, Statement,
};
use uuid::Uuid;

use crate::{
    attendance as entries,
    db::{Db, Writes, begin_writing, placeholders},
    errors::ApiError,
    records::{new_id, now},
    webhooks::{self, Audience, EventType, NewEvent, Queued},
};

/// Who stands at the door.
#[derive(Clone, Debug)]
pub enum Who {
    Member(Uuid),
    Card(String),
}

/// Why a door says no, in the order the rules are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    UnknownCard,
    UnknownMember,
    MemberInactive,
    WrongFacility,
    NoActiveMembership,
    VisitLimitReached,
}

/// A decision as written: the attendance entry, and why it is a denial if it is one.
#[derive(Clone, Debug)]
pub struct Decision {
    pub entry: attendance::Model,
    pub denial: Option<Denial>,
}

/// Decides at `door` (of the gym, in its time zone `tz`) and writes the decision, in one
/// transaction that holds the write lock from its start on SQLite (`db::begin_writing`): one
/// statement reads the member with their running memberships (and locks the member), and the
/// writes go together (`db::Writes`, one statement on PostgreSQL, which also finds the gym's
/// listening webhook endpoints; SQLite reads them before the transaction). A keyed decision leaves
/// its writes to the commit (`db::defer_to_commit`): on PostgreSQL they join the idempotency
/// record's statement. Returns the decision and whether a webhook delivery was queued (asked once
/// committed).
pub async fn decide(db: &Db, door: &device::Model, tz: Tz, who: &Who) -> Result<(Decision, Queued), ApiError> {
    let at = now();
    let gym_id = door.gym_id;
    let today = at.with_timezone(&tz).date_naive();
    // Read before the transaction, which holds the member's row (and on SQLite the file's writer).
    let audience = webhooks::audience(db, gym_id, EventType::AttendanceCreated).await?;
    let txn = begin_writing(db).await?;
    let (member, running) = find_member(&txn, gym_id, who, today).await?;
    let denial = match &member {
        None => Some(match who {
            Who::Card(_) => Denial::UnknownCard,
            Who::Member(_) => Denial::UnknownMember,
        }),
        Some(m) if m.status == MemberStatus::Inactive => Some(Denial::MemberInactive),
        Some(m) if m.facility_id != door.facility_id => Some(Denial::WrongFacility),
        Some(m) => membership_denial(&txn, gym_id, m.id, &running, tz, at).await?,
    };
    let decision = Decision { entry: entry(door, member.as_ref().map(|m| m.id), denial, at), denial };
    let (writes, queued) = writes(txn.get_database_backend(), &decision.entry, audience);
    // A write that fails is answered as any database error, deferred or not.
    if let Some((writes, _)) = crate::db::defer_to_commit(db, writes, |e| async move { ApiError::from(e) }) {
        writes.run(&txn).await?;
    }
    txn.commit().await?;
    Ok((decision, queued))
}

/// The attendance entry that records a decision at `door`.
fn entry(
    door: &device::Model,
    member_id: Option<MemberId>,
    denial: Option<Denial>,
    at: DateTime<Utc>,
) -> attendance::Model {
    let (kind, status) = match denial {
        None => (AttendanceKind::CheckIn, AttendanceStatus::Granted),
        Some(_) => (AttendanceKind::Access, AttendanceStatus::Denied),
    };
    attendance::Model {
        gym_id: door.gym_id,
        id: new_id(),
        facility_id: door.facility_id,
        member_id,
        kind,
        status,
        occurred_at: at,
        legacy_id: None,
        created_at: at,
        updated_at: at,
        device_id: Some(door.id),
    }
}

/// What a decision writes: its entry, the member's figures (a visit for a granted one), the webhook event
/// and the gym's counters.
fn writes(backend: DbBackend, entry: &attendance::Model, audience: Audience) -> (Writes, Queued) {
    let (gym_id, at) = (entry.gym_id, entry.occurred_at);
    let mut writes = Writes::new();
    writes.push(attendance::Entity::insert(attendance::ActiveModel::from(entry.clone())).build(backend));
    if let Some(member_id) = entry.member_id {
        let figures = entries::MemberEntries::of(member_id, entry.kind, entry.status, at);
        writes.extend(entries::entries_statement(backend, gym_id, &[figures], at));
    }
    let data = crate::types::wire::value(&entries::record(entry.clone()));
    let event = NewEvent { gym_id, kind: EventType::AttendanceCreated, data };
    let queued = webhooks::emit_to_audience(&mut writes, backend, event, audience);
    // Last: every door and import of the gym adds to these rows, which stay locked until the commit.
    for statement in entries::count_statements(backend, gym_id, &[(entry.status, entry.occurred_at)]) {
        writes.push(statement);
    }
    (writes, queued)
}

/// The member at the door and their memberships running `today`, in one statement. The member is
/// locked for the rest of the transaction on PostgreSQL (two doors at once must not both let in
/// the last visit of a limited plan), `FOR NO KEY UPDATE` as `attendance::lock_members` takes
/// members: rows elsewhere that refer to the member are not held up.
async fn find_member(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    who: &Who,
    today: NaiveDate,
) -> Result<(Option<member::Model>, Vec<Running>), ApiError> {
    let backend = db.get_database_backend();
    let lock = if backend == DbBackend::Postgres { " FOR NO KEY UPDATE OF m" } else { "" };
    let (column, value): (&str, sea_orm::Value) = match who {
        Who::Member(id) => ("id", (*id).into()),
        Who::Card(card) => ("access_card", card.as_str().into()),
    };
    let sql = placeholders(
        backend,
        &format!(
            "SELECT m.*, mm.starts_on AS running_starts_on, mm.ends_on AS running_ends_on, \
             p.visit_limit AS running_visit_limit FROM members m \
             LEFT JOIN member_memberships mm ON mm.gym_id = m.gym_id AND mm.member_id = m.id \
             AND mm.starts_on <= ? AND (mm.ends_on IS NULL OR mm.ends_on >= ?) \
             LEFT JOIN membership_plans p ON p.gym_id = mm.gym_id AND p.id = mm.membership_plan_id \
             WHERE m.gym_id = ? AND m.{column} = ?{lock}"
        ),
    );
    let values = [today.into(), today.into(), gym_id.into(), value];
    let rows = db.query_all(Statement::from_sql_and_values(backend, sql, values)).await?;
    let Some(first) = rows.first() else { return Ok((None, Vec::new())) };
    let member = member::Model::from_query_result(first, "")?;
    let mut running = Vec::with_capacity(rows.len());
    for row in &rows {
        if let Some(starts_on) = row.try_get::<Option<NaiveDate>>("", "running_starts_on")? {
            let ends_on = row.try_get("", "running_ends_on")?;
            running.push(Running { starts_on, ends_on, visit_limit: row.try_get("", "running_visit_limit")? });
        }
    }
    Ok((Some(member), running))
}

/// One running membership of a member, with its plan's visit limit.
#[derive(Debug)]
struct Running {
    starts_on: NaiveDate,
    ends_on: Option<NaiveDate>,
    visit_limit: Option<i32>,
}

/// The first instant of `day` in `tz`.
fn midnight(tz: Tz, day: NaiveDate) -> Option<DateTime<Utc>> {
    day.and_hms_opt(0, 0, 0).and_then(|m| tz.from_local_datetime(&m).earliest()).map(|t| t.with_timezone(&Utc))
}

/// `None` when a membership whose period includes today (`running`) lets the member in: one of a
/// plan without a visit limit, or one whose granted check-ins within its period are below the
/// limit (counted now, after the member's lock).
async fn membership_denial(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    member_id: MemberId,
    running: &[Running],
    tz: Tz,
    at: DateTime<Utc>,
) -> Result<Option<Denial>, ApiError> {
    if running.is_empty() {
        return Ok(Some(Denial::NoActiveMembership));
    }
    for r in running {
        let Some(limit) = r.visit_limit else { return Ok(None) };
        let start = midnight(tz, r.starts_on).unwrap_or(at);
        let end = r.ends_on.and_then(|d| d.succ_opt()).and_then(|d| midnight(tz, d));
        let visits = entity::attendance::Entity::find()
            .filter(attendance::Column::GymId.eq(gym_id))
            .filter(attendance::Column::MemberId.eq(member_id))
            .filter(attendance::Column::Kind.eq(AttendanceKind::CheckIn))
            .filter(attendance::Column::Status.eq(AttendanceStatus::Granted))
            .filter(attendance::Column::OccurredAt.gte(start))
            .filter(attendance::Column::OccurredAt.lt(end.unwrap_or(at + chrono::Duration::days(1))));
        let used = sea_orm::PaginatorTrait::count(visits, db).await?;
        if used < u64::try_from(limit.max(0)).unwrap_or(0) {
            return Ok(None);
        }
    }
    Ok(Some(Denial::VisitLimitReached))
}
