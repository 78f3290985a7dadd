//! Gyms, sandboxes, API keys and gym users: the domain behind the operators' CLI and the settings
//! area. Nothing here is reachable through the integration API.

use argon2::{
    Argon2, PasswordHasher,
    password_hash::{SaltString, rand_core::OsRng},
};
use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{
    api_key, facility, gym,
    states::{Role, SubscriptionStatus},
    user,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use uuid::Uuid;

use crate::{
    auth,
    context::Environment,
    db::is_unique_violation,
    facilities,
    limits::Store,
    records::{new_id, now},
};

/// What the settings area and the CLI say when a test key is asked for without a sandbox.
pub const SANDBOX_REQUIRED: &str = "Provision a sandbox first to create a test key.";

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{SANDBOX_REQUIRED}")]
    SandboxRequired,
    #[error("this gym already has a sandbox")]
    SandboxExists,
    #[error("a sandbox cannot have a sandbox, keys or users of its own; use its parent gym")]
    IsSandbox,
    #[error("this key is already retiring and cannot be rolled again")]
    AlreadyRetiring,
    #[error("this key no longer works (revoked or expired)")]
    Inactive,
    #[error("the permission {0} is required")]
    PermissionDenied(&'static str),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

impl From<facilities::FacilityError> for AccountError {
    fn from(e: facilities::FacilityError) -> Self {
        match e {
            facilities::FacilityError::NotFound => Self::NotFound("facility"),
            facilities::FacilityError::Invalid(_, message) => Self::Invalid(message),
            facilities::FacilityError::Db(e) => Self::Db(e),
        }
    }
}

pub type Result<T> = std::result::Result<T, AccountError>;

/// A permission of a gym user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Manage keys, the sandbox and webhooks (Settings > Integrations).
    SettingsManage,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SettingsManage => "settings.manage",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        (s == "settings.manage").then_some(Self::SettingsManage)
    }
}

/// Who asks for an action: an operator at the CLI, or a signed-in gym user.
#[derive(Clone, Debug)]
pub enum Actor {
    Operator,
    User(user::Model),
}

impl Actor {
    /// The one place where permissions are enforced: owners have every permission, employees only
    /// those granted to them, and a user acts only on their own gym.
    pub fn require(&self, permission: Permission, gym_id: GymId) -> Result<()> {
        match self {
            Self::Operator => Ok(()),
            Self::User(u) if u.gym_id != gym_id => Err(AccountError::NotFound("gym")),
            Self::User(u) if user_has(u, permission) => Ok(()),
            Self::User(_) => Err(AccountError::PermissionDenied(permission.as_str())),
        }
    }

    /// Viewing a gym's settings: every user of the gym may (acting needs [`Actor::require`]).
    pub fn require_view(&self, gym_id: GymId) -> Result<()> {
        match self {
            Self::User(u) if u.gym_id != gym_id => Err(AccountError::NotFound("gym")),
            _ => Ok(()),
        }
    }
}

pub fn user_has(u: &user::Model, permission: Permission) -> bool {
    u.role == Role::Owner || u.permissions.split(',').any(|p| p.trim() == permission.as_str())
}

fn check_timezone(tz: &str) -> Result<()> {
    crate::records::timezone(tz).map(|_| ()).map_err(AccountError::Invalid)
}

/// Creates a production gym with its first facility.
pub async fn create_gym(db: &DatabaseConnection, name: &str, timezone: &str, api_access: bool) -> Result<gym::Model> {
    let name = name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(AccountError::Invalid("the gym name must have 1 to 200 characters".into()));
    }
    check_timezone(timezone)?;
    let txn = crate::db::begin_writing(db).await?;
    let gym = insert_gym(&txn, name, timezone, api_access, None).await?;
    txn.commit().await?;
    Ok(gym)
}

