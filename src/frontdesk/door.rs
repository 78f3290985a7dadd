//! The door's question, "may this member enter now?", answered by the rules of
//! `openapi-devices.yaml` in their order, and written as an attendance entry in the same
//! transaction as everything it changes: the counters, the member's visits, the webhook event.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use entity::{
    attendance, device, member,
    states::{AttendanceKind, AttendanceStatus, MemberStatus},
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, FromQueryResult, QueryFilter, Set,
    Statement,
};
use uuid::Uuid;

use crate::{
    attendance as entries,
    db::{Db, begin_writing, placeholders},
    errors::ApiError,
    records::{new_id, now},
    webhooks::{self, EventType},
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
/// transaction that holds the write lock from its start on SQLite (`db::begin_writing`). Returns
/// the decision and whether a webhook delivery was queued.
pub async fn decide(db: &Db, door: &device::Model, tz: Tz, who: &Who) -> Result<(Decision, bool), ApiError> {
    let at = now();
    let gym_id = door.gym_id;
    let txn = begin_writing(db).await?;
    let member = find_member(&txn, gym_id, who).await?;
    let denial = match &member {
        None => Some(match who {
            Who::Card(_) => Denial::UnknownCard,
            Who::Member(_) => Denial::UnknownMember,
        }),
        Some(m) if m.status == MemberStatus::Inactive => Some(Denial::MemberInactive),
        Some(m) if m.facility_id != door.facility_id => Some(Denial::WrongFacility),
        Some(m) => membership_denial(&txn, gym_id, m.id, tz, at).await?,
    };
    let (kind, status) = match denial {
        None => (AttendanceKind::CheckIn, AttendanceStatus::Granted),
        Some(_) => (AttendanceKind::Access, AttendanceStatus::Denied),
    };
    let entry = attendance::ActiveModel {
        gym_id: Set(gym_id),
        id: Set(new_id()),
        facility_id: Set(door.facility_id),
        member_id: Set(member.as_ref().map(|m| m.id)),
        kind: Set(kind),
        status: Set(status),
        occurred_at: Set(at),
        legacy_id: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
        device_id: Set(Some(door.id)),
    }
    .insert(&txn)
    .await?;
    if let (Some(m), true) = (&member, entries::is_visit(kind, status)) {
        entries::add_visits(&txn, gym_id, &[(m.id, 1, at)], at).await?;
    }
    let data = poem_openapi::types::ToJSON::to_json(&entries::record(entry.clone())).unwrap_or_default();
    let queued = webhooks::emit(&txn, gym_id, EventType::AttendanceCreated, data).await?;
    // Last: every door and import of the gym adds to these rows, which stay locked until the commit.
    entries::count(&txn, gym_id, &[status]).await?;
    txn.commit().await?;
    Ok((Decision { entry, denial }, queued))
}

/// The member at the door, locked for the rest of the transaction on PostgreSQL (two doors at
/// once must not both let in the last visit of a limited plan). `FOR NO KEY UPDATE`, as
/// `attendance::lock_members` takes members: rows elsewhere that refer to the member are not held up.
async fn find_member(db: &impl ConnectionTrait, gym_id: Uuid, who: &Who) -> Result<Option<member::Model>, ApiError> {
    let backend = db.get_database_backend();
    let lock = if backend == DbBackend::Postgres { " FOR NO KEY UPDATE" } else { "" };
    let (column, value): (&str, sea_orm::Value) = match who {
        Who::Member(id) => ("id", (*id).into()),
        Who::Card(card) => ("access_card", card.as_str().into()),
    };
    let sql = placeholders(backend, &format!("SELECT * FROM members WHERE gym_id = ? AND {column} = ? LIMIT 1{lock}"));
    let found = member::Model::find_by_statement(Statement::from_sql_and_values(backend, sql, [gym_id.into(), value]))
        .one(db)
        .await?;
    Ok(found)
}

/// One running membership of a member, with its plan's visit limit.
#[derive(Debug, FromQueryResult)]
struct Running {
    starts_on: NaiveDate,
    ends_on: Option<NaiveDate>,
    visit_limit: Option<i32>,
}

/// The first instant of `day` in `tz`.
fn midnight(tz: Tz, day: NaiveDate) -> Option<DateTime<Utc>> {
    day.and_hms_opt(0, 0, 0).and_then(|m| tz.from_local_datetime(&m).earliest()).map(|t| t.with_timezone(&Utc))
}

/// `None` when a membership whose period includes today lets the member in: one of a plan without
/// a visit limit, or one whose granted check-ins within its period are below the limit.
async fn membership_denial(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    member_id: Uuid,
    tz: Tz,
    at: DateTime<Utc>,
) -> Result<Option<Denial>, ApiError> {
    let today = at.with_timezone(&tz).date_naive();
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        "SELECT mm.starts_on, mm.ends_on, p.visit_limit FROM member_memberships mm \
         LEFT JOIN membership_plans p ON p.gym_id = mm.gym_id AND p.id = mm.membership_plan_id \
         WHERE mm.gym_id = ? AND mm.member_id = ? AND mm.starts_on <= ? AND (mm.ends_on IS NULL OR mm.ends_on >= ?)",
    );
    let values = [gym_id.into(), member_id.into(), today.into(), today.into()];
    let running = Running::find_by_statement(Statement::from_sql_and_values(backend, sql, values)).all(db).await?;
    if running.is_empty() {
        return Ok(Some(Denial::NoActiveMembership));
    }
    for r in &running {
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
