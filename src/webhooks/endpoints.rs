//! Endpoints, managed by gym users (the settings area) and operators (the CLI).

use entity::ids::GymId;
use entity::{webhook_delivery, webhook_endpoint};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};
use serde_json::json;
use uuid::Uuid;

use crate::{
    accounts::{self, AccountError, Actor, Permission},
    db::Writes,
    records::{new_id, now},
};

use super::{
    EventType, SECRET_OVERLAP,
    outbox::{NewEvent, queue, write_event},
    signing::new_secret,
    urls::check_url,
};

/// A new endpoint and its secret, shown once.
#[derive(Debug)]
pub struct NewEndpoint {
    pub model: webhook_endpoint::Model,
    pub secret: String,
}

/// The gym whose events an endpoint of `gym_id` receives: the gym, or its sandbox.
async fn target_gym(db: &impl ConnectionTrait, actor: &Actor, gym_id: GymId, sandbox: bool) -> accounts::Result<GymId> {
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
    gym_id: GymId,
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
    gym_id: GymId,
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

/// A `ping` event's `data`.
pub fn ping_data() -> serde_json::Value {
    json!({"message": "This is a test event from gymapi."})
}

/// Queues a `ping` to one endpoint; returns the delivery id.
pub async fn ping(db: &DatabaseConnection, actor: &Actor, id: Uuid) -> accounts::Result<Uuid> {
    let e = find_endpoint(db, actor, id).await?;
    let txn = crate::db::begin_writing(db).await?;
    let data = ping_data();
    let mut writes = Writes::new();
    let backend = txn.get_database_backend();
    let written = write_event(&mut writes, backend, NewEvent { gym_id: e.gym_id, kind: EventType::Ping, data });
    let ids = queue(&mut writes, backend, &written, std::iter::once(e.id));
    writes.run(&txn).await?;
    txn.commit().await?;
    ids.into_iter().next().ok_or(AccountError::NotFound("delivery"))
}