async fn insert_gym(
    db: &impl ConnectionTrait,
    name: &str,
    timezone: &str,
    api_access: bool,
    parent: Option<GymId>,
) -> Result<gym::Model> {
    let at = now();
    let gym = gym::ActiveModel {
        id: Set(GymId::generate()),
        name: Set(name.to_string()),
        timezone: Set(timezone.to_string()),
        parent_gym_id: Set(parent),
        api_access: Set(api_access),
        device_access: Set(true),
        subscription_status: Set(SubscriptionStatus::Active),
        grace_ends_at: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(db)
    .await?;
    let first = facilities::NewFacility { name: "Main facility".into(), ..Default::default() };
    facilities::row(gym.id, first, at).insert(db).await?;
    Ok(gym)
}

pub async fn find_gym(db: &impl ConnectionTrait, id: GymId) -> Result<gym::Model> {
    gym::Entity::find_by_id(id).one(db).await?.ok_or(AccountError::NotFound("gym"))
}

async fn production_gym(db: &impl ConnectionTrait, id: GymId) -> Result<gym::Model> {
    let gym = find_gym(db, id).await?;
    if gym.parent_gym_id.is_some() {
        return Err(AccountError::IsSandbox);
    }
    Ok(gym)
}

/// Changes to a gym's plan and subscription (operators only).
#[derive(Default, Debug)]
pub struct GymUpdate {
    pub api_access: Option<bool>,
    pub device_access: Option<bool>,
    pub subscription_status: Option<SubscriptionStatus>,
    pub grace_ends_at: Option<Option<DateTime<Utc>>>,
    pub timezone: Option<String>,
}

/// Changes a gym; its keys' cached grants are dropped, so the change holds from the next request.
pub async fn update_gym(
    db: &DatabaseConnection,
    store: &dyn Store,
    id: GymId,
    update: GymUpdate,
) -> Result<gym::Model> {
    let gym = production_gym(db, id).await?;
    let mut m: gym::ActiveModel = gym.into();
    if let Some(v) = update.api_access {
        m.api_access = Set(v);
    }
    if let Some(v) = update.device_access {
        m.device_access = Set(v);
    }
    if let Some(v) = update.subscription_status {
        m.subscription_status = Set(v);
    }
    if let Some(v) = update.grace_ends_at {
        m.grace_ends_at = Set(v);
    }
    if let Some(tz) = update.timezone {
        check_timezone(&tz)?;
        m.timezone = Set(tz);
    }
    m.updated_at = Set(now());
    let gym = m.update(db).await?;
    forget_grants(db, store, id).await?;
    Ok(gym)
}

/// Drops the cached grants of the gym's keys (its sandbox's included): what a grant holds of the
/// gym is read again on the next request.
async fn forget_grants(db: &impl ConnectionTrait, store: &dyn Store, gym_id: GymId) -> Result<()> {
    let keys: Vec<String> = api_key::Entity::find()
        .select_only()
        .column(api_key::Column::Fingerprint)
        .filter(api_key::Column::GymId.eq(gym_id))
        .filter(api_key::Column::RevokedAt.is_null())
        .into_tuple()
        .all(db)
        .await?;
    auth::forget(store, &keys).await;
    Ok(())
}

/// The gym whose facilities the actor manages from `owner`'s settings or the CLI: the gym, or
/// with `sandbox` its sandbox (which must exist).
pub async fn facilities_gym(db: &impl ConnectionTrait, actor: &Actor, owner: GymId, sandbox: bool) -> Result<GymId> {
    actor.require(Permission::SettingsManage, owner)?;
    let gym = production_gym(db, owner).await?;
    if !sandbox {
        return Ok(gym.id);
    }
    Ok(sandbox_of(db, owner).await?.ok_or(AccountError::SandboxRequired)?.id)
}

/// The facility `id` the actor may manage, and the gym whose settings hold it (for a facility of a
/// sandbox, its parent).
pub async fn managed_facility(db: &DatabaseConnection, actor: &Actor, id: Uuid) -> Result<(GymId, facility::Model)> {
    match actor {
        Actor::User(u) => {
            actor.require(Permission::SettingsManage, u.gym_id)?;
            let gyms = with_sandbox(db, u.gym_id).await?;
            Ok((u.gym_id, facilities::find(db, &gyms, id).await?))
        }
        Actor::Operator => {
            let f = facilities::find_any(db, id).await?;
            let gym = find_gym(db, f.gym_id).await?;
            Ok((gym.parent_gym_id.unwrap_or(gym.id), f))
        }
    }
}

/// Archives a facility of the gym or its sandbox, moving its members and devices to `move_to`
/// (see `facilities::archive`); the keys' grants, which name the gym's first open facility, are
/// read again.
pub async fn archive_facility(
    db: &DatabaseConnection,
    store: &dyn Store,
    actor: &Actor,
    owner: GymId,
    id: Uuid,
    move_to: Option<Uuid>,
) -> Result<facilities::Archived> {
    actor.require(Permission::SettingsManage, owner)?;
    let gyms = with_sandbox(db, owner).await?;
    let archived = facilities::archive(db, &gyms, id, move_to).await?;
    forget_grants(db, store, owner).await?;
    Ok(archived)
}

/// The sandbox of a gym, if it has one.
pub async fn sandbox_of(db: &impl ConnectionTrait, gym_id: GymId) -> Result<Option<gym::Model>> {
    Ok(gym::Entity::find().filter(gym::Column::ParentGymId.eq(gym_id)).one(db).await?)
}

/// Provisions the gym's sandbox: "<gym name> (Sandbox)", one facility, empty, following the gym's plan.
pub async fn provision_sandbox(db: &DatabaseConnection, actor: &Actor, gym_id: GymId) -> Result<gym::Model> {
    actor.require(Permission::SettingsManage, gym_id)?;
    let txn = crate::db::begin_writing(db).await?;
    let gym = production_gym(&txn, gym_id).await?;
    if sandbox_of(&txn, gym_id).await?.is_some() {
        return Err(AccountError::SandboxExists);
    }
    let name = format!("{} (Sandbox)", gym.name);
    // The unique index on parent_gym_id settles a race between two provisions.
    let sandbox = insert_gym(&txn, &name, &gym.timezone, gym.api_access, Some(gym.id)).await.map_err(|e| match e {
        AccountError::Db(err) if is_unique_violation(&err) => AccountError::SandboxExists,
        other => other,
    })?;
    txn.commit().await.map_err(
        |err| {
            if is_unique_violation(&err) { AccountError::SandboxExists } else { err.into() }
        },
    )?;
    Ok(sandbox)
}

/// A gym and, if it has one, its sandbox: the gyms whose endpoints and deliveries its settings show.
pub async fn with_sandbox(db: &impl ConnectionTrait, gym_id: GymId) -> Result<Vec<GymId>> {
    let mut gyms = vec![gym_id];
    gyms.extend(sandbox_of(db, gym_id).await?.map(|s| s.id));
    Ok(gyms)
}

/// A key just created: the full key is in `key` and exists nowhere else.
#[derive(Debug)]
pub struct NewKey {
    pub model: api_key::Model,
    pub key: String,
}

pub async fn create_key(
    db: &DatabaseConnection,
    actor: &Actor,
    gym_id: GymId,
    env: Environment,
    name: &str,
) -> Result<NewKey> {
    actor.require(Permission::SettingsManage, gym_id)?;
    let name = name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(AccountError::Invalid("the key name must have 1 to 100 characters".into()));
    }
    production_gym(db, gym_id).await?;
    if env == Environment::Test && sandbox_of(db, gym_id).await?.is_none() {
        return Err(AccountError::SandboxRequired);
    }
    insert_key(db, gym_id, env, name).await
}

