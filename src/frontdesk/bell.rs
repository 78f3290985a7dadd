//! Doorbell rings and door commands. A ring waits for the front desk, which opens a door for it
//! (a command for that door) or dismisses it. A door takes its commands with a claim: one
//! statement moves the pending, unexpired ones to `delivered` and returns them, so no command is
//! handed out twice, whatever polls, servers or retries race for it. Every change that a long
//! poll waits for signals its topic ([`rings_topic`], [`door_topic`]).

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{
    device, door_command, ring,
    states::{CommandState, DeviceKind, DoorAction, RingState},
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set, Statement,
    sea_query::Expr,
};
use uuid::Uuid;

use crate::{
    db::{Db, KEY_IN_FORCE, begin_writing, claimed, placeholders},
    errors::ApiError,
    records::{new_id, now},
    wake::Wakes,
};

/// How long a ring waits for an answer.
pub const RING_TTL: Duration = Duration::from_secs(120);

/// Commands handed out to one poll at most.
const CLAIM: i64 = 20;

/// Rings shown to one poll at most.
const RINGS: u64 = 100;

/// The topic of a gym's rings.
pub fn rings_topic(gym_id: GymId) -> String {
    format!("rings:{gym_id}")
}

/// The topic of a door's commands.
pub fn door_topic(gym_id: GymId, door_id: Uuid) -> String {
    format!("door:{gym_id}:{door_id}")
}

fn later(at: DateTime<Utc>, by: Duration) -> DateTime<Utc> {
    at + chrono::Duration::from_std(by).unwrap_or_default()
}

/// A ring's state as it reads now: a pending one past its time has expired.
pub fn ring_state(r: &ring::Model, at: DateTime<Utc>) -> RingState {
    match r.state {
        RingState::Pending if r.expires_at <= at => RingState::Expired,
        s => s,
    }
}

/// A command's state as it reads now: a pending one past its time has expired.
pub fn command_state(c: &door_command::Model, at: DateTime<Utc>) -> CommandState {
    match c.state {
        CommandState::Pending if c.expires_at <= at => CommandState::Expired,
        s => s,
    }
}

