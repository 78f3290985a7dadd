//! The outbox: events written in the transaction of the change that caused them, one delivery per
//! endpoint listening, and the dispatcher woken after the commit.

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{states::DeliveryStatus, webhook_delivery, webhook_endpoint, webhook_event};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter, QueryTrait, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    db::{Handle, Tally, Writes},
    records::{new_id, now, rfc3339},
};

use super::EventType;

/// Writes an event and one pending delivery per enabled endpoint of the gym that subscribes to its
/// type, on `db`, which is the transaction of the change the event reports. Returns whether any
/// delivery was queued (the caller may wake the dispatcher after its commit).
pub async fn emit(db: &impl ConnectionTrait, gym_id: GymId, event: EventType, data: Value) -> Result<bool, DbErr> {
    let mut writes = Writes::new();
    let targets = listeners(db, gym_id, event).await?;
    let queued = emit_to(&mut writes, db.get_database_backend(), NewEvent { gym_id, kind: event, data }, targets);
    writes.run(db).await?;
    Ok(queued)
}

/// An event of a gym, before it is written: its type and its `data` (the envelope's).
pub struct NewEvent {
    pub gym_id: GymId,
    pub kind: EventType,
    pub data: Value,
}

/// An event added to a write: what its deliveries name.
pub(super) struct Written {
    gym_id: GymId,
    id: Uuid,
    kind: EventType,
    at: DateTime<Utc>,
}

/// Wakes the dispatcher for deliveries the caller just queued and committed: at once, or, inside a
/// keyed write, once the write's transaction commits (a delivery is not looked for before it
/// exists). A write that queued nothing does not wake it: each wake-up costs the dispatcher a query.
pub async fn wake(db: &impl Handle, dispatcher: &std::sync::Arc<tokio::sync::Notify>) {
    wake_if(db, dispatcher, Queued::Known(true)).await;
}

/// Whether a write queued a delivery: known when it was written, or told by the database once
/// the write has run ([`emit_counted`] on PostgreSQL).
pub enum Queued {
    Known(bool),
    Told(Tally),
}

impl Queued {
    fn any(&self) -> bool {
        match self {
            Queued::Known(queued) => *queued,
            Queued::Told(tally) => tally.any(),
        }
    }
}

/// [`wake`], if the write queued a delivery (asked once it has committed).
pub async fn wake_if(db: &impl Handle, dispatcher: &std::sync::Arc<tokio::sync::Notify>, queued: Queued) {
    let dispatcher = dispatcher.clone();
    crate::db::after_commit(db, async move {
        if queued.any() {
            dispatcher.notify_one();
        }
    })
    .await;
}

/// The event and its deliveries added to `writes`, for a write that reads nothing before it
/// writes: [`audience`], then [`emit_to_audience`].
pub async fn emit_counted(
    db: &impl ConnectionTrait,
    writes: &mut Writes,
    gym_id: GymId,
    event: EventType,
    data: Value,
) -> Result<Queued, DbErr> {
    let audience = audience(db, gym_id, event).await?;
    Ok(emit_to_audience(writes, db.get_database_backend(), NewEvent { gym_id, kind: event, data }, audience))
}

/// The endpoints an event of `event` goes to, as far as they are known before the write that
/// emits it: on PostgreSQL nothing is read (the write finds them, see [`emit_to_audience`]); on
/// SQLite the gym's listening endpoints are read now, before a transaction that holds the file's
/// writer.
pub enum Audience {
    Found(Vec<Uuid>),
    InTheWrite,
}

/// The [`Audience`] of an event of the gym, read before the write's transaction (nothing is read on
/// PostgreSQL, unless it is distributed by gym: Citus sends an insert that reads its rows from a
/// statement of its own through the coordinator, and the transaction ends in a two-phase commit).
pub async fn audience(db: &impl ConnectionTrait, gym_id: GymId, event: EventType) -> Result<Audience, DbErr> {
    match db.get_database_backend() {
        DbBackend::Postgres if !crate::db::distributed() => Ok(Audience::InTheWrite),
        _ => Ok(Audience::Found(listeners(db, gym_id, event).await?)),
    }
}

