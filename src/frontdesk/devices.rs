//! The devices of a gym's facilities: registered by the companion app, renamed, moved and removed
//! by gym users, seen alive through their requests.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{device, states::DeviceKind};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set, Statement,
};
use uuid::Uuid;

use crate::{
    accounts::{self, AccountError, Actor, Permission},
    db::{KEY_IN_FORCE, placeholders},
    errors::ApiError,
    records::{new_id, now},
};

/// A device seen within this long is online.
pub const ONLINE_WITHIN: Duration = Duration::from_secs(90);

/// How often at most a device's `last_seen_at` is written.
pub const SEEN_EVERY: Duration = Duration::from_secs(10);

/// Whether the device was seen within [`ONLINE_WITHIN`] of `at`.
pub fn online(d: &device::Model, at: DateTime<Utc>) -> bool {
    d.last_seen_at.is_some_and(|t| (at - t).to_std().is_ok_and(|ago| ago <= ONLINE_WITHIN) || t > at)
}

/// What the API calls a device of a kind, in a 404.
pub fn noun(kind: Option<DeviceKind>) -> &'static str {
    match kind {
        None => "device",
        Some(DeviceKind::Door) => "door",
        Some(DeviceKind::Doorbell) => "doorbell",
        Some(DeviceKind::CardTerminal) => "card terminal",
        Some(DeviceKind::FiscalPrinter) => "fiscal printer",
        Some(DeviceKind::Kiosk) => "kiosk",
    }
}

/// Registers a device of a facility of the gym (its first facility when none is given).
pub async fn register(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    kind: DeviceKind,
    name: &str,
    facility_id: Option<Uuid>,
) -> Result<device::Model, ApiError> {
    let facility_id = match facility_id {
        Some(id) => open_facility(db, gym_id, id).await.map(|()| id)?,
        None => {
            accounts::first_facility(db, gym_id)
                .await?
                .ok_or_else(|| ApiError::invalid("facility_id", "This gym has no facility; give a facility_id."))?
                .id
        }
    };
    let at = now();
    let made = device::ActiveModel {
        gym_id: Set(gym_id),
        id: Set(new_id()),
        facility_id: Set(facility_id),
        kind: Set(kind),
        name: Set(name_of(name)?),
        last_seen_at: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
    };
    Ok(made.insert(db).await.map_err(Refused::from)?)
}

/// What a gym user, or the front desk through the device API, may change of a device.
#[derive(Clone, Debug, Default)]
pub struct DeviceChange {
    pub name: Option<String>,
    pub facility_id: Option<Uuid>,
}

/// Why a device cannot be registered or changed as asked.
#[derive(Debug)]
pub enum Refused {
    /// Blank, or longer than 100 characters.
    Name,
    /// Not a facility of the device's gym.
    UnknownFacility,
    /// An archived facility: it takes no new devices.
    ArchivedFacility,
    Db(sea_orm::DbErr),
}

impl From<sea_orm::DbErr> for Refused {
    fn from(e: sea_orm::DbErr) -> Self {
        // A facility archived between the look and the write: the database decides.
        if crate::facilities::archived_refusal(&e) { Self::ArchivedFacility } else { Self::Db(e) }
    }
}

impl From<Refused> for ApiError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Name => ApiError::invalid("name", "The name must have 1 to 100 characters besides spaces."),
            Refused::UnknownFacility => {
                ApiError::invalid("facility_id", "The selected facility_id is not a facility of this gym.")
            }
            Refused::ArchivedFacility => ApiError::invalid("facility_id", crate::members::ARCHIVED_FACILITY),
            Refused::Db(e) => e.into(),
        }
    }
}

impl From<Refused> for AccountError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Name => AccountError::Invalid("the device name must have 1 to 100 characters".into()),
            Refused::UnknownFacility => AccountError::Invalid("that facility is not one of this gym's".into()),
            Refused::ArchivedFacility => {
                AccountError::Invalid("that facility is archived; it takes no new devices".into())
            }
            Refused::Db(e) => e.into(),
        }
    }
}

/// A device's name as kept: trimmed, 1 to 100 characters.
fn name_of(name: &str) -> Result<String, Refused> {
    let name = name.trim();
    match name.is_empty() || name.chars().count() > 100 {
        true => Err(Refused::Name),
        false => Ok(name.to_string()),
    }
}

