//! Waking long polls: a request waiting for something of a *topic* (a door's commands, a gym's
//! rings) is woken when a write signals that topic, on this server or, through Redis pub/sub, on
//! any server of the deployment. Nothing polls in a loop: a waiting request sleeps until it is
//! woken, its wait runs out or the server shuts down.
//!
//! In process, a topic is a [`Notify`] that exists while someone waits on it. With Redis, every
//! signal is also published on one channel (`<prefix>wake`); each server subscribes once and wakes
//! its own waiters. Pub/sub keeps no messages: when the subscription drops, the server wakes every
//! waiter once it is back, so each looks again at what it waits for.

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use entity::ids::GymId;
use futures_util::StreamExt as _;
use tokio::sync::{Notify, futures::OwnedNotified, watch};

use crate::{breaker::Breaker, logs::Repeated};

/// The topics waited on in this process, and the deployment's channel when there is Redis.
pub struct Wakes {
    topics: Mutex<HashMap<String, Arc<Notify>>>,
    redis: Option<Publisher>,
}

/// Where signals go to the other servers: the channel, through Redis's breaker, each publish
/// bounded by the Redis timeout.
struct Publisher {
    conn: redis::aio::ConnectionManager,
    channel: String,
    breaker: Arc<Breaker>,
    timeout: Duration,
}

/// A wake-up that could not reach the other servers, for many signals at once while Redis is down.
static UNPUBLISHED: Repeated = Repeated::new();

/// A wait on one or more topics, started before looking (so that a signal between the look and
/// the wait is not missed).
pub struct Waiting {
    notified: Vec<std::pin::Pin<Box<OwnedNotified>>>,
}

impl Waiting {
    /// Until one of the topics is signalled after this wait began.
    pub async fn woken(self) {
        if self.notified.is_empty() {
            return std::future::pending().await;
        }
        futures_util::future::select_all(self.notified).await;
    }
}

/// The topic of an API key, signalled when it is revoked or rolled: the long polls of its devices
/// wake and end (401).
pub fn key_topic(key_id: uuid::Uuid) -> String {
    format!("keys:{key_id}")
}

