//! How a key becomes the tenant a request acts on: from the key cache, or in one query shared by
//! the requests that miss it together; what a refused key answers. The key as text is `key.rs`.

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::states::SubscriptionStatus;
use sea_orm::{ConnectionTrait, DatabaseConnection, FromQueryResult, Statement};
use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};
use uuid::Uuid;

use prometheus_client::metrics::{counter::Counter, family::Family};

use crate::{
    context::{Environment, Tenant},
    errors::ApiError,
    limits::{
        Admission, Attempt, Backoff, Decision, GRANT_TTL, IdempotencyAsk, IdempotencyState, KeyRefusal, Quota,
        REFUSAL_TTL, Store,
    },
    logs::Repeated,
    metrics::OutcomeLabel,
    records,
};

pub use key::{
    DISPLAY_RANDOM_LEN, KEY_CHECKSUM_LEN, KEY_RANDOM_LEN, KeyShape, LIVE_PREFIX, TEST_PREFIX, display_prefix,
    env_prefix, fingerprint, generate_key, key_from_headers, parse_key,
};
pub use legacy::LegacyKeys;

mod key;
mod legacy;

#[derive(Debug, FromQueryResult)]
struct KeyRow {
    key_id: Uuid,
    gym_id: GymId,
    environment: Environment,
    expires_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
    gym_parent_id: Option<GymId>,
    api_access: bool,
    device_access: bool,
    subscription_status: SubscriptionStatus,
    grace_ends_at: Option<DateTime<Utc>>,
    timezone: String,
    sandbox_id: Option<GymId>,
    sandbox_timezone: Option<String>,
}

/// Whether a subscription in this state blocks requests (402): unpaid, or past due beyond the end of
/// the grace period.
pub fn subscription_blocks(
    status: SubscriptionStatus,
    grace_ends_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    match status {
        SubscriptionStatus::Active => false,
        SubscriptionStatus::PastDue => grace_ends_at.is_some_and(|end| end <= now),
        SubscriptionStatus::Unpaid => grace_ends_at.is_none_or(|end| end <= now),
    }
}

/// What the gym's plan includes: the integration API, the device features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Licence {
    pub api: bool,
    pub devices: bool,
}

/// A resolved key as the key cache keeps it: the tenant, the gym's licence, and until when that
/// answer holds (the key's retirement or the end of a grace period, whichever comes first).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Grant {
    tenant: Tenant,
    licence: Licence,
    valid_until: Option<DateTime<Utc>>,
    /// The key was rolled and works on through its grace period (grants cached before this field
    /// existed read as not retiring; a roll drops the key's grant anyway).
    #[serde(default)]
    retiring: bool,
}

/// A request that passed the key and subscription checks: its tenant, the licence the gate checks
/// next (403), and the verdict of the rate limit (429).
#[derive(Clone, Debug)]
pub struct Admitted {
    pub tenant: Tenant,
    pub licence: Licence,
    pub decision: Decision,
    /// The key was rolled: integrations keep it through the grace period, devices do not.
    pub retiring: bool,
    /// The keyed write's first step, when one was asked for and the store took it.
    pub idempotency: Option<IdempotencyState>,
}

impl From<(Grant, Decision, Option<IdempotencyState>)> for Admitted {
    fn from((grant, decision, idempotency): (Grant, Decision, Option<IdempotencyState>)) -> Self {
        Self { tenant: grant.tenant, licence: grant.licence, decision, retiring: grant.retiring, idempotency }
    }
}

/// Who presents a key: the key, if any, and the client's address, if known.
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    pub key: Option<&'a str>,
    pub address: Option<std::net::IpAddr>,
}

/// Lookups of keys in no cache that found no key, per client address: 20 free in ten minutes, then
/// the next lookup from the address after a second, each after twice as long as the one before,
/// at most a minute apart. A flood of made-up keys that pass the checksum costs a few lookups per
/// address, not one each; keys that exist are never counted, however many requests bring them.
pub const UNKNOWN_KEYS: Backoff = Backoff {
    free: 20,
    base: std::time::Duration::from_secs(1),
    max: std::time::Duration::from_secs(60),
    window: std::time::Duration::from_secs(600),
};