/// Whether `id` is an open facility of the gym.
async fn open_facility(db: &impl ConnectionTrait, gym_id: GymId, id: Uuid) -> Result<(), Refused> {
    match entity::facility::Entity::find_by_id((gym_id, id)).one(db).await? {
        None => Err(Refused::UnknownFacility),
        Some(f) if f.open_id.is_none() => Err(Refused::ArchivedFacility),
        Some(_) => Ok(()),
    }
}

/// Renames the device or moves it to another open facility of its gym. The move is one update;
/// the database refuses it when the facility is archived meanwhile.
pub async fn apply(
    db: &impl ConnectionTrait,
    d: device::Model,
    change: DeviceChange,
) -> Result<device::Model, Refused> {
    let gym_id = d.gym_id;
    let mut m: device::ActiveModel = d.into();
    if let Some(name) = change.name {
        m.name = Set(name_of(&name)?);
    }
    if let Some(facility) = change.facility_id {
        open_facility(db, gym_id, facility).await?;
        m.facility_id = Set(facility);
    }
    m.updated_at = Set(now());
    Ok(m.update(db).await?)
}

/// The device `id` of the gym, of `kind` when one is given; 404 naming the kind otherwise.
pub async fn find(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    id: &str,
    kind: Option<DeviceKind>,
) -> Result<device::Model, ApiError> {
    let missing = || ApiError::not_found(noun(kind), id);
    let uuid = Uuid::parse_str(id).map_err(|_| missing())?;
    device::Entity::find_by_id((gym_id, uuid))
        .one(db)
        .await?
        .filter(|d| kind.is_none_or(|k| d.kind == k))
        .ok_or_else(missing)
}

/// The door `id` of the gym with the time zone its facility keeps (`None`: the gym's), in one
/// statement: a door's "today" is its facility's.
pub async fn find_door(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    id: &str,
) -> Result<(device::Model, Option<String>), ApiError> {
    use sea_orm::{FromQueryResult, Statement};
    let missing = || ApiError::not_found(noun(Some(DeviceKind::Door)), id);
    let uuid = Uuid::parse_str(id).map_err(|_| missing())?;
    let backend = db.get_database_backend();
    let sql = crate::db::placeholders(
        backend,
        "SELECT d.*, f.timezone AS facility_timezone FROM devices d \
         JOIN facilities f ON f.gym_id = d.gym_id AND f.id = d.facility_id WHERE d.gym_id = ? AND d.id = ?",
    );
    let row = db.query_one(Statement::from_sql_and_values(backend, sql, [gym_id.into(), uuid.into()])).await?;
    let Some(row) = row else { return Err(missing()) };
    let door = device::Model::from_query_result(&row, "")?;
    if door.kind != DeviceKind::Door {
        return Err(missing());
    }
    Ok((door, row.try_get::<Option<String>>("", "facility_timezone")?))
}

/// The devices of a gym and of its sandbox, oldest first, for the settings area and the CLI.
pub async fn all_of(db: &impl ConnectionTrait, actor: &Actor, gym_id: GymId) -> accounts::Result<Vec<device::Model>> {
    actor.require_view(gym_id)?;
    let mut all = Vec::new();
    for gym in accounts::with_sandbox(db, gym_id).await? {
        let found = device::Entity::find()
            .filter(device::Column::GymId.eq(gym))
            .order_by_asc(device::Column::CreatedAt)
            .order_by_asc(device::Column::Id)
            .all(db)
            .await?;
        all.extend(found);
    }
    Ok(all)
}

/// Page `page` (from 1) of the devices of a gym and its sandbox (the gym's first, each oldest
/// first), `per_page` each, with how many there are. Each statement names one gym (on a distributed
/// database it runs on that gym's node alone): five at most, whatever the page.
pub async fn page_of(
    db: &impl ConnectionTrait,
    actor: &Actor,
    gym_id: GymId,
    page: u64,
    per_page: u64,
) -> accounts::Result<(Vec<device::Model>, u64)> {
    actor.require_view(gym_id)?;
    let gyms = accounts::with_sandbox(db, gym_id).await?;
    let mut counts = Vec::with_capacity(gyms.len());
    for gym in &gyms {
        counts.push(device::Entity::find().filter(device::Column::GymId.eq(*gym)).count(db).await?);
    }
    let (mut skip, mut wanted) = (page.saturating_sub(1).saturating_mul(per_page), per_page);
    let mut found = Vec::new();
    for (gym, n) in gyms.iter().zip(&counts) {
        if skip >= *n {
            skip -= n;
            continue;
        }
        let take = wanted.min(n - skip);
        let rows = device::Entity::find()
            .filter(device::Column::GymId.eq(*gym))
            .order_by_asc(device::Column::CreatedAt)
            .order_by_asc(device::Column::Id)
            .offset(skip)
            .limit(take)
            .all(db)
            .await?;
        found.extend(rows);
        (skip, wanted) = (0, wanted - take);
        if wanted == 0 {
            break;
        }
    }
    Ok((found, counts.iter().sum()))
}