impl Wakes {
    /// The wake-ups the configuration names: across servers through Redis when `REDIS_URL` is set
    /// (it must answer), behind `breaker` (the limits store's, which calls the same Redis; a breaker
    /// of its own when none is given), else in this process.
    pub async fn connect(config: &crate::config::Config, breaker: Option<Arc<Breaker>>) -> anyhow::Result<Arc<Self>> {
        let Some(url) = &config.redis_url else { return Ok(Self::local()) };
        // A Redis Cluster carries a message published on any node to subscribers on every node:
        // its first node serves.
        let first = crate::config::redis_nodes(url).first().copied().unwrap_or(url.as_str());
        let client = redis::Client::open(first)?;
        let options = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.redis_timeout))
            .set_response_timeout(Some(config.redis_timeout));
        let conn = tokio::time::timeout(
            config.redis_timeout * 2,
            redis::aio::ConnectionManager::new_with_config(client.clone(), options),
        )
        .await
        .map_err(|_| anyhow::anyhow!("Redis did not answer within {:?}", config.redis_timeout))??;
        let publisher = Publisher {
            conn,
            channel: format!("{}wake", config.redis_prefix),
            breaker: breaker.unwrap_or_default(),
            timeout: config.redis_timeout,
        };
        Ok(Self::shared(client, publisher))
    }

    /// Waits and signals within this process only (the embedded default, one server).
    pub fn local() -> Arc<Self> {
        Arc::new(Self { topics: Mutex::new(HashMap::new()), redis: None })
    }

    /// Waits and signals across the servers that share this Redis: publishes through `publisher`,
    /// and subscribes from a task of its own (reconnecting when the subscription drops).
    fn shared(client: redis::Client, publisher: Publisher) -> Arc<Self> {
        let channel = publisher.channel.clone();
        let wakes = Arc::new(Self { topics: Mutex::new(HashMap::new()), redis: Some(publisher) });
        let weak = Arc::downgrade(&wakes);
        tokio::spawn(async move {
            loop {
                let listened = listen(&client, &channel, &weak).await;
                let Some(wakes) = weak.upgrade() else { return };
                // Signals may have been missed while the subscription was down.
                wakes.wake_all();
                drop(wakes);
                if let Err(e) = listened {
                    tracing::warn!(error = %e, "wake-ups across servers interrupted; listening again");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        wakes
    }

    /// Starts waiting on `topic`.
    pub fn wait(&self, topic: &str) -> Waiting {
        self.wait_any(&[topic])
    }

    /// Starts waiting on every one of `topics`: woken by the first signalled.
    pub fn wait_any(&self, topics: &[&str]) -> Waiting {
        let notifies: Vec<Arc<Notify>> = {
            let mut map = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
            // Topics no one waits on any more go, so the map holds only the waits under way.
            if map.len() >= 1024 {
                map.retain(|_, n| Arc::strong_count(n) > 1);
            }
            topics.iter().map(|t| map.entry((*t).to_string()).or_default().clone()).collect()
        };
        let notified = notifies
            .into_iter()
            .map(|n| {
                let mut notified = Box::pin(n.notified_owned());
                notified.as_mut().enable();
                notified
            })
            .collect();
        Waiting { notified }
    }

    /// [`Self::signal`] once what was just written through `db` is committed (`db::after_commit`):
    /// at once, or after a keyed write's commit. A poll woken before would look, find nothing and
    /// wait on.
    pub async fn signal_after_commit(self: &Arc<Self>, db: &impl crate::db::Handle, topic: String) {
        let wakes = self.clone();
        crate::db::after_commit(db, async move { wakes.signal(&topic).await }).await;
    }

    /// Wakes every wait on `topic`, here and on the other servers. While Redis's breaker is open
    /// the other servers are not told (their waiters look again when their wait runs out, or when
    /// their subscription is back), and the writer does not wait for Redis.
    pub async fn signal(&self, topic: &str) {
        self.wake_local(topic);
        let Some(p) = &self.redis else { return };
        let Some(pass) = p.breaker.pass() else {
            tracing::debug!(topic, "a wake-up skipped Redis: its breaker is open");
            return;
        };
        let mut conn = p.conn.clone();
        let mut publish = redis::cmd("PUBLISH");
        publish.arg(&p.channel).arg(topic);
        let sent = matches!(tokio::time::timeout(p.timeout, publish.query_async::<i64>(&mut conn)).await, Ok(Ok(_)));
        p.breaker.record(pass, sent);
        if !sent && let Some(times) = UNPUBLISHED.due() {
            tracing::warn!(topic, times, "wake-ups could not be published; waiters on other servers look again later");
        }
    }

    fn wake_local(&self, topic: &str) {
        let notify = self.topics.lock().unwrap_or_else(PoisonError::into_inner).get(topic).cloned();
        if let Some(n) = notify {
            n.notify_waiters();
        }
    }

    fn wake_all(&self) {
        let all: Vec<Arc<Notify>> =
            self.topics.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect();
        for n in all {
            n.notify_waiters();
        }
    }
}

/// How many long polls wait at once on this server, per key and per gym, against their caps: a
/// poll that may wait holds a [`Slot`] for as long as it runs.
pub struct PollSlots {
    per_key: usize,
    per_gym: usize,
    /// Slots held by key and by gym; a count that falls to zero goes.
    held: Mutex<(HashMap<uuid::Uuid, usize>, HashMap<GymId, usize>)>,
}

/// One waiting long poll's place, given back when dropped.
pub struct Slot {
    slots: Arc<PollSlots>,
    key: uuid::Uuid,
    gym: GymId,
}

impl PollSlots {
    pub fn new(per_key: usize, per_gym: usize) -> Arc<Self> {
        Arc::new(Self { per_key, per_gym, held: Mutex::default() })
    }

    /// A slot for a poll of `key`, a key of `gym`, unless the key or the gym holds its cap.
    pub fn take(self: &Arc<Self>, key: uuid::Uuid, gym: GymId) -> Option<Slot> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let (keys, gyms) = &mut *held;
        if keys.get(&key).copied().unwrap_or(0) >= self.per_key || gyms.get(&gym).copied().unwrap_or(0) >= self.per_gym
        {
            return None;
        }
        *keys.entry(key).or_default() += 1;
        *gyms.entry(gym).or_default() += 1;
        Some(Slot { slots: self.clone(), key, gym })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(PoisonError::into_inner);
        let (keys, gyms) = &mut *held;
        release(keys, self.key);
        release(gyms, self.gym);
    }
}

/// One slot fewer held by `id`; an id holding none is forgotten.
fn release<K: std::hash::Hash + Eq>(held: &mut HashMap<K, usize>, id: K) {
    if let Some(n) = held.get_mut(&id) {
        *n -= 1;
        if *n == 0 {
            held.remove(&id);
        }
    }
}

/// Subscribes to `channel` and wakes the topics its messages name, until the subscription drops
/// or the [`Wakes`] it serves is gone.
async fn listen(client: &redis::Client, channel: &str, wakes: &std::sync::Weak<Wakes>) -> redis::RedisResult<()> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    if let Some(w) = wakes.upgrade() {
        // Subscribed now: what was signalled before is looked at again.
        w.wake_all();
    }
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        let Some(w) = wakes.upgrade() else { return Ok(()) };
        if let Ok(topic) = message.get_payload::<String>() {
            w.wake_local(&topic);
        }
    }
    Ok(())
}