/// The gate's first checks, in the documented order (openapi.yaml): the key (401), the
/// subscription (402), then the rate limit in the request's `quota` (the `Decision`); the plan's
/// licence (403) is the gate's to check, from [`Admitted::licence`]. A key in the key cache costs
/// one store round trip and no database query; otherwise the key is resolved in one query and
/// cached, its request counted in the same store round trip, as long as the caller's address has
/// not sent too many unknown keys ([`UNKNOWN_KEYS`]; 429 then). A store that cannot be reached
/// fails open: keys come from the database and requests are allowed.
pub async fn admit(
    db: &DatabaseConnection,
    store: &dyn Store,
    resolutions: &Resolutions,
    caller: Caller<'_>,
    quota: Quota,
    ask: Option<IdempotencyAsk<'_>>,
    now: DateTime<Utc>,
) -> Result<Admitted, ApiError> {
    let key = caller.key.ok_or(ApiError::Unauthorized)?;
    let (env, shape) = parse_key(key).ok_or(ApiError::Unauthorized)?;
    let fp = fingerprint(key);
    if shape == KeyShape::Legacy && !resolutions.legacy.may_exist(db, &fp).await {
        return Err(ApiError::Unauthorized);
    }
    let counted = match store.admit(&fp, quota, ask).await {
        Ok(Admission::Granted { grant, decision, idempotency }) => match serde_json::from_str::<Grant>(&grant) {
            Ok(g) if g.valid_until.is_none_or(|t| t > now) => return Ok((g, decision, idempotency).into()),
            // Past its time on this instance's clock, or unreadable: resolve it again.
            _ => Some((decision, idempotency)),
        },
        Ok(Admission::Unknown) => {
            unknown_keys(store, caller.address, Attempt::Check).await?;
            None
        }
        Ok(Admission::Refused(refusal)) => return Err(refused(refusal)),
        Err(e) => {
            static UNAVAILABLE: Repeated = Repeated::new();
            if let Some(times) = UNAVAILABLE.due() {
                tracing::warn!(error = %e, store = store.name(), times, "key cache and limiter unavailable; requests allowed");
            }
            Some((Decision::fail_open(quota.policy), None))
        }
    };
    let resolved = resolutions
        .once(&fp, || {
            let (db, fingerprint) = (db.clone(), fp.clone());
            async move { resolve(&db, env, &fingerprint, now).await }
        })
        .await;
    if counted.is_none() && matches!(resolved, Err(ApiError::Unauthorized)) {
        // One of the address's unknown keys (its own answer stays the 401).
        unknown_keys(store, caller.address, Attempt::Begin).await.ok();
    }
    let grant = match resolved {
        Ok(grant) => grant,
        Err(e) => {
            let refusal = match e {
                ApiError::Unauthorized => Some(KeyRefusal::Unknown),
                ApiError::PaymentRequired => Some(KeyRefusal::PaymentRequired),
                _ => None,
            };
            if let Some(refusal) = refusal
                && let Err(e) = store.remember_refusal(&fp, refusal, REFUSAL_TTL).await
            {
                tracing::debug!(error = %e, "a refused key could not be remembered");
            }
            return Err(e);
        }
    };
    if let Some((decision, idempotency)) = counted {
        return Ok((grant, decision, idempotency).into());
    }
    let ttl = match grant.valid_until {
        Some(t) => (t - now).to_std().unwrap_or_default().min(GRANT_TTL),
        None => GRANT_TTL,
    };
    let cached = serde_json::to_string(&grant).ok().filter(|_| ttl >= std::time::Duration::from_millis(1));
    let grant_ttl = cached.as_deref().map(|g| (g, ttl));
    let (decision, idempotency) = match store.admit_resolved(&fp, grant_ttl, quota, ask).await {
        Ok(counted) => counted,
        Err(e) => {
            static UNAVAILABLE: Repeated = Repeated::new();
            if let Some(times) = UNAVAILABLE.due() {
                tracing::warn!(error = %e, store = store.name(), times, "rate limiter unavailable; requests allowed");
            }
            (Decision::fail_open(quota.policy), None)
        }
    };
    Ok((grant, decision, idempotency).into())
}

