//! The in-process store of the embedded default: exact, but per process.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::Instant,
};

use super::{Decision, RatePolicy, Store, StoreError, retry_after_secs};

/// Sliding logs in a sharded map; each bucket keeps the instants of its counted requests.
pub struct MemoryStore {
    shards: Vec<Mutex<HashMap<String, VecDeque<Instant>>>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self { shards: (0..32).map(|_| Mutex::new(HashMap::new())).collect() }
    }
}

impl MemoryStore {
    fn shard(&self, bucket: &str) -> &Mutex<HashMap<String, VecDeque<Instant>>> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bucket.hash(&mut h);
        &self.shards[(h.finish() % self.shards.len() as u64) as usize]
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn hit(&self, bucket: &str, policy: RatePolicy) -> Result<Decision, StoreError> {
        let now = Instant::now();
        let mut map = self.shard(bucket).lock().map_err(|_| StoreError::Backend("poisoned lock".into()))?;
        // Forget idle buckets now and then so the map does not grow without bound.
        if map.len() > 10_000 {
            map.retain(|_, log| log.back().is_some_and(|t| now.duration_since(*t) < policy.window));
        }
        let log = map.entry(bucket.to_string()).or_default();
        while log.front().is_some_and(|t| now.duration_since(*t) >= policy.window) {
            log.pop_front();
        }
        let used = log.len() as u32;
        if used < policy.limit {
            log.push_back(now);
            Ok(Decision { allowed: true, limit: policy.limit, remaining: policy.limit - used - 1, retry_after_secs: 0 })
        } else {
            let oldest = log.front().copied().unwrap_or(now);
            let wait = policy.window.saturating_sub(now.duration_since(oldest));
            Ok(Decision {
                allowed: false,
                limit: policy.limit,
                remaining: 0,
                retry_after_secs: retry_after_secs(wait.as_millis() as i64),
            })
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}