/// A device of `owner` (a gym, for a device of it or of its sandbox) the actor may see.
pub async fn one_of(
    db: &impl ConnectionTrait,
    actor: &Actor,
    owner: GymId,
    id: Uuid,
) -> accounts::Result<device::Model> {
    actor.require_view(owner)?;
    in_gym_or_sandbox(db, owner, id).await
}

/// A device the actor may manage (of their gym or its sandbox).
async fn managed(db: &impl ConnectionTrait, actor: &Actor, owner: GymId, id: Uuid) -> accounts::Result<device::Model> {
    actor.require(Permission::SettingsManage, owner)?;
    in_gym_or_sandbox(db, owner, id).await
}

async fn in_gym_or_sandbox(db: &impl ConnectionTrait, owner: GymId, id: Uuid) -> accounts::Result<device::Model> {
    for gym in accounts::with_sandbox(db, owner).await? {
        if let Some(d) = device::Entity::find_by_id((gym, id)).one(db).await? {
            return Ok(d);
        }
    }
    Err(AccountError::NotFound("device"))
}

/// Renames or moves a device of `owner` (a gym, for a device of it or of its sandbox).
pub async fn change(
    db: &DatabaseConnection,
    actor: &Actor,
    owner: GymId,
    id: Uuid,
    change: DeviceChange,
) -> accounts::Result<device::Model> {
    let d = managed(db, actor, owner, id).await?;
    Ok(apply(db, d, change).await?)
}

/// Removes a device with its rings and commands (they go with it).
pub async fn remove(db: &DatabaseConnection, actor: &Actor, owner: GymId, id: Uuid) -> accounts::Result<()> {
    let d = managed(db, actor, owner, id).await?;
    device::Entity::delete_by_id((d.gym_id, d.id)).exec(db).await?;
    Ok(())
}

/// Devices' last requests: each request naming a device marks it seen, written at most every
/// [`SEEN_EVERY`] per device (an in-process gate, then a conditional update, in a task of its own
/// off the request's path).
#[derive(Default)]
pub struct Heartbeats {
    seen: Mutex<HashMap<(GymId, Uuid), Instant>>,
}

impl Heartbeats {
    pub fn seen(&self, db: &DatabaseConnection, gym_id: GymId, device_id: Uuid) {
        let at = Instant::now();
        {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.get(&(gym_id, device_id)).is_some_and(|t| at.duration_since(*t) < SEEN_EVERY) {
                return;
            }
            seen.insert((gym_id, device_id), at);
            if seen.len() > 100_000 {
                seen.retain(|_, t| at.duration_since(*t) < SEEN_EVERY);
            }
        }
        let db = db.clone();
        tokio::spawn(async move {
            if let Err(e) = mark_seen(&db, gym_id, device_id, now()).await {
                tracing::warn!(error = %e, "could not record a device's last request");
            }
        });
    }
}

/// Writes `at` as the device's `last_seen_at`, unless a write within [`SEEN_EVERY`] did.
pub async fn mark_seen(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    device_id: Uuid,
    at: DateTime<Utc>,
) -> Result<(), sea_orm::DbErr> {
    let backend = db.get_database_backend();
    let cutoff = at - chrono::Duration::from_std(SEEN_EVERY).unwrap_or_default();
    let sql = placeholders(
        backend,
        "UPDATE devices SET last_seen_at = ? WHERE gym_id = ? AND id = ? AND (last_seen_at IS NULL OR last_seen_at < ?)",
    );
    db.execute(Statement::from_sql_and_values(
        backend,
        sql,
        [at.into(), gym_id.into(), device_id.into(), cutoff.into()],
    ))
    .await?;
    Ok(())
}

/// Whether the API key `key_id` is in force for devices (`db::KEY_IN_FORCE`: neither revoked nor
/// rolled).
pub async fn key_in_force(db: &impl ConnectionTrait, key_id: Uuid) -> Result<bool, sea_orm::DbErr> {
    let backend = db.get_database_backend();
    let sql = placeholders(backend, &format!("SELECT 1 AS n WHERE {}", KEY_IN_FORCE));
    Ok(db.query_one(Statement::from_sql_and_values(backend, sql, [key_id.into()])).await?.is_some())
}