async fn insert_key(db: &impl ConnectionTrait, gym_id: GymId, env: Environment, name: &str) -> Result<NewKey> {
    let key = auth::generate_key(env);
    let model = api_key::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym_id),
        name: Set(name.to_string()),
        environment: Set(env),
        fingerprint: Set(auth::fingerprint(&key)),
        prefix: Set(auth::display_prefix(&key)),
        created_at: Set(now()),
        last_used_at: Set(None),
        expires_at: Set(None),
        revoked_at: Set(None),
        replaced_by_id: Set(None),
        checksummed: Set(true),
    }
    .insert(db)
    .await?;
    Ok(NewKey { model, key })
}

/// The state of a key as the settings area shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyStatus {
    Active,
    Retires { at: DateTime<Utc> },
    Expired,
    Revoked,
}

impl KeyStatus {
    pub fn of(k: &api_key::Model, now: DateTime<Utc>) -> Self {
        if k.revoked_at.is_some_and(|t| t <= now) {
            Self::Revoked
        } else {
            match k.expires_at {
                Some(t) if t <= now => Self::Expired,
                Some(t) => Self::Retires { at: t },
                None => Self::Active,
            }
        }
    }

    /// `Active`, `Retires in 23 h`, `Retires in 12 min`, `Expired`, `Revoked`.
    pub fn label(&self, now: DateTime<Utc>) -> String {
        match self {
            Self::Active => "Active".into(),
            Self::Expired => "Expired".into(),
            Self::Revoked => "Revoked".into(),
            Self::Retires { at } => {
                let secs = (*at - now).num_seconds().max(0);
                if secs >= 3600 {
                    format!("Retires in {} h", secs / 3600)
                } else {
                    format!("Retires in {} min", ((secs + 59) / 60).max(1))
                }
            }
        }
    }