/// Adds the event and its deliveries to `writes`, for `audience`. Found endpoints get one
/// delivery each, as [`emit_to`]. Otherwise (PostgreSQL) the deliveries are inserted from a read
/// of the gym's listening endpoints in the same statement as the caller's other writes
/// ([`listening`] is [`subscribes`] in SQL); the database tells how many it queued.
pub fn emit_to_audience(writes: &mut Writes, backend: DbBackend, event: NewEvent, audience: Audience) -> Queued {
    match audience {
        Audience::Found(targets) => Queued::Known(emit_to(writes, backend, event, targets)),
        Audience::InTheWrite => Queued::Told(emit_in_sql(writes, event)),
    }
}

/// PostgreSQL: the event, and a delivery for each endpoint that listens.
fn emit_in_sql(writes: &mut Writes, NewEvent { gym_id, kind: event, data }: NewEvent) -> Tally {
    let (id, at, envelope) = new_event(event, data);
    let event_sql =
        "INSERT INTO webhook_events (id, gym_id, event_type, payload, created_at) VALUES ($1, $2, $3, $4, $5)";
    let values: [sea_orm::Value; 5] =
        [id.into(), gym_id.into(), event.as_str().into(), envelope.to_string().into(), at.into()];
    writes.push(sea_orm::Statement::from_sql_and_values(DbBackend::Postgres, event_sql, values));
    // A delivery's id: its event's time and version (UUIDv7), the rest from a digest of the event
    // and the endpoint (one delivery each).
    let digest = "md5(CAST($1 AS text) || CAST(e.id AS text))";
    let deliveries_sql = format!(
        "INSERT INTO webhook_deliveries (id, gym_id, endpoint_id, event_id, event_type, status, attempts, \
         attempt_count, next_attempt_at, claimed_until, created_at, updated_at) \
         SELECT CAST(left(replace(CAST($1 AS text), '-', ''), 13) || substr({digest}, 1, 3) || '8' || \
         substr({digest}, 4, 15) AS uuid), e.gym_id, e.id, $1, $3, $5, '[]', 0, $4, NULL, $4, $4 \
         FROM webhook_endpoints e WHERE {} RETURNING 1",
        listening("$2", "$3")
    );
    let pending = sea_orm::ActiveEnum::to_value(&DeliveryStatus::Pending);
    let values: [sea_orm::Value; 5] = [id.into(), gym_id.into(), event.as_str().into(), at.into(), pending.into()];
    writes.push_tallied(sea_orm::Statement::from_sql_and_values(DbBackend::Postgres, deliveries_sql, values))
}

/// The endpoints `e` of the gym `gym` that are enabled and subscribe to the event type `event`
/// (PostgreSQL; the SQL of [`subscribes`]: no list is every type).
fn listening(gym: &str, event: &str) -> String {
    format!(
        "e.gym_id = {gym} AND e.enabled AND (e.event_types IS NULL OR {event} = ANY(string_to_array(e.event_types, ',')))"
    )
}

/// The gym's enabled endpoints that subscribe to `event`, for [`emit_to`].
async fn listeners(db: &impl ConnectionTrait, gym_id: GymId, event: EventType) -> Result<Vec<Uuid>, DbErr> {
    let endpoints = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::GymId.eq(gym_id))
        .filter(webhook_endpoint::Column::Enabled.eq(true))
        .all(db)
        .await?;
    Ok(endpoints.iter().filter(|e| subscribes(e, event)).map(|e| e.id).collect())
}

/// Adds the event and a pending delivery to each of `targets` to `writes`; returns whether any was
/// queued. The event is written when nobody listens too: `GET /events` shows it.
pub fn emit_to(writes: &mut Writes, backend: DbBackend, event: NewEvent, targets: Vec<Uuid>) -> bool {
    let written = write_event(writes, backend, event);
    let queued = !targets.is_empty();
    queue(writes, backend, &written, targets.into_iter());
    queued
}