/// Asks whether the client at `address` may have a key in no cache looked up (`Check`), or counts
/// a lookup that found none (`Begin`); 429 when the address must wait before its next one. A store
/// that cannot be reached lets the lookup go ahead.
async fn unknown_keys(store: &dyn Store, address: Option<std::net::IpAddr>, attempt: Attempt) -> Result<(), ApiError> {
    let Some(address) = address else { return Ok(()) };
    match store.attempts(&format!("unknown-key:{address}"), attempt, UNKNOWN_KEYS).await {
        Ok(wait) if !wait.is_zero() => {
            let retry_after_secs = u64::try_from(wait.as_millis().div_ceil(1000)).unwrap_or(u64::MAX);
            Err(ApiError::RateLimited { retry_after_secs })
        }
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::debug!(error = %e, "unknown keys could not be counted");
            Ok(())
        }
    }
}

fn refused(refusal: KeyRefusal) -> ApiError {
    match refusal {
        KeyRefusal::Unknown => ApiError::Unauthorized,
        KeyRefusal::PaymentRequired => ApiError::PaymentRequired,
    }
}

/// Keys being resolved from the database, one query per key at a time: requests that arrive
/// together with a key the key cache does not hold (a cold start, a grant just expired, on the
/// embedded default every second) share the answer of the one query
/// under way instead of each sending its own. The answer is as fresh as that query.
///
/// Each query runs in a task of its own, not in the requests that wait for it: a query whose
/// waiters all went away (clients hung up, deadlines passed) still runs to its end and takes itself
/// off the list. Left unpolled while queued for a pooled connection, it would hold the head of the
/// pool's first-come first-served queue, and every query after it would time out, for good.
#[derive(Default)]
pub struct Resolutions {
    running: Arc<Mutex<HashMap<String, Running>>>,
    /// Tells one resolution of a key from the next, so a finished one removes only itself.
    started: AtomicU64,
    /// Lookups sent to the database, by what they found (`GET /metrics`).
    lookups: Family<OutcomeLabel, Counter>,
    /// The keys issued before keys carried a checksum: a key of their shape not among them is
    /// never looked up.
    legacy: LegacyKeys,
}

/// A resolution under way: its number and the answer its waiters share.
struct Running {
    number: u64,
    answer: SharedResolution,
}

type SharedResolution = futures_util::future::Shared<futures_util::future::BoxFuture<'static, Result<Grant, Refusal>>>;

/// What a shared resolution can answer besides a grant (errors are not `Clone`).
#[derive(Clone, Debug)]
enum Refusal {
    Unauthorized,
    PaymentRequired,
    Forbidden(String),
    Failed(String),
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Unauthorized => Self::Unauthorized,
            ApiError::PaymentRequired => Self::PaymentRequired,
            ApiError::Forbidden(m) => Self::Forbidden(m),
            other => Self::Failed(format!("{other:#}")),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Unauthorized => Self::Unauthorized,
            Refusal::PaymentRequired => Self::PaymentRequired,
            Refusal::Forbidden(m) => Self::Forbidden(m),
            Refusal::Failed(m) => Self::Internal(anyhow::anyhow!("resolving an API key: {m}")),
        }
    }
}

impl Resolutions {
    /// Counting its lookups in `lookups`.
    pub fn counted(lookups: Family<OutcomeLabel, Counter>) -> Self {
        Self { lookups, ..Self::default() }
    }

