//! The handlers of the device API, one file per tag of `openapi-devices.yaml`. Each implements the
//! trait `build.rs` generated for its tag (`openapi::device_api`); the gate checks the key, the plan's
//! device features and the device budget before them, and the domain is `crate::frontdesk`.

mod document;
mod doorbells;
mod doors;
mod orders;
mod printers;
mod registry;
mod rings;
mod terminals;

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{device, states::DeviceKind};
use sea_orm::EntityTrait;

use crate::{
    context::RequestContext,
    errors::ApiError,
    frontdesk::{devices, printer},
    openapi::device_api as doc,
    state::AppState,
};

/// Implements every handler trait of the generated device `Api`.
#[derive(Clone)]
pub struct DeviceHandlers {
    state: AppState,
}

impl DeviceHandlers {
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    fn db(&self) -> &crate::db::Db {
        &self.state.db
    }

    /// The device the path names, of `kind` when one is asked for (404 otherwise); the request
    /// counts as its heartbeat.
    async fn device(
        &self,
        ctx: &RequestContext,
        id: &str,
        kind: Option<DeviceKind>,
    ) -> Result<device::Model, ApiError> {
        // Boxed: the lookup's future is large and short-lived, and a long poll's future would
        // otherwise keep its room for the whole wait (see docs/performance.md).
        let d = Box::pin(devices::find(self.db(), ctx.tenant.gym_id, id, kind)).await?;
        self.state.heartbeats.seen(self.db().orm(), d.gym_id, d.id);
        Ok(d)
    }
}

/// The answer to a poll that may wait while its key or its gym holds all the waiting polls it may:
/// the others end within 25 s.
const POLLS_FULL: ApiError = ApiError::RateLimited { retry_after_secs: 5 };

/// What one look of a device's long poll found, and when to look again without a signal.
type Look<T> = (Vec<T>, Option<tokio::time::Instant>);

impl DeviceHandlers {
    /// A device's long poll on `topic` (`wake::long_poll_until`). One that may wait holds one of
    /// the key's and the gym's slots (`wake::PollSlots`), or is 429. It is woken also when the request's key
    /// is revoked or rolled (`wake::key_topic`): after every look but the first (the request's key
    /// was checked just before it), a key no longer in force ends the poll with 401. Whatever a look
    /// hands out is taken only while the key is in force (`db::KEY_IN_FORCE`).
    async fn poll<T, F, Fut>(
        &self,
        ctx: &RequestContext,
        topic: &str,
        wait: std::time::Duration,
        mut look: F,
    ) -> Result<Vec<T>, ApiError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Look<T>, ApiError>>,
    {
        let s = &self.state;
        let _slot = match wait.is_zero() {
            true => None,
            false => Some(s.polls.take(ctx.tenant.key_id, ctx.tenant.owner_gym_id).ok_or(POLLS_FULL)?),
        };
        let key = crate::wake::key_topic(ctx.tenant.key_id);
        let mut first = true;
        crate::wake::long_poll_until(&s.wakes, &s.shutdown, &[topic, &key], wait, || {
            let again = !std::mem::replace(&mut first, false);
            let looked = look();
            async move {
                let found = looked.await?;
                if again && !devices::key_in_force(self.db(), ctx.tenant.key_id).await? {
                    return Err(ApiError::Unauthorized);
                }
                Ok(found)
            }
        })
        .await
    }

    /// The gym's name and time zone, for receipts.
    async fn gym_label(&self, ctx: &RequestContext) -> Result<printer::GymLabel, ApiError> {
        let gym = entity::gym::Entity::find_by_id(ctx.tenant.gym_id).one(self.db()).await?;
        Ok(gym.map_or_else(
            || printer::GymLabel::unnamed(ctx.tenant.timezone.name()),
            |g| printer::GymLabel { name: g.name, timezone: g.timezone },
        ))
    }
}

/// A device as the API returns it, online or not at `at`.
fn record(d: device::Model, at: DateTime<Utc>) -> doc::Device {
    doc::Device {
        object: doc::DeviceObject::Device,
        online: devices::online(&d, at),
        id: d.id,
        kind: d.kind.into(),
        name: d.name,
        facility_id: d.facility_id,
        last_seen_at: d.last_seen_at.into(),
        created_at: d.created_at,
        updated_at: d.updated_at,
    }
}

/// A long poll's wait, in the 0 to 25 s the document allows (the gate has checked it).
fn wait(seconds: i64) -> std::time::Duration {
    std::time::Duration::from_secs(u64::try_from(seconds.clamp(0, 25)).unwrap_or(0))
}

/// The gym of a request, for the topics of its long polls.
fn gym(ctx: &RequestContext) -> GymId {
    ctx.tenant.gym_id
}