/// A new event's id, time and envelope.
fn new_event(event: EventType, data: Value) -> (Uuid, DateTime<Utc>, Value) {
    let (id, at) = (new_id(), now());
    (id, at, envelope(id, event, at, data))
}

/// The envelope of an event: the body its deliveries carry and `GET /events/{id}` answers, its keys
/// in the order the document lists `Event`'s fields (serde_json's maps are sorted).
pub fn envelope(id: Uuid, event: EventType, at: DateTime<Utc>, data: Value) -> Value {
    json!({
        "object": "event",
        "id": id,
        "type": event.as_str(),
        "created_at": rfc3339(at),
        "data": data,
    })
}

/// Adds the event envelope to `writes`.
pub(super) fn write_event(writes: &mut Writes, backend: DbBackend, event: NewEvent) -> Written {
    let NewEvent { gym_id, kind: event, data } = event;
    let (id, at, envelope) = new_event(event, data);
    let model = webhook_event::ActiveModel {
        id: Set(id),
        gym_id: Set(gym_id),
        event_type: Set(event.as_str().to_string()),
        payload: Set(envelope.to_string()),
        created_at: Set(at),
    };
    writes.push(webhook_event::Entity::insert(model).build(backend));
    Written { gym_id, id, kind: event, at }
}

/// Adds a pending delivery of the `written` event to each endpoint to `writes`; returns their ids.
pub(super) fn queue(
    writes: &mut Writes,
    backend: DbBackend,
    written: &Written,
    endpoints: impl Iterator<Item = Uuid>,
) -> Vec<Uuid> {
    let Written { gym_id, id: event_id, kind: event, at } = *written;
    let deliveries: Vec<webhook_delivery::ActiveModel> = endpoints
        .map(|endpoint_id| webhook_delivery::ActiveModel {
            id: Set(new_id()),
            gym_id: Set(gym_id),
            endpoint_id: Set(endpoint_id),
            event_id: Set(event_id),
            event_type: Set(event.as_str().to_string()),
            status: Set(DeliveryStatus::Pending),
            attempts: Set("[]".into()),
            attempt_count: Set(0),
            next_attempt_at: Set(Some(at)),
            claimed_until: Set(None),
            created_at: Set(at),
            updated_at: Set(at),
        })
        .collect();
    let ids = deliveries.iter().filter_map(|d| d.id.clone().take()).collect();
    if !deliveries.is_empty() {
        writes.push(webhook_delivery::Entity::insert_many(deliveries).build(backend));
    }
    ids
}

fn subscribes(e: &webhook_endpoint::Model, event: EventType) -> bool {
    match event {
        // A ping goes where it is sent (see [`ping`]), never to every endpoint.
        EventType::Ping => false,
        _ => e.event_types.as_deref().is_none_or(|types| types.split(',').any(|t| t == event.as_str())),
    }
}

/// How late the most overdue delivery is, in seconds (0 when none is due): the outbox's backlog
/// as `GET /metrics` shows it.
pub async fn oldest_pending_age(db: &DatabaseConnection) -> Result<f64, DbErr> {
    use sea_orm::{QuerySelect, sea_query::Expr};
    use webhook_delivery::Column as C;
    let at = now();
    let oldest: Option<Option<DateTime<Utc>>> = webhook_delivery::Entity::find()
        .select_only()
        .column_as(Expr::col(C::NextAttemptAt).min(), "oldest")
        .filter(C::Status.eq(DeliveryStatus::Pending.as_str()))
        .filter(C::NextAttemptAt.lte(at))
        .into_tuple()
        .one(db)
        .await?;
    Ok(oldest.flatten().map_or(0.0, |t| (at - t).num_milliseconds().max(0) as f64 / 1000.0))
}