/// A visitor rang at `doorbell`.
pub async fn ring(
    db: &Db,
    wakes: &Arc<Wakes>,
    doorbell: &device::Model,
    message: Option<String>,
) -> Result<ring::Model, ApiError> {
    let at = now();
    let txn = begin_writing(db).await?;
    let r = ring::ActiveModel {
        gym_id: Set(doorbell.gym_id),
        id: Set(new_id()),
        device_id: Set(doorbell.id),
        facility_id: Set(doorbell.facility_id),
        state: Set(RingState::Pending),
        message: Set(message),
        door_id: Set(None),
        command_id: Set(None),
        expires_at: Set(later(at, RING_TTL)),
        answered_at: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(&txn)
    .await?;
    txn.commit().await?;
    wakes.signal_after_commit(db, rings_topic(doorbell.gym_id)).await;
    Ok(r)
}

/// The gym's pending rings (of one facility, if given), oldest first.
pub async fn pending(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    facility: Option<Uuid>,
) -> Result<Vec<ring::Model>, ApiError> {
    let mut q = ring::Entity::find()
        .filter(ring::Column::GymId.eq(gym_id))
        .filter(ring::Column::State.eq(RingState::Pending))
        .filter(ring::Column::ExpiresAt.gt(now()));
    if let Some(f) = facility {
        q = q.filter(ring::Column::FacilityId.eq(f));
    }
    Ok(q.order_by_asc(ring::Column::CreatedAt).order_by_asc(ring::Column::Id).limit(RINGS).all(db).await?)
}

/// The ring `id` of the gym, or 404.
async fn find_ring(db: &impl ConnectionTrait, gym_id: GymId, id: &str) -> Result<ring::Model, ApiError> {
    let missing = || ApiError::not_found("ring", id);
    let uuid = Uuid::parse_str(id).map_err(|_| missing())?;
    ring::Entity::find_by_id((gym_id, uuid)).one(db).await?.ok_or_else(missing)
}

/// The 409 of a ring that is no longer pending.
fn answered(r: &ring::Model, at: DateTime<Utc>) -> ApiError {
    let what = match ring_state(r, at) {
        RingState::Opened => "was already answered by opening a door",
        RingState::Dismissed => "was already dismissed",
        _ => "has expired unanswered",
    };
    ApiError::StateConflict(format!("The ring {what}."))
}

/// Moves a pending, unexpired ring to `to`, in `db`; false when it was not pending any more.
async fn answer(
    db: &impl ConnectionTrait,
    r: &ring::Model,
    to: RingState,
    door: Option<(Uuid, Uuid)>,
    at: DateTime<Utc>,
) -> Result<bool, ApiError> {
    let (door_id, command_id) = (door.map(|d| d.0), door.map(|d| d.1));
    let moved = ring::Entity::update_many()
        .col_expr(ring::Column::State, Expr::value(to.as_str()))
        .col_expr(ring::Column::DoorId, Expr::value(door_id))
        .col_expr(ring::Column::CommandId, Expr::value(command_id))
        .col_expr(ring::Column::AnsweredAt, Expr::value(Some(at)))
        .col_expr(ring::Column::UpdatedAt, Expr::value(at))
        .filter(ring::Column::GymId.eq(r.gym_id))
        .filter(ring::Column::Id.eq(r.id))
        .filter(ring::Column::State.eq(RingState::Pending))
        .filter(ring::Column::ExpiresAt.gt(at))
        .exec(db)
        .await?;
    Ok(moved.rows_affected == 1)
}

/// Answers a pending ring by opening `door_id` (a door of the ring's facility): the ring is
/// opened and the door gets an open command, expiring after `ttl`, in one transaction.
pub async fn open(
    db: &Db,
    wakes: &Arc<Wakes>,
    gym_id: GymId,
    ring_id: &str,
    door_id: Uuid,
    ttl: Duration,
) -> Result<ring::Model, ApiError> {
    let r = find_ring(db, gym_id, ring_id).await?;
    let door = device::Entity::find_by_id((gym_id, door_id)).one(db).await?;
    let door = match door {
        Some(d) if d.kind == DeviceKind::Door && d.facility_id == r.facility_id => d,
        _ => return Err(ApiError::invalid("door_id", "The door_id is not a door of the ring's facility.")),
    };
    let at = now();
    let command_id = new_id();
    let txn = begin_writing(db).await?;
    if !answer(&txn, &r, RingState::Opened, Some((door.id, command_id)), at).await? {
        return Err(answered(&r, at));
    }
    door_command::ActiveModel {
        gym_id: Set(gym_id),
        id: Set(command_id),
        device_id: Set(door.id),
        ring_id: Set(Some(r.id)),
        action: Set(DoorAction::Open),
        state: Set(CommandState::Pending),
        expires_at: Set(later(at, ttl)),
        delivered_at: Set(None),
        reported_at: Set(None),
        detail: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(&txn)
    .await?;
    txn.commit().await?;
    wakes.signal_after_commit(db, door_topic(gym_id, door.id)).await;
    find_ring(db, gym_id, ring_id).await
}

/// Answers a pending ring without opening.
pub async fn dismiss(db: &Db, gym_id: GymId, ring_id: &str) -> Result<ring::Model, ApiError> {
    let r = find_ring(db, gym_id, ring_id).await?;
    let at = now();
    let txn = begin_writing(db).await?;
    if !answer(&txn, &r, RingState::Dismissed, None, at).await? {
        return Err(answered(&r, at));
    }
    txn.commit().await?;
    find_ring(db, gym_id, ring_id).await
}

/// Hands out the door's pending, unexpired commands, oldest first, to this caller alone, while
/// its key `key_id` is in force.
pub async fn claim(
    db: &impl ConnectionTrait,
    door: &device::Model,
    key_id: Uuid,
) -> Result<Vec<door_command::Model>, ApiError> {
    let backend = db.get_database_backend();
    let at = now();
    let pending = "SELECT id FROM door_commands WHERE gym_id = ? AND device_id = ? AND state = 'pending' \
                   AND expires_at > ? ORDER BY created_at, id LIMIT ?";
    let sql = placeholders(
        backend,
        &format!(
            "UPDATE door_commands SET state = 'delivered', delivered_at = ?, updated_at = ? WHERE gym_id = ? AND id {} \
             AND {KEY_IN_FORCE} RETURNING *",
            claimed(backend, pending)
        ),
    );
    let values = [
        at.into(),
        at.into(),
        door.gym_id.into(),
        door.gym_id.into(),
        door.id.into(),
        at.into(),
        CLAIM.into(),
        key_id.into(),
    ];
    let mut claimed =
        door_command::Entity::find().from_raw_sql(Statement::from_sql_and_values(backend, sql, values)).all(db).await?;
    claimed.sort_by_key(|c| (c.created_at, c.id));
    Ok(claimed)
}

/// The door's report on a command it was handed: the same report again answers the same; another
/// outcome, or a report on a command not handed out, is a 409.
pub async fn report(
    db: &Db,
    door: &device::Model,
    command_id: &str,
    outcome: CommandState,
    detail: Option<String>,
) -> Result<door_command::Model, ApiError> {
    let missing = || ApiError::not_found("command", command_id);
    let uuid = Uuid::parse_str(command_id).map_err(|_| missing())?;
    let find = || door_command::Entity::find_by_id((door.gym_id, uuid)).one(db);
    let c = find().await?.filter(|c| c.device_id == door.id).ok_or_else(missing)?;
    let at = now();
    match command_state(&c, at) {
        CommandState::Delivered => {}
        s if s == outcome => return Ok(c),
        CommandState::Executed | CommandState::Failed => {
            return Err(ApiError::StateConflict(format!("The command was already reported {}.", c.state.as_str())));
        }
        _ => return Err(ApiError::StateConflict("The command was not handed out to the door.".into())),
    }
    let mut m: door_command::ActiveModel = c.into();
    m.state = Set(outcome);
    m.detail = Set(detail);
    m.reported_at = Set(Some(at));
    m.updated_at = Set(at);
    // Only from `delivered`: two reports at once, one wins and the other sees it.
    let txn = begin_writing(db).await?;
    let updated = door_command::Entity::update_many()
        .set(m)
        .filter(door_command::Column::GymId.eq(door.gym_id))
        .filter(door_command::Column::Id.eq(uuid))
        .filter(door_command::Column::State.eq(CommandState::Delivered))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    let c = find().await?.ok_or_else(missing)?;
    if updated.rows_affected == 0 && c.state != outcome {
        return Err(ApiError::StateConflict(format!("The command was already reported {}.", c.state.as_str())));
    }
    Ok(c)
}