/// The server's shutdown, as long polls see it: once it begins, every waiting poll answers at once.
#[derive(Clone)]
pub struct Shutdown {
    begun: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self { begun: watch::channel(false).0 }
    }
}

impl Shutdown {
    pub fn begin(&self) {
        self.begun.send_replace(true);
    }

    pub fn begun(&self) -> bool {
        *self.begun.borrow()
    }

    /// Until the shutdown begins.
    pub async fn wait(&self) {
        let mut rx = self.begun.subscribe();
        let _ = rx.wait_for(|begun| *begun).await;
    }
}

/// A long poll: `look` now, and while it finds nothing, again each time one of `topics` is signalled and
/// once more when `wait` has passed (a lost wake-up then costs the wait, never the answer); when the
/// server shuts down, the answer is nothing, at once.
pub async fn long_poll<T, E, F, Fut>(
    wakes: &Wakes,
    shutdown: &Shutdown,
    topics: &[&str],
    wait: Duration,
    mut look: F,
) -> Result<Vec<T>, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Vec<T>, E>>,
{
    long_poll_until(wakes, shutdown, topics, wait, || {
        let looked = look();
        async move { looked.await.map(|found| (found, None)) }
    })
    .await
}

/// [`long_poll`] where a look that finds nothing may also say when something it saw becomes
/// available without a signal (a reservation lapsing): it looks again then.
pub async fn long_poll_until<T, E, F, Fut>(
    wakes: &Wakes,
    shutdown: &Shutdown,
    topics: &[&str],
    wait: Duration,
    mut look: F,
) -> Result<Vec<T>, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<tokio::time::Instant>), E>>,
{
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let waiting = wakes.wait_any(topics);
        let (found, again_at) = look().await?;
        if !found.is_empty() || tokio::time::Instant::now() >= deadline || shutdown.begun() {
            return Ok(found);
        }
        let until = again_at.map_or(deadline, |t| t.min(deadline));
        tokio::select! {
            () = waiting.woken() => {}
            () = tokio::time::sleep_until(until) => {}
            () = shutdown.wait() => return Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_per_key_and_per_gym_and_given_back() {
        let slots = PollSlots::new(2, 3);
        let (gym, other) = (GymId::generate(), GymId::generate());
        let (a, b) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
        let first = [slots.take(a, gym), slots.take(a, gym)];
        assert!(first.iter().all(Option::is_some));
        assert!(slots.take(a, gym).is_none(), "the key's cap");
        let third = slots.take(b, gym);
        assert!(third.is_some());
        assert!(slots.take(b, gym).is_none(), "the gym's cap");
        assert!(slots.take(uuid::Uuid::now_v7(), other).is_some(), "another gym");
        drop(first);
        assert!(slots.take(a, gym).is_some(), "given back");
        drop(third);
        assert_eq!(slots.held.lock().unwrap().1.len(), 0, "nothing held, nothing kept");
    }

    #[tokio::test]
    async fn a_signal_between_the_look_and_the_wait_is_not_missed() {
        let wakes = Wakes::local();
        let waiting = wakes.wait("t");
        wakes.signal("t").await;
        tokio::time::timeout(Duration::from_secs(1), waiting.woken()).await.unwrap();
    }

    #[tokio::test]
    async fn a_poll_answers_when_woken_and_empty_when_its_wait_runs_out_or_the_server_stops() {
        let wakes = Wakes::local();
        let shutdown = Shutdown::default();
        let found = Arc::new(Mutex::new(Vec::<u8>::new()));
        let look = {
            let found = found.clone();
            move || {
                let found = found.clone();
                async move { Ok::<_, ()>(found.lock().unwrap().clone()) }
            }
        };
        let poll = tokio::spawn({
            let (wakes, shutdown, look) = (wakes.clone(), shutdown.clone(), look.clone());
            async move { long_poll(&wakes, &shutdown, &["door"], Duration::from_secs(10), look).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        found.lock().unwrap().push(7);
        wakes.signal("door").await;
        assert_eq!(tokio::time::timeout(Duration::from_secs(2), poll).await.unwrap().unwrap(), Ok(vec![7]));

        found.lock().unwrap().clear();
        let started = std::time::Instant::now();
        assert_eq!(long_poll(&wakes, &shutdown, &["door"], Duration::from_millis(100), look.clone()).await, Ok(vec![]));
        assert!(started.elapsed() >= Duration::from_millis(100));

        let poll = tokio::spawn({
            let (wakes, shutdown, look) = (wakes.clone(), shutdown.clone(), look.clone());
            async move { long_poll(&wakes, &shutdown, &["door"], Duration::from_secs(20), look).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        shutdown.begin();
        assert_eq!(tokio::time::timeout(Duration::from_secs(2), poll).await.unwrap().unwrap(), Ok(vec![]));
    }
}
