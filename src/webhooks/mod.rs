//! Webhooks: endpoints (managed by gym users and operators), events written to an outbox in the
//! transaction of the change that caused them, and their signing. The dispatcher that sends them
//! is [`dispatch`].
//!
//! A new kind of event needs only a [`EventType`] variant and a call to [`emit`] in the writing
//! transaction; the delivery machinery never looks inside `data`.

pub mod dispatch;
mod proxy;

/// The `User-Agent` of every webhook attempt, direct or through a proxy.
const USER_AGENT: &str = concat!("gymapi-webhooks/", env!("CARGO_PKG_VERSION"));

use std::net::IpAddr;

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use chrono::{DateTime, Duration, Utc};
use entity::{states::DeliveryStatus, webhook_delivery, webhook_endpoint, webhook_event};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QueryTrait, Set,
};
use serde_json::{Value, json};
use sha2::Sha256;
use uuid::Uuid;

use crate::{
    accounts::{self, AccountError, Actor, Permission},
    db::{Tally, Writes},
    records::{new_id, now, rfc3339},
};

/// How long a rotated-out secret keeps signing (both signatures are sent meanwhile).
pub const SECRET_OVERLAP: Duration = Duration::hours(24);

/// The events a gym can receive. Their payload schemas are in openapi.yaml (`WebhookEvent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    MemberCreated,
    MemberUpdated,
    AttendanceCreated,
    PurchaseCreated,
    PurchaseUpdated,
    ImportCompleted,
    Ping,
}