    /// The answer of the resolution under way for the key with this fingerprint, or of the one
    /// `resolution` starts when there is none.
    async fn once<F>(&self, fingerprint: &str, resolution: impl FnOnce() -> F) -> Result<Grant, ApiError>
    where
        F: std::future::Future<Output = Result<Grant, ApiError>> + Send + 'static,
    {
        let answer = {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            match running.get(fingerprint) {
                Some(under_way) => under_way.answer.clone(),
                None => {
                    let number = self.started.fetch_add(1, Ordering::Relaxed);
                    let answer = self.start(fingerprint, number, resolution());
                    running.insert(fingerprint.to_string(), Running { number, answer: answer.clone() });
                    answer
                }
            }
        };
        answer.await.map_err(ApiError::from)
    }

    /// Spawns resolution `number` of a key; the caller lists it while still holding the list's lock,
    /// so the task, which takes that lock to remove itself, always finds itself listed.
    fn start<F>(&self, fingerprint: &str, number: u64, resolution: F) -> SharedResolution
    where
        F: std::future::Future<Output = Result<Grant, ApiError>> + Send + 'static,
    {
        use futures_util::FutureExt as _;
        let (running, lookups, fingerprint) = (self.running.clone(), self.lookups.clone(), fingerprint.to_string());
        let task = tokio::spawn(async move {
            let answer = resolution.await;
            let outcome = match &answer {
                Ok(_) => "found",
                Err(ApiError::Unauthorized) => "unauthorized",
                Err(ApiError::PaymentRequired) => "payment_required",
                Err(_) => "failed",
            };
            lookups.get_or_create(&OutcomeLabel { outcome }).inc();
            // Off the list before anyone sees the answer: the next miss asks the database again.
            let mut running = running.lock().unwrap_or_else(|e| e.into_inner());
            if running.get(&fingerprint).is_some_and(|r| r.number == number) {
                running.remove(&fingerprint);
            }
            answer.map_err(Refusal::from)
        });
        task.map(|joined| joined.unwrap_or_else(|e| Err(Refusal::Failed(format!("the lookup's task ended: {e}")))))
            .boxed()
            .shared()
    }
}

/// Drops the cached grants of these keys (by fingerprint). The database change is already committed
/// when this runs; if the store cannot be reached, the grants expire within `GRANT_TTL`.
pub async fn forget(store: &dyn Store, fingerprints: &[String]) {
    if let Err(e) = store.forget_grants(fingerprints).await {
        tracing::warn!(
            error = %e,
            "the key cache could not be cleared; the change takes effect within {} s",
            GRANT_TTL.as_secs()
        );
    }
}

