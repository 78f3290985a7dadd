//! The in-process store of the embedded default: exact, but per process.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::Instant,
};

use std::time::Duration;

use super::{
    Admission, Attempt, Backoff, Budget, Decision, IdempotencyAsk, IdempotencyState, KeyRefusal, Quota, RatePolicy,
    Store, StoreError, StoredResponse,
    replays::{Completed, Replays, digest},
    retry_after_secs,
};

/// Sliding logs in a sharded map, and idempotency records with their expiry.
pub struct MemoryStore {
    epoch: Instant,
    shards: Vec<Mutex<HashMap<String, Log>>>,
    idempotency: Mutex<Replays>,
    /// Keys refused a moment ago, until when (see `REFUSAL_TTL`); at most `MAX_REFUSALS`.
    refusals: Mutex<HashMap<String, (KeyRefusal, Instant)>>,
    /// Failed attempts per bucket: how many, the last one; at most `MAX_REFUSALS` buckets.
    failures: Mutex<HashMap<String, (u32, Instant)>>,
    /// Keys resolved a moment ago, until when (at most [`LOCAL_GRANT_TTL`]), or forgotten a moment
    /// ago (`None`, a tombstone: a request that read the key before the change caches nothing over
    /// it); at most `MAX_REFUSALS`.
    grants: Mutex<HashMap<String, (Option<String>, Instant)>>,
    /// List walks' next positions, until when; at most `MAX_REFUSALS`.
    walks: Mutex<HashMap<String, (String, Instant)>>,
}

/// How long this process answers a key from what it resolved: a change made by another process
/// (the operators' CLI writing the same file) is seen within this time; one made through this
/// server clears the key's grant at once (`forget_grants`).
pub const LOCAL_GRANT_TTL: Duration = Duration::from_secs(1);

/// The most refused keys remembered at once: a stream of made-up keys costs this much memory at
/// most (about 16 MB), and past it the oldest are forgotten.
const MAX_REFUSALS: usize = 100_000;

/// A bucket's sliding log, to the millisecond (the resolution of the Redis store's log, whose
/// entry IDs are Redis's clock in milliseconds): each entry is a millisecond since the store was
/// made and how many requests were counted in it, so the log's memory follows the milliseconds with
/// traffic in the window, not the requests. At 20,000 requests/s under a raised limit that is
/// about 60,000 entries (1 MB) where one entry per request took 1.2 million (10 MB, 20 MB while
/// the log grew).
#[derive(Default)]
struct Log {
    stamps: VecDeque<(u64, u32)>,
    /// The sum of the counts in `stamps`.
    used: u64,
}

impl Log {
    /// Drops the milliseconds that have left the window ending at `now`.
    fn expire(&mut self, now: u64, window: u64) {
        while let Some(&(t, n)) = self.stamps.front() {
            if now.saturating_sub(t) < window {
                break;
            }
            self.stamps.pop_front();
            self.used -= u64::from(n);
        }
    }

