//! What the API's edge keeps between requests, in a `Store`: Redis in production, shared by every
//! instance; in process in the embedded default (`memory.rs`, `redis_store.rs`). Each concern has
//! its own file: rate limits (`rate.rs`), the key cache (the grants and refusals of this file),
//! `Idempotency-Key`s (`idempotency.rs`, their records in the database in `records.rs`, replays
//! kept in memory in `replays.rs`), sign-in backoff (`backoff.rs`).

mod backoff;
mod idempotency;
mod memory;
mod rate;
pub mod records;
mod redis_store;
mod replays;

use std::time::Duration;

pub use backoff::{Attempt, Backoff};
pub(crate) use idempotency::IdempotencyRecord;
pub use idempotency::{IdempotencyAsk, IdempotencyState, StoredResponse};
pub use memory::{LOCAL_GRANT_TTL, MemoryStore};
pub use rate::{Budget, Decision, Quota, RatePolicy};
pub use redis_store::RedisStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the store did not answer within {0:?}")]
    Timeout(Duration),
    #[error("store error: {0}")]
    Backend(String),
    #[error("the store is skipped for a moment after failing (its breaker is open)")]
    Skipped,
}

/// What the store knows of an API key, by its fingerprint, when a request arrives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The key's grant (the tenant it resolved to, as JSON) was cached, and the request has been
    /// counted against the key's limit in the same round trip; with its `Idempotency-Key` begun
    /// when one was asked for and the request is allowed.
    Granted { grant: String, decision: Decision, idempotency: Option<IdempotencyState> },
    /// Nothing cached: the key must be resolved, and then counted with `admit_resolved`.
    Unknown,
    /// The key was refused a moment ago (`remember_refusal`) and is refused again, uncounted.
    Refused(KeyRefusal),
}

/// Why a key was refused, as the key cache remembers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRefusal {
    /// No such key, or one revoked, retired or of the wrong kind (401).
    Unknown,
    /// Its gym's subscription blocks it (402).
    PaymentRequired,
}

impl KeyRefusal {
    /// As kept in Redis: a grant never starts with `!`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "!unauthorized",
            Self::PaymentRequired => "!payment_required",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "!unauthorized" => Some(Self::Unknown),
            "!payment_required" => Some(Self::PaymentRequired),
            _ => None,
        }
    }
}

/// How long a resolved key may be answered from the key cache (Redis) at most. Revoking or rolling
/// a key, and changing its gym, drop the key's grant at once (`forget_grants`); this bounds only
/// what a change made behind gymapi's back (SQL by hand), or one made while Redis could not be
/// reached, leaves cached.
pub const GRANT_TTL: Duration = Duration::from_secs(60);

/// How long a refused key is answered from the key cache without a database query: a stream of
/// unknown keys, or the keys of a gym whose subscription blocks it, cost one query per key per
/// this time, not one per request. Changes made through gymapi drop the refusal at once
/// (`forget_grants`); this bounds only one made behind its back (the CLI, on the embedded default).
pub const REFUSAL_TTL: Duration = Duration::from_secs(30);

/// Where limits and idempotency records live.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Counts one request of `bucket` against `policy` (sliding log: exact over any rolling window;
    /// refused requests are not counted).
    async fn hit(&self, bucket: &str, policy: RatePolicy) -> Result<Decision, StoreError>;

    /// The key cache, the limiter and a keyed write's first step in one round trip: the grant
    /// cached for the key with this fingerprint and, when there is one, the request counted in its
    /// `quota`, and `ask` begun if the request is allowed. Nothing is counted or begun for an
    /// unknown key.
    async fn admit(
        &self,
        fingerprint: &str,
        quota: Quota,
        ask: Option<IdempotencyAsk<'_>>,
    ) -> Result<Admission, StoreError>;

    /// Counts a request of a key just resolved from the database in its `quota`, caching its
    /// grant for `ttl` when one is given, and begins `ask` if the request is allowed (in the same
    /// round trip).
    async fn admit_resolved(
        &self,
        fingerprint: &str,
        grant: Option<(&str, Duration)>,
        quota: Quota,
        ask: Option<IdempotencyAsk<'_>>,
    ) -> Result<(Decision, Option<IdempotencyState>), StoreError>;

    /// Failed attempts of `bucket` under `policy` (the settings area's sign-in): `attempt` done,
    /// the wait due before the next attempt is allowed.
    async fn attempts(&self, bucket: &str, attempt: Attempt, policy: Backoff) -> Result<Duration, StoreError>;

    /// Drops the cached grants of these keys: after a revoke, a roll, or a change to their gym.
    async fn forget_grants(&self, fingerprints: &[String]) -> Result<(), StoreError>;

    /// Remembers for `ttl` that a key was refused, so that `admit` refuses it again without a
    /// database query (never over a grant or a forgotten key's tombstone).
    async fn remember_refusal(&self, fingerprint: &str, refusal: KeyRefusal, ttl: Duration) -> Result<(), StoreError>;

    /// Looks up `key`, reserving it for this request (for `lock`) when it is new. Atomic: of many
    /// concurrent requests with one key, exactly one is `Started`.
    async fn idempotency_begin(
        &self,
        key: &str,
        fingerprint: &str,
        lock: Duration,
    ) -> Result<IdempotencyState, StoreError>;

    /// Keeps the response of a started request for `ttl`.
    async fn idempotency_complete(
        &self,
        key: &str,
        fingerprint: &str,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// Frees the key of a started request that must not be replayed (a 5xx), so the client may retry.
    async fn idempotency_abort(&self, key: &str) -> Result<(), StoreError>;

    /// The value kept under a list walk's `key` by [`Store::walk_keep`], if it is still kept.
    async fn walk_recall(&self, key: &str) -> Result<Option<String>, StoreError>;

    /// Keeps `value` under a list walk's `key` for `ttl` (the next page's position, see
    /// `pagination::Walks`).
    async fn walk_keep(&self, key: &str, value: &str, ttl: Duration) -> Result<(), StoreError>;

    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Whether calls go to the store (its breaker is closed), and how many times its breaker has
    /// opened (for `/metrics`). A store in process is always up.
    fn health(&self) -> (bool, u64) {
        (true, 0)
    }

    /// The breaker in front of the store's server, for others who call the same server (the
    /// long polls' wake-ups through Redis); none for a store in process.
    fn breaker(&self) -> Option<std::sync::Arc<crate::breaker::Breaker>> {
        None
    }

    fn name(&self) -> &'static str;
}

/// The store the configuration names: Redis when `REDIS_URL` is set (it must answer), else in
/// process.
pub async fn connect(config: &crate::config::Config) -> anyhow::Result<std::sync::Arc<dyn Store>> {
    Ok(match &config.redis_url {
        Some(url) => std::sync::Arc::new(
            RedisStore::connect(url, &config.redis_prefix, config.redis_timeout)
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to Redis ({}): {e}", crate::db::redact(url)))?,
        ),
        None => std::sync::Arc::new(MemoryStore::default()),
    })
}

/// Whole seconds until `wait_ms` has passed, at least 1.
pub(crate) fn retry_after_secs(wait_ms: i64) -> u64 {
    (wait_ms.max(1) as u64).div_ceil(1000).max(1)
}