/// Resolves a well-formed key of environment `env`, by its fingerprint, to its tenant in one indexed
/// query (the key, its gym and the gym's sandbox), then applies the documented checks in order:
/// 401, 402. The gym's licence (its sandbox follows it) goes with the answer.
async fn resolve(
    db: &DatabaseConnection,
    env: Environment,
    fingerprint: &str,
    now: DateTime<Utc>,
) -> Result<Grant, ApiError> {
    let backend = db.get_database_backend();
    let sql = crate::db::placeholders(
        backend,
        "SELECT k.id AS key_id, k.gym_id, k.environment, k.expires_at, k.revoked_at, \
         g.parent_gym_id AS gym_parent_id, g.api_access, g.device_access, g.subscription_status, g.grace_ends_at, \
         g.timezone, \
         s.id AS sandbox_id, s.timezone AS sandbox_timezone \
         FROM api_keys k JOIN gyms g ON g.id = k.gym_id LEFT JOIN gyms s ON s.parent_gym_id = g.id \
         WHERE k.fingerprint = ?",
    );
    let row = KeyRow::find_by_statement(Statement::from_sql_and_values(backend, sql, [fingerprint.into()]))
        .one(db)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let stored_env = row.environment;
    let retired = row.expires_at.is_some_and(|t| t <= now);
    let revoked = row.revoked_at.is_some_and(|t| t <= now);
    // A key belongs to a production gym; a key whose gym is a sandbox never works.
    if stored_env != env || retired || revoked || row.gym_parent_id.is_some() {
        return Err(ApiError::Unauthorized);
    }
    let (gym_id, timezone) = match env {
        Environment::Live => (row.gym_id, row.timezone),
        Environment::Test => match row.sandbox_id {
            Some(id) => (id, row.sandbox_timezone.unwrap_or(row.timezone)),
            None => return Err(ApiError::Unauthorized),
        },
    };
    // Every writer of a gym's time zone checks it (`records::timezone`); one that is not a zone
    // was written around them, and is said in the log rather than taken for UTC unseen.
    let timezone = records::timezone(&timezone).unwrap_or_else(|e| {
        tracing::error!(gym_id = %gym_id, error = %e, "the gym's time zone is none: its times are in UTC");
        chrono_tz::UTC
    });
    if subscription_blocks(row.subscription_status, row.grace_ends_at, now) {
        return Err(ApiError::PaymentRequired);
    }
    // A statement of its own, naming the gym: the key and its gyms are reference tables, the
    // facilities a tenant table, which a distributed database keeps on the gym's node.
    let first_facility_id = first_facility(db, gym_id).await?;
    // The answer holds until the key retires or a grace period ends, whichever is first.
    let grace_end = if row.subscription_status == SubscriptionStatus::Active { None } else { row.grace_ends_at };
    let valid_until = [row.expires_at, grace_end].into_iter().flatten().min();
    Ok(Grant {
        tenant: Tenant {
            gym_id,
            owner_gym_id: row.gym_id,
            key_id: row.key_id,
            environment: env,
            timezone,
            first_facility_id,
        },
        licence: Licence { api: row.api_access, devices: row.device_access },
        valid_until,
        retiring: row.expires_at.is_some(),
    })
}

/// The facility a new member or sale goes to when none is given: the gym's oldest open one.
async fn first_facility(db: &DatabaseConnection, gym_id: GymId) -> Result<Option<Uuid>, sea_orm::DbErr> {
    use entity::facility::{Column, Entity};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
    Entity::find()
        .select_only()
        .column(Column::Id)
        .filter(Column::GymId.eq(gym_id))
        .filter(Column::OpenId.is_not_null())
        .order_by_asc(Column::CreatedAt)
        .order_by_asc(Column::Id)
        .into_tuple()
        .one(db)
        .await
}

/// Records that a key was used, at most once a minute per key: an in-process gate first, then a
/// conditional update, so that many instances together still write at most about once a minute.
/// Runs in a spawned task, never on the request's path.
#[derive(Default)]
pub struct LastUsed {
    seen: std::sync::Mutex<std::collections::HashMap<Uuid, std::time::Instant>>,
}