    fn push(&mut self, now: u64) {
        match self.stamps.back_mut() {
            Some((t, n)) if *t == now && *n < u32::MAX => *n += 1,
            _ => self.stamps.push_back((now, 1)),
        }
        self.used += 1;
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            shards: (0..32).map(|_| Mutex::new(HashMap::new())).collect(),
            idempotency: Mutex::new(Replays::default()),
            refusals: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            grants: Mutex::new(HashMap::new()),
            walks: Mutex::new(HashMap::new()),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Backend("poisoned lock".into())
}

/// Keeps `entry` under `fingerprint` until the time it carries, in a map of at most
/// `MAX_REFUSALS` keys: past it the expired go, then a tenth of the map, those closest to expiring.
fn remember<T>(map: &mut HashMap<String, (T, Instant)>, fingerprint: &str, entry: (T, Instant)) {
    let now = Instant::now();
    if map.len() >= MAX_REFUSALS {
        map.retain(|_, (_, until)| *until > now);
    }
    if map.len() >= MAX_REFUSALS {
        let mut ends: Vec<Instant> = map.values().map(|(_, until)| *until).collect();
        let cut = MAX_REFUSALS / 10;
        ends.select_nth_unstable(cut);
        let bar = ends[cut];
        map.retain(|_, (_, until)| *until > bar);
    }
    map.insert(fingerprint.to_string(), entry);
}

impl MemoryStore {
    /// Counts a request of an admitted key in its budget and, if it is allowed, begins its keyed
    /// write.
    async fn count(
        &self,
        fingerprint: &str,
        Quota { budget, policy }: Quota,
        ask: Option<IdempotencyAsk<'_>>,
    ) -> Result<(Decision, Option<IdempotencyState>), StoreError> {
        let decision = match budget {
            Budget::Integration => self.hit(fingerprint, policy).await?,
            _ => self.hit(&format!("{fingerprint}{}", budget.suffix()), policy).await?,
        };
        let begun = match ask.filter(|_| decision.allowed) {
            Some(ask) => Some(self.idempotency_begin(ask.key, ask.fingerprint, ask.lock).await?),
            None => None,
        };
        Ok((decision, begun))
    }

    fn shard(&self, bucket: &str) -> &Mutex<HashMap<String, Log>> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bucket.hash(&mut h);
        &self.shards[(h.finish() % self.shards.len() as u64) as usize]
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    /// Answers a key from its grant for [`LOCAL_GRANT_TTL`] at most: the embedded default's
    /// database is a local file, and the operators' CLI, another process, revokes keys in it, which
    /// this process hears of only by reading the key again.
    async fn admit(
        &self,
        fingerprint: &str,
        quota: Quota,
        ask: Option<IdempotencyAsk<'_>>,
    ) -> Result<Admission, StoreError> {
        let now = Instant::now();
        if let Some((refusal, until)) = self.refusals.lock().map_err(poisoned)?.get(fingerprint)
            && *until > now
        {
            return Ok(Admission::Refused(*refusal));
        }
        let grant = match self.grants.lock().map_err(poisoned)?.get(fingerprint) {
            Some((Some(grant), until)) if *until > now => grant.clone(),
            _ => return Ok(Admission::Unknown),
        };
        let (decision, idempotency) = self.count(fingerprint, quota, ask).await?;
        Ok(Admission::Granted { grant, decision, idempotency })
    }

    async fn admit_resolved(
        &self,
        fingerprint: &str,
        grant: Option<(&str, Duration)>,
        quota: Quota,
        ask: Option<IdempotencyAsk<'_>>,
    ) -> Result<(Decision, Option<IdempotencyState>), StoreError> {
        if let Some((grant, ttl)) = grant {
            let now = Instant::now();
            let mut grants = self.grants.lock().map_err(poisoned)?;
            if !grants.get(fingerprint).is_some_and(|(grant, until)| grant.is_none() && *until > now) {
                remember(&mut grants, fingerprint, (Some(grant.to_string()), now + ttl.min(LOCAL_GRANT_TTL)));
            }
        }
        self.count(fingerprint, quota, ask).await
    }

    async fn forget_grants(&self, fingerprints: &[String]) -> Result<(), StoreError> {
        let mut refusals = self.refusals.lock().map_err(poisoned)?;
        let mut grants = self.grants.lock().map_err(poisoned)?;
        let settled = Instant::now() + 2 * LOCAL_GRANT_TTL;
        for fp in fingerprints {
            refusals.remove(fp);
            remember(&mut grants, fp, (None, settled));
        }
        Ok(())
    }