    /// Only an active key offers the Roll action.
    pub fn can_roll(&self) -> bool {
        matches!(self, Self::Active)
    }
}

pub async fn list_keys(db: &impl ConnectionTrait, actor: &Actor, gym_id: GymId) -> Result<Vec<api_key::Model>> {
    actor.require_view(gym_id)?;
    production_gym(db, gym_id).await?;
    Ok(api_key::Entity::find()
        .filter(api_key::Column::GymId.eq(gym_id))
        .order_by_desc(api_key::Column::CreatedAt)
        .order_by_desc(api_key::Column::Id)
        .all(db)
        .await?)
}

pub async fn find_key(db: &impl ConnectionTrait, key_id: Uuid) -> Result<api_key::Model> {
    api_key::Entity::find_by_id(key_id).one(db).await?.ok_or(AccountError::NotFound("key"))
}

/// The result of a roll: a new key now; the old one works until `expires_at`.
#[derive(Debug)]
pub struct Rolled {
    pub new: NewKey,
    pub retiring: api_key::Model,
}

pub async fn roll_key(
    db: &DatabaseConnection,
    store: &dyn Store,
    actor: &Actor,
    key_id: Uuid,
    grace: std::time::Duration,
) -> Result<Rolled> {
    let txn = crate::db::begin_writing(db).await?;
    let old = find_key(&txn, key_id).await?;
    actor.require(Permission::SettingsManage, old.gym_id)?;
    let at = now();
    match KeyStatus::of(&old, at) {
        KeyStatus::Active => {}
        KeyStatus::Retires { .. } => return Err(AccountError::AlreadyRetiring),
        KeyStatus::Expired | KeyStatus::Revoked => return Err(AccountError::Inactive),
    }
    let env = old.environment;
    let new = insert_key(&txn, old.gym_id, env, &old.name).await?;
    let grace = chrono::Duration::from_std(grace).map_err(|_| AccountError::Invalid("grace period too long".into()))?;
    let mut m: api_key::ActiveModel = old.into();
    m.expires_at = Set(Some(at + grace));
    m.replaced_by_id = Set(Some(new.model.id));
    let retiring = m.update(&txn).await?;
    txn.commit().await?;
    auth::forget(store, std::slice::from_ref(&retiring.fingerprint)).await;
    Ok(Rolled { new, retiring })
}

/// Revokes a key: it stops working on the next request, on every instance (its cached grant is
/// dropped once the revoke has committed).
pub async fn revoke_key(
    db: &DatabaseConnection,
    store: &dyn Store,
    actor: &Actor,
    key_id: Uuid,
) -> Result<api_key::Model> {
    let key = find_key(db, key_id).await?;
    actor.require(Permission::SettingsManage, key.gym_id)?;
    let key = if key.revoked_at.is_some() {
        key
    } else {
        let mut m: api_key::ActiveModel = key.into();
        m.revoked_at = Set(Some(now()));
        m.update(db).await?
    };
    auth::forget(store, std::slice::from_ref(&key.fingerprint)).await;
    Ok(key)
}