impl LastUsed {
    pub fn touch(&self, db: &DatabaseConnection, key_id: Uuid) {
        let now = std::time::Instant::now();
        {
            let Ok(mut seen) = self.seen.lock() else {
                return;
            };
            if seen.get(&key_id).is_some_and(|t| now.duration_since(*t).as_secs() < 60) {
                return;
            }
            seen.insert(key_id, now);
            if seen.len() > 100_000 {
                seen.retain(|_, t| now.duration_since(*t).as_secs() < 60);
            }
        }
        let db = db.clone();
        tokio::spawn(async move {
            let backend = db.get_database_backend();
            let at = Utc::now();
            let cutoff = at - chrono::Duration::seconds(60);
            let sql = crate::db::placeholders(
                backend,
                "UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
            );
            let stmt = Statement::from_sql_and_values(backend, sql, [at.into(), key_id.into(), cutoff.into()]);
            if let Err(e) = db.execute(stmt).await {
                tracing::warn!(error = %e, "could not record last_used_at");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that miss the key cache together share one database query for their key; once
    /// answered, the next miss asks again.
    #[tokio::test]
    async fn concurrent_misses_of_a_key_share_one_resolution() {
        use std::sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        };
        let resolutions = Arc::new(Resolutions::default());
        let queries = Arc::new(AtomicUsize::new(0));
        let grant = Grant {
            tenant: Tenant {
                gym_id: GymId::generate(),
                owner_gym_id: GymId::generate(),
                key_id: Uuid::now_v7(),
                environment: Environment::Live,
                timezone: chrono_tz::UTC,
                first_facility_id: None,
            },
            licence: Licence { api: true, devices: true },
            valid_until: None,
            retiring: false,
        };
        let ask = |fingerprint: &'static str| {
            let (resolutions, queries, grant) = (resolutions.clone(), queries.clone(), grant.clone());
            tokio::spawn(async move {
                let query = async move {
                    queries.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    Ok(grant)
                };
                resolutions.once(fingerprint, || query).await
            })
        };
        let waiting: Vec<_> = (0..32).map(|_| ask("a")).collect();
        let other = ask("b");
        for w in waiting {
            assert_eq!(w.await.unwrap().unwrap().tenant, grant.tenant);
        }
        other.await.unwrap().unwrap();
        assert_eq!(queries.load(Ordering::SeqCst), 2, "one query for each of the two keys");
        ask("a").await.unwrap().unwrap();
        assert_eq!(queries.load(Ordering::SeqCst), 3, "a later miss asks the database again");
        assert!(resolutions.running.lock().unwrap().is_empty());
    }

    /// A lookup whose every waiter went away (a client hung up, a deadline passed) still runs to its
    /// end. Left parked while queued for one of the pool's connections, it would hold the head of
    /// the pool's first-come first-served queue, and every later query would wait behind it until
    /// its own timeout, for good.
    #[tokio::test]
    async fn a_lookup_left_by_its_waiters_does_not_hold_the_pool() {
        use sea_orm::{ConnectionTrait, DatabaseBackend, Statement};
        let db = crate::db::connect("sqlite::memory:").await.unwrap();
        let select = || Statement::from_string(DatabaseBackend::Sqlite, "SELECT 1");
        // The pool's one connection is busy, so the lookup queues for it.
        let busy = db.get_sqlite_connection_pool().acquire().await.unwrap();
        let resolutions = Resolutions::default();
        let lookup = resolutions.once("k", || {
            let db = db.clone();
            async move {
                db.execute(select()).await.map_err(|e| ApiError::Internal(e.into()))?;
                Err(ApiError::Unauthorized)
            }
        });
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), lookup).await;
        assert!(waited.is_err(), "the lookup waits for the busy connection");
        drop(busy);
        let later = tokio::time::timeout(std::time::Duration::from_secs(3), db.execute(select())).await;
        assert!(matches!(later, Ok(Ok(_))), "a later query gets the connection: {later:?}");
    }

    /// A refusal is shared like a grant, with its kind.
    #[tokio::test]
    async fn a_shared_refusal_keeps_its_kind() {
        let resolutions = Resolutions::default();
        let refused = resolutions.once("k", || async { Err(ApiError::Forbidden("no API".into())) }).await;
        assert!(matches!(refused, Err(ApiError::Forbidden(m)) if m == "no API"));
        let unknown = resolutions.once("k", || async { Err(ApiError::Unauthorized) }).await;
        assert!(matches!(unknown, Err(ApiError::Unauthorized)));
    }

    #[test]
    fn grace_period_decides_payment_required() {
        let now = Utc::now();
        let past = now - chrono::Duration::hours(1);
        let future = now + chrono::Duration::hours(1);
        assert!(!subscription_blocks(SubscriptionStatus::Active, Some(past), now));
        assert!(!subscription_blocks(SubscriptionStatus::PastDue, None, now));
        assert!(!subscription_blocks(SubscriptionStatus::PastDue, Some(future), now));
        assert!(subscription_blocks(SubscriptionStatus::PastDue, Some(past), now));
        assert!(subscription_blocks(SubscriptionStatus::Unpaid, None, now));
        assert!(!subscription_blocks(SubscriptionStatus::Unpaid, Some(future), now));
    }
}