impl EventType {
    pub const ALL: [EventType; 7] = [
        Self::MemberCreated,
        Self::MemberUpdated,
        Self::AttendanceCreated,
        Self::PurchaseCreated,
        Self::PurchaseUpdated,
        Self::ImportCompleted,
        Self::Ping,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MemberCreated => "member.created",
            Self::MemberUpdated => "member.updated",
            Self::AttendanceCreated => "attendance.created",
            Self::PurchaseCreated => "purchase.created",
            Self::PurchaseUpdated => "purchase.updated",
            Self::ImportCompleted => "import.completed",
            Self::Ping => "ping",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

// --- events (the outbox) -------------------------------------------------------------------------

/// Writes an event and one pending delivery per enabled endpoint of the gym that subscribes to its
/// type, on `db`, which is the transaction of the change the event reports. Returns whether any
/// delivery was queued (the caller may wake the dispatcher after its commit).
pub async fn emit(db: &impl ConnectionTrait, gym_id: Uuid, event: EventType, data: Value) -> Result<bool, DbErr> {
    let mut writes = Writes::new();
    let targets = listeners(db, gym_id, event).await?;
    let queued = emit_to(&mut writes, db.get_database_backend(), (gym_id, event, data), targets);
    writes.run(db).await?;
    Ok(queued)
}

/// Wakes the dispatcher for deliveries the caller just queued and committed: at once, or, inside a
/// keyed write, once the write's transaction commits (a delivery is not looked for before it
/// exists). A write that queued nothing does not wake it: each wake-up costs the dispatcher a query.
pub async fn wake(dispatcher: &std::sync::Arc<tokio::sync::Notify>) {
    wake_if(dispatcher, Queued::Known(true)).await;
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
pub async fn wake_if(dispatcher: &std::sync::Arc<tokio::sync::Notify>, queued: Queued) {
    let dispatcher = dispatcher.clone();
    crate::db::after_commit(async move {
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
    gym_id: Uuid,
    event: EventType,
    data: Value,
) -> Result<Queued, DbErr> {
    let audience = audience(db, gym_id, event).await?;
    Ok(emit_to_audience(writes, db.get_database_backend(), (gym_id, event, data), audience))
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
pub async fn audience(db: &impl ConnectionTrait, gym_id: Uuid, event: EventType) -> Result<Audience, DbErr> {
    match db.get_database_backend() {
        DbBackend::Postgres if !crate::db::distributed() => Ok(Audience::InTheWrite),
        _ => Ok(Audience::Found(listeners(db, gym_id, event).await?)),
    }
}

/// Adds the event and its deliveries to `writes`, for `audience`. Found endpoints get one
/// delivery each, as [`emit_to`]. Otherwise (PostgreSQL) the event is written only if an endpoint
/// listens, and the deliveries are inserted from a read of the gym's listening endpoints in the
/// same statement as the caller's other writes ([`listening`] is [`subscribes`] in SQL); the
/// database tells how many it queued.
pub fn emit_to_audience(
    writes: &mut Writes,
    backend: DbBackend,
    (gym_id, event, data): (Uuid, EventType, Value),
    audience: Audience,
) -> Queued {
    match audience {
        Audience::Found(targets) => Queued::Known(emit_to(writes, backend, (gym_id, event, data), targets)),
        Audience::InTheWrite => Queued::Told(emit_in_sql(writes, (gym_id, event, data))),
    }
}

/// PostgreSQL: the event, written if an endpoint listens, and a delivery for each that does.
fn emit_in_sql(writes: &mut Writes, (gym_id, event, data): (Uuid, EventType, Value)) -> Tally {
    let (id, at, envelope) = new_event(event, data);
    let event_sql = format!(
        "INSERT INTO webhook_events (id, gym_id, event_type, payload, created_at) \
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE {})",
        listening("$2", "$3")
    );
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
async fn listeners(db: &impl ConnectionTrait, gym_id: Uuid, event: EventType) -> Result<Vec<Uuid>, DbErr> {
    let endpoints = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::GymId.eq(gym_id))
        .filter(webhook_endpoint::Column::Enabled.eq(true))
        .all(db)
        .await?;
    Ok(endpoints.iter().filter(|e| subscribes(e, event)).map(|e| e.id).collect())
}

/// Adds the event and a pending delivery to each of `targets` to `writes`; returns whether any was
/// queued (nobody listening: nothing is kept, the event would never be sent or shown).
pub fn emit_to(
    writes: &mut Writes,
    backend: DbBackend,
    (gym_id, event, data): (Uuid, EventType, Value),
    targets: Vec<Uuid>,
) -> bool {
    if targets.is_empty() {
        return false;
    }
    let (id, at) = write_event(writes, backend, gym_id, event, data);
    queue(writes, backend, (gym_id, id, event), targets.into_iter(), at);
    true
}

/// A new event's id, time and envelope.
fn new_event(event: EventType, data: Value) -> (Uuid, DateTime<Utc>, Value) {
    let at = now();
    let id = new_id();
    let envelope = json!({
        "object": "event",
        "id": id,
        "type": event.as_str(),
        "created_at": rfc3339(at),
        "data": data,
    });
    (id, at, envelope)
}

/// Adds the event envelope to `writes`; returns its id and time.
fn write_event(
    writes: &mut Writes,
    backend: DbBackend,
    gym_id: Uuid,
    event: EventType,
    data: Value,
) -> (Uuid, DateTime<Utc>) {
    let (id, at, envelope) = new_event(event, data);
    let model = webhook_event::ActiveModel {
        id: Set(id),
        gym_id: Set(gym_id),
        event_type: Set(event.as_str().to_string()),
        payload: Set(envelope.to_string()),
        created_at: Set(at),
    };
    writes.push(webhook_event::Entity::insert(model).build(backend));
    (id, at)
}

/// Adds a pending delivery of the event `(gym, id, type)` to each endpoint to `writes`; returns
/// their ids.
fn queue(
    writes: &mut Writes,
    backend: DbBackend,
    (gym_id, event_id, event): (Uuid, Uuid, EventType),
    endpoints: impl Iterator<Item = Uuid>,
    at: DateTime<Utc>,
) -> Vec<Uuid> {
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

// --- signing (Standard Webhooks) -----------------------------------------------------------------

/// A new signing secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("whsec_{}", B64.encode(bytes))
}

/// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under `secret` (`whsec_<base64 key>`).
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = B64.decode(secret.strip_prefix("whsec_").unwrap_or(secret)).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!("v1,{}", B64.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: one signature per valid secret, space separated.
pub fn signature_header(endpoint: &webhook_endpoint::Model, id: &str, timestamp: i64, body: &[u8]) -> String {
    let at = now();
    let mut sigs: Vec<String> = sign(&endpoint.secret, id, timestamp, body).into_iter().collect();
    if let (Some(previous), Some(until)) = (&endpoint.previous_secret, endpoint.previous_secret_expires_at)
        && until > at
    {
        sigs.extend(sign(previous, id, timestamp, body));
    }
    sigs.join(" ")
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

// --- URL safety ----------------------------------------------------------------------------------

/// Whether an address is on the public internet (not loopback, private, link-local, shared,
/// documentation, multicast or unspecified).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(embedded) = embedded_ipv4(v6) {
                return embedded.iter().all(|v4| is_public(IpAddr::V4(*v4)));
            }
            let [first, second, ..] = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link local
                || (first & 0xffc0) == 0xfec0 // site local (deprecated)
                || (first == 0x0100 && v6.segments()[1..4] == [0, 0, 0]) // discard only
                || (first == 0x0064 && second == 0xff9b) // NAT64 for local use (64:ff9b:1::/48)
                || (first == 0x2001 && second == 0x0db8)) // documentation
        }
    }
}

/// The IPv4 addresses an IPv6 address stands for, where it is one of the forms that carry one:
/// IPv4-compatible (`::a.b.c.d`, deprecated; `::` and `::1` excepted), IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96`), 6to4
/// (`2002:AABB:CCDD::/16`) and Teredo (`2001:0::/32`: its server, and its client with the bits
/// inverted). An address of these forms is public only when every address it carries is.
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<Vec<std::net::Ipv4Addr>> {
    use std::net::Ipv4Addr;
    let s = v6.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0 | 0xffff, hi, lo] | [0, 0, 0, 0, 0xffff, 0, hi, lo] | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => {
            Some(vec![v4(hi, lo)])
        }
        [0x2002, hi, lo, ..] => Some(vec![v4(hi, lo)]),
        [0x2001, 0, server_hi, server_lo, _, _, hi, lo] => Some(vec![v4(server_hi, server_lo), v4(!hi, !lo)]),
        _ => None,
    }
}

/// Checks an endpoint URL as written: `https` (or `http` when private targets are allowed), a host,
/// and, for an IP literal, a public address. Names are checked again at every send.
pub fn check_url(url: &str, allow_private: bool) -> Result<url::Url, String> {
    let u = url::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    match u.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => return Err("the URL must start with https://".into()),
    }
    let host = u.host().ok_or("the URL has no host")?;
    let literal = match host {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    };
    if let Some(ip) = literal
        && !allow_private
        && !is_public(ip)
    {
        return Err(format!("{ip} is not a public address"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("the URL must not carry credentials".into());
    }
    Ok(u)
}

// --- endpoints (settings area and CLI) -----------------------------------------------------------

/// A new endpoint and its secret, shown once.
#[derive(Debug)]
pub struct NewEndpoint {
    pub model: webhook_endpoint::Model,
    pub secret: String,
}

/// The gym whose events an endpoint of `gym_id` receives: the gym, or its sandbox.
async fn target_gym(db: &impl ConnectionTrait, actor: &Actor, gym_id: Uuid, sandbox: bool) -> accounts::Result<Uuid> {
    actor.require(Permission::SettingsManage, gym_id)?;
    let gym = accounts::find_gym(db, gym_id).await?;
    if gym.parent_gym_id.is_some() {
        return Err(AccountError::IsSandbox);
    }
    if !sandbox {
        return Ok(gym.id);
    }
    accounts::sandbox_of(db, gym.id)
        .await?
        .map(|s| s.id)
        .ok_or_else(|| AccountError::Invalid("Provision a sandbox first to add a sandbox endpoint.".into()))
}

fn event_types(types: &[String]) -> accounts::Result<Option<String>> {
    if types.is_empty() {
        return Ok(None);
    }
    for t in types {
        if EventType::parse(t).is_none_or(|t| t == EventType::Ping) {
            let known: Vec<&str> =
                EventType::ALL.iter().filter(|t| **t != EventType::Ping).map(|t| t.as_str()).collect();
            return Err(AccountError::Invalid(format!("unknown event type {t:?} (one of: {})", known.join(", "))));
        }
    }
    Ok(Some(types.join(",")))
}

pub async fn create_endpoint(
    db: &DatabaseConnection,
    actor: &Actor,
    gym_id: Uuid,
    sandbox: bool,
    url: &str,
    types: &[String],
    allow_private: bool,
) -> accounts::Result<NewEndpoint> {
    let target = target_gym(db, actor, gym_id, sandbox).await?;
    let url = check_url(url.trim(), allow_private).map_err(AccountError::Invalid)?;
    let event_types = event_types(types)?;
    let secret = new_secret();
    let at = now();
    let model = webhook_endpoint::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(target),
        url: Set(url.to_string()),
        event_types: Set(event_types),
        enabled: Set(true),
        disabled_reason: Set(None),
        secret: Set(secret.clone()),
        previous_secret: Set(None),
        previous_secret_expires_at: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(db)
    .await?;
    Ok(NewEndpoint { model, secret })
}

/// The endpoints of a gym and of its sandbox, oldest first.
pub async fn list_endpoints(
    db: &impl ConnectionTrait,
    actor: &Actor,
    gym_id: Uuid,
) -> accounts::Result<Vec<webhook_endpoint::Model>> {
    actor.require_view(gym_id)?;
    let mut all = Vec::new();
    // One statement per gym: no statement reads two gyms (docs/scaling.md).
    for gym in accounts::with_sandbox(db, gym_id).await? {
        all.extend(webhook_endpoint::Entity::find().filter(webhook_endpoint::Column::GymId.eq(gym)).all(db).await?);
    }
    all.sort_by_key(|e| (e.created_at, e.id));
    Ok(all)
}

/// An endpoint the actor may manage (of their gym or its sandbox).
pub async fn find_endpoint(
    db: &DatabaseConnection,
    actor: &Actor,
    id: Uuid,
) -> accounts::Result<webhook_endpoint::Model> {
    let found = match actor {
        // A gym user's endpoints are their gym's or its sandbox's: one lookup by key in each.
        Actor::User(u) => {
            let mut found = None;
            for gym in accounts::with_sandbox(db, u.gym_id).await? {
                found = webhook_endpoint::Entity::find_by_id((gym, id)).one(db).await?;
                if found.is_some() {
                    break;
                }
            }
            found
        }
        // An operator names an endpoint by its id alone: a lookup across gyms (docs/scaling.md).
        Actor::Operator => {
            use sea_orm::{FromQueryResult, QuerySelect, QueryTrait};
            let by_id = webhook_endpoint::Entity::find()
                .filter(webhook_endpoint::Column::Id.eq(id))
                .limit(1)
                .build(db.get_database_backend());
            let rows = crate::db::query_across_gyms(db, by_id).await?;
            rows.first().map(|r| webhook_endpoint::Model::from_query_result(r, "")).transpose()?
        }
    };
    let e = found.ok_or(AccountError::NotFound("webhook endpoint"))?;
    let gym = accounts::find_gym(db, e.gym_id).await?;
    let owner = gym.parent_gym_id.unwrap_or(gym.id);
    actor.require(Permission::SettingsManage, owner).map_err(|err| match err {
        AccountError::NotFound(_) => AccountError::NotFound("webhook endpoint"),
        other => other,
    })?;
    Ok(e)
}

pub async fn set_enabled(
    db: &DatabaseConnection,
    actor: &Actor,
    id: Uuid,
    enabled: bool,
) -> accounts::Result<webhook_endpoint::Model> {
    let e = find_endpoint(db, actor, id).await?;
    let mut m: webhook_endpoint::ActiveModel = e.into();
    m.enabled = Set(enabled);
    m.disabled_reason = Set((!enabled).then(|| "Disabled by a person.".to_string()));
    m.updated_at = Set(now());
    Ok(m.update(db).await?)
}

/// A new secret; the old one keeps signing for [`SECRET_OVERLAP`].
pub async fn rotate_secret(db: &DatabaseConnection, actor: &Actor, id: Uuid) -> accounts::Result<NewEndpoint> {
    let e = find_endpoint(db, actor, id).await?;
    let secret = new_secret();
    let at = now();
    let mut m: webhook_endpoint::ActiveModel = e.clone().into();
    m.previous_secret = Set(Some(e.secret));
    m.previous_secret_expires_at = Set(Some(at + SECRET_OVERLAP));
    m.secret = Set(secret.clone());
    m.updated_at = Set(at);
    Ok(NewEndpoint { model: m.update(db).await?, secret })
}

/// Deletes an endpoint with its deliveries.
pub async fn delete_endpoint(db: &DatabaseConnection, actor: &Actor, id: Uuid) -> accounts::Result<()> {
    let e = find_endpoint(db, actor, id).await?;
    let txn = crate::db::begin_writing(db).await?;
    webhook_delivery::Entity::delete_many()
        .filter(webhook_delivery::Column::GymId.eq(e.gym_id))
        .filter(webhook_delivery::Column::EndpointId.eq(e.id))
        .exec(&txn)
        .await?;
    webhook_endpoint::Entity::delete_by_id((e.gym_id, e.id)).exec(&txn).await?;
    txn.commit().await?;
    Ok(())
}

/// Queues a `ping` to one endpoint; returns the delivery id.
pub async fn ping(db: &DatabaseConnection, actor: &Actor, id: Uuid) -> accounts::Result<Uuid> {
    let e = find_endpoint(db, actor, id).await?;
    let txn = crate::db::begin_writing(db).await?;
    let data = json!({"message": "This is a test event from gymapi."});
    let mut writes = Writes::new();
    let backend = txn.get_database_backend();
    let (event_id, at) = write_event(&mut writes, backend, e.gym_id, EventType::Ping, data);
    let ids = queue(&mut writes, backend, (e.gym_id, event_id, EventType::Ping), std::iter::once(e.id), at);
    writes.run(&txn).await?;
    txn.commit().await?;
    ids.into_iter().next().ok_or(AccountError::NotFound("delivery"))
}

// --- deliveries (the API and the settings area) -------------------------------------------------

/// Queues a delivery of `gym_id` for an immediate attempt, whatever its state; `None` if the gym has
/// no such delivery. The dispatcher sees `updated_at` move and keeps the delivery pending even if
/// an attempt is in flight.
pub async fn redeliver(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    delivery_id: Uuid,
) -> Result<Option<webhook_delivery::Model>, DbErr> {
    use sea_orm::sea_query::Expr;
    use webhook_delivery::Column as C;
    let at = now();
    let updated = webhook_delivery::Entity::update_many()
        .col_expr(C::Status, Expr::value(DeliveryStatus::Pending.as_str()))
        .col_expr(C::NextAttemptAt, Expr::value(Some(at)))
        .col_expr(C::UpdatedAt, Expr::value(at))
        .filter(C::GymId.eq(gym_id))
        .filter(C::Id.eq(delivery_id))
        .exec(db)
        .await?;
    if updated.rows_affected == 0 {
        return Ok(None);
    }
    webhook_delivery::Entity::find_by_id((gym_id, delivery_id)).one(db).await
}

/// The newest deliveries of a gym and of its sandbox, for the settings area.
pub async fn recent_deliveries(
    db: &impl ConnectionTrait,
    actor: &Actor,
    gym_id: Uuid,
    limit: u64,
) -> accounts::Result<Vec<webhook_delivery::Model>> {
    use sea_orm::QuerySelect;
    actor.require_view(gym_id)?;
    let mut all = Vec::new();
    for gym in accounts::with_sandbox(db, gym_id).await? {
        all.extend(
            webhook_delivery::Entity::find()
                .filter(webhook_delivery::Column::GymId.eq(gym))
                .order_by_desc(webhook_delivery::Column::CreatedAt)
                .order_by_desc(webhook_delivery::Column::Id)
                .limit(limit)
                .all(db)
                .await?,
        );
    }
    all.sort_by_key(|d| std::cmp::Reverse((d.created_at, d.id)));
    all.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(all)
}

/// Deliveries per day (UTC) of the last `days` days by outcome: `(day, delivered, pending,
/// failed)`, oldest first, every day present.
pub async fn daily_outcomes(
    db: &impl ConnectionTrait,
    gym_id: Uuid,
    days: i64,
) -> accounts::Result<Vec<(chrono::NaiveDate, i64, i64, i64)>> {
    use sea_orm::QuerySelect;
    let today = Utc::now().date_naive();
    let first = today - Duration::days(days - 1);
    let since = first.and_hms_opt(0, 0, 0).map(|t| t.and_utc()).unwrap_or_else(Utc::now);
    let mut rows: Vec<(DateTime<Utc>, DeliveryStatus)> = Vec::new();
    for gym in accounts::with_sandbox(db, gym_id).await? {
        let found: Vec<(DateTime<Utc>, DeliveryStatus)> = webhook_delivery::Entity::find()
            .select_only()
            .column(webhook_delivery::Column::CreatedAt)
            .column(webhook_delivery::Column::Status)
            .filter(webhook_delivery::Column::GymId.eq(gym))
            .filter(webhook_delivery::Column::CreatedAt.gte(since))
            .into_tuple()
            .all(db)
            .await?;
        rows.extend(found);
    }
    let mut out: Vec<(chrono::NaiveDate, i64, i64, i64)> =
        (0..days).map(|i| (first + Duration::days(i), 0, 0, 0)).collect();
    for (at, status) in rows {
        let Ok(i) = usize::try_from((at.date_naive() - first).num_days()) else { continue };
        let Some(day) = out.get_mut(i) else { continue };
        match status {
            DeliveryStatus::Delivered => day.1 += 1,
            DeliveryStatus::Failed => day.3 += 1,
            DeliveryStatus::Pending => day.2 += 1,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn signatures_match_the_standard_webhooks_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn only_public_addresses_are_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "0.0.0.0",
            "::127.0.0.1",
            "::7f00:1",
            "::ffff:0:10.0.0.1",
            "64:ff9b::192.168.1.1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2001:0:4136:e378:8000:63bf:f5ff:fffe", // Teredo, client 10.0.0.1
            "2001:0:a00:1::5efe:1:1",               // Teredo, server 10.0.0.1
            "fec0::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111", "1.1.1.1", "64:ff9b::1.1.1.1", "2002:101:101::1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
        assert!(check_url("http://example.com/hook", false).is_err());
        assert!(check_url("https://10.0.0.1/hook", false).is_err());
        assert!(check_url("https://user:pw@example.com/", false).is_err());
        assert!(check_url("https://example.com/hook", false).is_ok());
        assert!(check_url("http://127.0.0.1:9/hook", true).is_ok());
    }
}