    async fn attempts(&self, bucket: &str, attempt: Attempt, policy: Backoff) -> Result<Duration, StoreError> {
        let now = Instant::now();
        let mut failures = self.failures.lock().map_err(poisoned)?;
        if attempt == Attempt::Clear {
            failures.remove(bucket);
            return Ok(Duration::ZERO);
        }
        let (n, last) = match failures.get(bucket) {
            Some((n, last)) if now.duration_since(*last) < policy.window => (*n, *last),
            _ => (0, now),
        };
        if attempt == Attempt::Undo {
            if let Some((counted, _)) = failures.get_mut(bucket) {
                *counted = counted.saturating_sub(1);
            }
            return Ok(Duration::ZERO);
        }
        let wait = (last + policy.delay(n)).saturating_duration_since(now);
        if !wait.is_zero() || attempt == Attempt::Check {
            return Ok(wait);
        }
        if failures.len() >= MAX_REFUSALS {
            failures.retain(|_, (_, last)| now.duration_since(*last) < policy.window);
        }
        if failures.len() < MAX_REFUSALS || failures.contains_key(bucket) {
            failures.insert(bucket.to_string(), (n + 1, now));
        }
        Ok(Duration::ZERO)
    }

    async fn remember_refusal(&self, fingerprint: &str, refusal: KeyRefusal, ttl: Duration) -> Result<(), StoreError> {
        let until = Instant::now() + ttl;
        remember(&mut *self.refusals.lock().map_err(poisoned)?, fingerprint, (refusal, until));
        Ok(())
    }

    async fn walk_recall(&self, key: &str) -> Result<Option<String>, StoreError> {
        let walks = self.walks.lock().map_err(poisoned)?;
        Ok(walks.get(key).filter(|(_, until)| *until > Instant::now()).map(|(value, _)| value.clone()))
    }

    async fn walk_keep(&self, key: &str, value: &str, ttl: Duration) -> Result<(), StoreError> {
        let until = Instant::now() + ttl;
        remember(&mut *self.walks.lock().map_err(poisoned)?, key, (value.to_string(), until));
        Ok(())
    }

    async fn hit(&self, bucket: &str, policy: RatePolicy) -> Result<Decision, StoreError> {
        let now = millis(self.epoch.elapsed());
        let window = millis(policy.window);
        let mut map = self.shard(bucket).lock().map_err(poisoned)?;
        // Forget idle buckets now and then so the map does not grow without bound.
        if map.len() > 10_000 {
            map.retain(|_, log| log.stamps.back().is_some_and(|(t, _)| now.saturating_sub(*t) < window));
        }
        let log = map.entry(bucket.to_string()).or_default();
        log.expire(now, window);
        // A burst (a raised limit) leaves a large log behind; give the memory back once it has
        // drained to a quarter.
        if log.stamps.capacity() > 1024 && log.stamps.len() < log.stamps.capacity() / 4 {
            log.stamps.shrink_to(log.stamps.len() * 2);
        }
        let used = u32::try_from(log.used).unwrap_or(u32::MAX);
        let allowed = used < policy.limit;
        if allowed {
            log.push(now);
        }
        let oldest = log.stamps.front().map_or(now, |(t, _)| *t);
        let wait = window.saturating_sub(now.saturating_sub(oldest));
        Ok(Decision {
            allowed,
            limit: policy.limit,
            remaining: if allowed { policy.limit - used - 1 } else { 0 },
            reset_secs: retry_after_secs(i64::try_from(wait).unwrap_or(i64::MAX)),
        })
    }

    async fn idempotency_begin(
        &self,
        key: &str,
        fingerprint: &str,
        lock: Duration,
    ) -> Result<IdempotencyState, StoreError> {
        let now = Instant::now();
        let (key, fingerprint) = (digest(key), digest(fingerprint));
        let found = self.idempotency.lock().map_err(poisoned)?.begin(key, fingerprint, now, now + lock);
        found.state()
    }

    async fn idempotency_complete(
        &self,
        key: &str,
        fingerprint: &str,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let (key, done) = (digest(key), Completed::new(fingerprint, response));
        let expires = Instant::now() + ttl;
        self.idempotency.lock().map_err(poisoned)?.complete(key, done, expires);
        Ok(())
    }

