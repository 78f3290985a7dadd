//! The in-process store of the embedded default: exact, but per process.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::Instant,
};

use std::time::Duration;

use super::{
    Admission, Decision, IDEMPOTENCY_LOCK, IdempotencyRecord, IdempotencyState, RatePolicy, Store, StoreError,
    StoredResponse, retry_after_secs,
};

/// Sliding logs in a sharded map (each bucket keeps the times of its counted requests, in
/// microseconds since the store was made: 8 bytes each, where an `Instant` takes 16), and
/// idempotency records with their expiry.
pub struct MemoryStore {
    epoch: Instant,
    shards: Vec<Mutex<HashMap<String, VecDeque<u64>>>>,
    idempotency: Mutex<HashMap<String, (IdempotencyRecord, Instant)>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            shards: (0..32).map(|_| Mutex::new(HashMap::new())).collect(),
            idempotency: Mutex::new(HashMap::new()),
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Backend("poisoned lock".into())
}

impl MemoryStore {
    fn shard(&self, bucket: &str) -> &Mutex<HashMap<String, VecDeque<u64>>> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bucket.hash(&mut h);
        &self.shards[(h.finish() % self.shards.len() as u64) as usize]
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    /// Keeps no key cache: the embedded default's database is a local file, and the operators' CLI,
    /// another process, revokes keys in it, which a cache in this process would not hear of.
    async fn admit(&self, _fingerprint: &str, _policy: RatePolicy) -> Result<Admission, StoreError> {
        Ok(Admission::Unknown)
    }

    async fn admit_resolved(
        &self,
        fingerprint: &str,
        _grant: Option<(&str, Duration)>,
        policy: RatePolicy,
    ) -> Result<Decision, StoreError> {
        self.hit(fingerprint, policy).await
    }

    async fn forget_grants(&self, _fingerprints: &[String]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn hit(&self, bucket: &str, policy: RatePolicy) -> Result<Decision, StoreError> {
        let now = micros(self.epoch.elapsed());
        let window = micros(policy.window);
        let mut map = self.shard(bucket).lock().map_err(poisoned)?;
        // Forget idle buckets now and then so the map does not grow without bound.
        if map.len() > 10_000 {
            map.retain(|_, log| log.back().is_some_and(|t| now.saturating_sub(*t) < window));
        }
        let log = map.entry(bucket.to_string()).or_default();
        while log.front().is_some_and(|t| now.saturating_sub(*t) >= window) {
            log.pop_front();
        }
        // A burst (a raised limit) leaves a large log behind; give the memory back once it has
        // drained to a quarter.
        if log.capacity() > 1024 && log.len() < log.capacity() / 4 {
            log.shrink_to(log.len() * 2);
        }
        let used = u32::try_from(log.len()).unwrap_or(u32::MAX);
        if used < policy.limit {
            log.push_back(now);
            Ok(Decision { allowed: true, limit: policy.limit, remaining: policy.limit - used - 1, retry_after_secs: 0 })
        } else {
            let oldest = log.front().copied().unwrap_or(now);
            let wait = Duration::from_micros(window.saturating_sub(now.saturating_sub(oldest)));
            Ok(Decision {
                allowed: false,
                limit: policy.limit,
                remaining: 0,
                retry_after_secs: retry_after_secs(wait.as_millis() as i64),
            })
        }
    }

    async fn idempotency_begin(&self, key: &str, fingerprint: &str) -> Result<IdempotencyState, StoreError> {
        let now = Instant::now();
        let mut map = self.idempotency.lock().map_err(poisoned)?;
        if map.len() > 10_000 {
            map.retain(|_, (_, expires)| *expires > now);
        }
        match map.get(key).filter(|(_, expires)| *expires > now) {
            None => {
                let record = IdempotencyRecord { fingerprint: fingerprint.to_string(), response: None };
                map.insert(key.to_string(), (record, now + IDEMPOTENCY_LOCK));
                Ok(IdempotencyState::Started)
            }
            Some((record, _)) if record.fingerprint != fingerprint => Ok(IdempotencyState::Mismatch),
            Some((IdempotencyRecord { response: None, .. }, _)) => Ok(IdempotencyState::Running),
            Some((IdempotencyRecord { response: Some(r), .. }, _)) => Ok(IdempotencyState::Replay(r.clone())),
        }
    }

    async fn idempotency_complete(
        &self,
        key: &str,
        fingerprint: &str,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let record = IdempotencyRecord { fingerprint: fingerprint.to_string(), response: Some(response.clone()) };
        self.idempotency.lock().map_err(poisoned)?.insert(key.to_string(), (record, Instant::now() + ttl));
        Ok(())
    }

    async fn idempotency_abort(&self, key: &str) -> Result<(), StoreError> {
        self.idempotency.lock().map_err(poisoned)?.remove(key);
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drained_log_gives_its_memory_back_and_the_window_still_holds() {
        let store = MemoryStore::default();
        let policy = RatePolicy { limit: 100_000, window: Duration::from_millis(200) };
        for _ in 0..20_000 {
            assert!(store.hit("burst", policy).await.unwrap().allowed);
        }
        let capacity = |s: &MemoryStore| s.shard("burst").lock().unwrap().get("burst").unwrap().capacity();
        assert!(capacity(&store) >= 20_000);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let d = store.hit("burst", policy).await.unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, policy.limit - 1, "the burst left the window");
        assert!(capacity(&store) < 1_100, "capacity {}", capacity(&store));

        let tight = RatePolicy { limit: 2, window: Duration::from_secs(60) };
        assert!(store.hit("tight", tight).await.unwrap().allowed);
        assert!(store.hit("tight", tight).await.unwrap().allowed);
        let refused = store.hit("tight", tight).await.unwrap();
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs, 60);
    }
}