/// Creates a gym user. Owners have every permission; employees only those granted.
pub async fn create_user(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    email: &str,
    role: Role,
    grants: &[Permission],
    password: &str,
) -> Result<user::Model> {
    production_gym(db, gym_id).await?;
    let email = email.trim().to_lowercase();
    if !email.contains('@') || email.len() > 254 {
        return Err(AccountError::Invalid(format!("{email:?} is not an email address")));
    }
    let hash = hash_password(password)?;
    let at = now();
    let permissions: Vec<&str> = grants.iter().map(|p| p.as_str()).collect();
    let user = user::ActiveModel {
        id: Set(new_id()),
        gym_id: Set(gym_id),
        email: Set(email),
        password_hash: Set(hash),
        role: Set(role),
        permissions: Set(permissions.join(",")),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(db)
    .await
    .map_err(|e| {
        if is_unique_violation(&e) { AccountError::Invalid("a user with this email exists".into()) } else { e.into() }
    })?;
    Ok(user)
}

/// An argon2 hash of a password of at least 10 characters.
fn hash_password(password: &str) -> Result<String> {
    if password.chars().count() < 10 {
        return Err(AccountError::Invalid("the password must have at least 10 characters".into()));
    }
    let salt = SaltString::generate(&mut OsRng);
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| AccountError::Invalid(format!("cannot hash the password: {e}")))?
        .to_string())
}

/// Gives a user a new password.
pub async fn set_password(db: &impl ConnectionTrait, user_id: Uuid, password: &str) -> Result<user::Model> {
    let found = user::Entity::find_by_id(user_id).one(db).await?.ok_or(AccountError::NotFound("user"))?;
    let mut m: user::ActiveModel = found.into();
    m.password_hash = Set(hash_password(password)?);
    m.updated_at = Set(now());
    Ok(m.update(db).await?)
}

/// Password hashes a server's sign-ins run at once. Each argon2id check holds 19 MiB while it
/// runs: a hundred sign-ins sent at once took the server from 75 MB to almost 2 GB; with two at
/// once, the others wait their turn holding only their request.
pub const PASSWORD_HASHES_AT_ONCE: usize = 2;

/// The user with this email and password, if both match. Hashing runs off the async threads, and
/// an unknown email costs as much as a wrong password (no timing tells them apart).
pub async fn verify_user(db: &impl ConnectionTrait, email: &str, password: &str) -> Result<Option<user::Model>> {
    use argon2::{PasswordHash, PasswordVerifier};
    let email = email.trim().to_lowercase();
    let found = user::Entity::find().filter(user::Column::Email.eq(email)).one(db).await?;
    // A hash of a password nobody has, checked when the email is unknown.
    const DECOY: &str =
        "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$W0x0B2hF9m2ZbqN7t5nq5Jq1k0Yl3oTgN0mJcYp2c2s";
    let hash = found.as_ref().map_or_else(|| DECOY.to_string(), |u| u.password_hash.clone());
    let password = password.to_string();
    let ok = tokio::task::spawn_blocking(move || {
        PasswordHash::new(&hash).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
    })
    .await
    .unwrap_or(false);
    Ok(found.filter(|_| ok))
}

/// The facility a new member goes to when none is given: the gym's oldest.
pub async fn first_facility(
    db: &impl ConnectionTrait,
    gym_id: GymId,
) -> std::result::Result<Option<facility::Model>, sea_orm::DbErr> {
    facility::Entity::find()
        .filter(facility::Column::GymId.eq(gym_id))
        .filter(facility::Column::OpenId.is_not_null())
        .order_by_asc(facility::Column::CreatedAt)
        .order_by_asc(facility::Column::Id)
        .one(db)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_labels_match_the_settings_area() {
        let now = Utc::now();
        let mut k = api_key::Model {
            id: Uuid::nil(),
            gym_id: GymId(Uuid::nil()),
            name: "n".into(),
            environment: Environment::Live,
            fingerprint: String::new(),
            prefix: String::new(),
            created_at: now,
            last_used_at: None,
            expires_at: None,
            revoked_at: None,
            replaced_by_id: None,
            checksummed: true,
        };
        assert_eq!(KeyStatus::of(&k, now).label(now), "Active");
        k.expires_at = Some(now + chrono::Duration::hours(23) + chrono::Duration::minutes(59));
        assert_eq!(KeyStatus::of(&k, now).label(now), "Retires in 23 h");
        assert!(!KeyStatus::of(&k, now).can_roll());
        k.expires_at = Some(now + chrono::Duration::seconds(61));
        assert_eq!(KeyStatus::of(&k, now).label(now), "Retires in 2 min");
        k.expires_at = Some(now);
        assert_eq!(KeyStatus::of(&k, now).label(now), "Expired");
        k.revoked_at = Some(now);
        assert_eq!(KeyStatus::of(&k, now).label(now), "Revoked");
    }
}