    async fn idempotency_abort(&self, key: &str) -> Result<(), StoreError> {
        let key = digest(key);
        self.idempotency.lock().map_err(poisoned)?.abort(key);
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

    fn entries(s: &MemoryStore, bucket: &str) -> (usize, usize) {
        let map = s.shard(bucket).lock().unwrap();
        let log = map.get(bucket).unwrap();
        (log.stamps.len(), log.stamps.capacity())
    }

    /// A grant answers the key for a second at most, counting its requests; a change made through
    /// this server drops it, and a lookup that read the key before that change caches nothing.
    #[tokio::test]
    async fn a_grant_is_kept_a_moment_and_dropped_with_its_key() {
        let store = MemoryStore::default();
        let quota = Quota { budget: Budget::Integration, policy: RatePolicy::per_minute(10) };
        assert!(matches!(store.admit("fp", quota, None).await.unwrap(), Admission::Unknown));
        store.admit_resolved("fp", Some(("grant", Duration::from_secs(60))), quota, None).await.unwrap();
        let Admission::Granted { grant, decision, .. } = store.admit("fp", quota, None).await.unwrap() else {
            panic!("the grant just resolved is kept");
        };
        assert_eq!((grant.as_str(), decision.remaining), ("grant", 8), "both requests were counted");
        assert!(store.grants.lock().unwrap()["fp"].1 <= Instant::now() + LOCAL_GRANT_TTL, "kept a second at most");

        store.forget_grants(&["fp".to_string()]).await.unwrap();
        assert!(matches!(store.admit("fp", quota, None).await.unwrap(), Admission::Unknown));
        // A lookup that began before the change ends after it: its grant is not kept.
        store.admit_resolved("fp", Some(("stale", Duration::from_secs(60))), quota, None).await.unwrap();
        assert!(matches!(store.admit("fp", quota, None).await.unwrap(), Admission::Unknown));
    }

    #[tokio::test]
    async fn a_burst_keeps_one_entry_per_millisecond_and_gives_its_memory_back() {
        let store = MemoryStore::default();
        // A window far longer than the burst takes, even in a debug build on a busy machine.
        let policy = RatePolicy { limit: 50_000, window: Duration::from_secs(2) };
        let started = Instant::now();
        for _ in 0..50_000 {
            assert!(store.hit("burst", policy).await.unwrap().allowed);
        }
        let elapsed = millis(started.elapsed());
        let refused = store.hit("burst", policy).await.unwrap();
        assert!(!refused.allowed, "the 50,001st request of the window is refused");
        assert!((1..=2).contains(&refused.retry_after_secs()), "{}", refused.retry_after_secs());
        let (len, _) = entries(&store, "burst");
        assert!(len as u64 <= elapsed + 2, "{len} entries for a burst of {elapsed} ms");
        assert!(len < 50_000, "{len} entries for 50,000 requests");

        tokio::time::sleep(Duration::from_millis(2_050)).await;
        let d = store.hit("burst", policy).await.unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, policy.limit - 1, "the burst left the window");
        assert!(entries(&store, "burst").1 < 1_100);
    }

    #[tokio::test]
    async fn the_window_holds_exactly_the_limit_and_the_wait_runs_to_the_oldest_request() {
        let store = MemoryStore::default();
        let tight = RatePolicy { limit: 2, window: Duration::from_secs(60) };
        assert_eq!(store.hit("tight", tight).await.unwrap().remaining, 1);
        assert_eq!(store.hit("tight", tight).await.unwrap().remaining, 0);
        let refused = store.hit("tight", tight).await.unwrap();
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_secs(), 60);
        assert!(store.hit("other", tight).await.unwrap().allowed, "buckets are apart");

        let short = RatePolicy { limit: 3, window: Duration::from_millis(300) };
        for _ in 0..3 {
            assert!(store.hit("short", short).await.unwrap().allowed);
        }
        assert!(!store.hit("short", short).await.unwrap().allowed);
        tokio::time::sleep(Duration::from_millis(320)).await;
        let again = store.hit("short", short).await.unwrap();
        assert!(again.allowed);
        assert_eq!(again.remaining, 2, "the three earlier requests left the window together");
    }
}
