//! Rate limits (and, later, idempotent replays) kept in a `Store`: Redis in production, shared by
//! every instance; in process in the embedded default.

mod memory;
mod redis_store;

use std::time::Duration;

pub use memory::MemoryStore;
pub use redis_store::RedisStore;

/// A rate limit as a value, so that other endpoint families can have their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RatePolicy {
    /// Requests allowed in any rolling `window`.
    pub limit: u32,
    pub window: Duration,
}

impl RatePolicy {
    pub fn per_minute(limit: u32) -> Self {
        Self { limit, window: Duration::from_secs(60) }
    }
}

/// The verdict for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
    /// Requests left in the window after this one.
    pub remaining: u32,
    /// When refused: whole seconds until a request is allowed again (at least 1).
    pub retry_after_secs: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the store did not answer within {0:?}")]
    Timeout(Duration),
    #[error("store error: {0}")]
    Backend(String),
}

/// Where limits live.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Counts one request of `bucket` against `policy` (sliding log: exact over any rolling window;
    /// refused requests are not counted).
    async fn hit(&self, bucket: &str, policy: RatePolicy) -> Result<Decision, StoreError>;

    /// Whether the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    fn name(&self) -> &'static str;
}

/// Whole seconds until `wait_ms` has passed, at least 1.
pub(crate) fn retry_after_secs(wait_ms: i64) -> u64 {
    (wait_ms.max(1) as u64).div_ceil(1000).max(1)
}
