//! The dispatcher: claims due deliveries, sends them, records every attempt.
//!
//! It runs inside `gymapi serve` and as `gymapi worker`; any number of them may share a database.
//! A claim is one statement that leases up to [`CLAIM`] due deliveries for [`LEASE`]
//! (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so concurrent claims never take the same row; SQLite
//! runs one writer at a time). A dispatcher that dies mid-send leaves leases that run out, and
//! those deliveries are sent again: delivery is at least once, with the same `webhook-id`.
//!
//! Deliveries of one endpoint are sent one after another, oldest first (at most
//! [`PER_ENDPOINT`] per round, so a round fits in its lease even if each attempt takes the full
//! timeout); different endpoints are sent concurrently.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use entity::{states::DeliveryStatus, webhook_delivery, webhook_endpoint, webhook_event};
use futures_util::future::join_all;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, Statement};
use serde_json::json;
use tokio::sync::Notify;
use uuid::Uuid;

use super::{
    check_url, is_public,
    proxy::{Answer, ViaProxy},
    signature_header,
};
use crate::{
    config::Config,
    db::placeholders,
    metrics::Metrics,
    records::{now, rfc3339},
};

/// Deliveries claimed per round.
pub const CLAIM: i64 = 32;
/// Deliveries of one endpoint sent per round; the rest are released for the next.
pub const PER_ENDPOINT: usize = 4;
/// How long a claim holds: [`PER_ENDPOINT`] attempts at [`TIMEOUT`], and a margin.
pub const LEASE: Duration = Duration::from_secs(60);
/// The longest an attempt waits for the receiver.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The response body kept per attempt, at most.
pub const EXCERPT_BYTES: usize = 1024;
/// Attempts kept per delivery (the newest).
const ATTEMPTS_KEPT: usize = 50;

/// Resolves receiver names at connect time and refuses any name with a non-public address, so
/// a name that changes its address after the endpoint was saved cannot reach inside.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if addrs.is_empty() || addrs.iter().any(|a| !is_public(a.ip())) {
                let err: Box<dyn std::error::Error + Send + Sync> =
                    format!("{} resolves to an address that is not public", name.as_str()).into();
                return Err(err);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

pub struct Dispatcher {
    db: DatabaseConnection,
    transport: Transport,
    schedule: Vec<Duration>,
    allow_private: bool,
    /// How often it looks for due deliveries when nothing woke it (`webhook_poll`).
    poll: Duration,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
}

/// How attempts reach receivers: directly, or through the proxy `GYMAPI_WEBHOOK_PROXY` names.
enum Transport {
    Direct(reqwest::Client),
    Proxy(ViaProxy),
}

/// What one attempt came to.
struct Outcome {
    response_status: Option<u16>,
    excerpt: Option<String>,
    error: Option<String>,
    duration_ms: i64,
}

impl Outcome {
    fn failed(error: impl Into<String>, started: Instant) -> Self {
        Self { response_status: None, excerpt: None, error: Some(error.into()), duration_ms: elapsed_ms(started) }
    }
}

/// One attempt straight to the receiver, reading a bounded part of its body; whatever the receiver
/// sends beyond it is dropped.
async fn post_direct(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&'static str, String)],
    body: String,
) -> Result<Answer, String> {
    let mut request = client.post(url).body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let mut resp = request.send().await.map_err(|err| describe(&err))?;
    let status = resp.status().as_u16();
    let mut excerpt = Vec::new();
    while excerpt.len() < EXCERPT_BYTES {
        match tokio::time::timeout(TIMEOUT, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => excerpt.extend_from_slice(&chunk[..chunk.len().min(EXCERPT_BYTES - excerpt.len())]),
            _ => break,
        }
    }
    Ok(Answer { status, excerpt })
}

fn elapsed_ms(started: Instant) -> i64 {
    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX)
}

impl Dispatcher {
    pub fn new(
        db: DatabaseConnection,
        config: &Config,
        wake: Arc<Notify>,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        // No proxy from the environment (`HTTPS_PROXY`, `ALL_PROXY`, ...): a proxy would resolve the
        // endpoint's name itself, past the check of its address below. One named for webhooks is
        // told the checked address (proxy.rs).
        let transport = match &config.webhook_proxy {
            Some(proxy) => Transport::Proxy(ViaProxy::new(proxy, config.webhook_allow_private)?),
            None => {
                let mut builder = reqwest::Client::builder()
                    .no_proxy()
                    .user_agent(super::USER_AGENT)
                    .redirect(reqwest::redirect::Policy::none())
                    .connect_timeout(Duration::from_secs(5))
                    .timeout(TIMEOUT)
                    .pool_idle_timeout(Duration::from_secs(30));
                if !config.webhook_allow_private {
                    builder = builder.dns_resolver(Arc::new(PublicOnly));
                }
                Transport::Direct(builder.build()?)
            }
        };
        Ok(Self {
            db,
            transport,
            schedule: config.webhook_retry_schedule.clone(),
            allow_private: config.webhook_allow_private,
            poll: config.webhook_poll,
            wake,
            metrics,
        })
    }

    /// Sends due deliveries until `stop` resolves.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            let busy = match self.round().await {
                Ok(n) => n as i64 >= CLAIM,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook dispatcher: a round failed");
                    false
                }
            };
            if busy {
                continue;
            }
            tokio::select! {
                () = &mut stop => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.poll) => {}
            }
        }
    }

    /// One round: claim, send, record. Returns the deliveries claimed.
    pub async fn round(&self) -> Result<usize, DbErr> {
        let claimed = self.claim().await?;
        if claimed.is_empty() {
            return Ok(0);
        }
        let n = claimed.len();
        // An endpoint belongs to one gym: a group is one gym's, and every statement below names it.
        let mut by_endpoint: HashMap<(GymId, Uuid), Vec<webhook_delivery::Model>> = HashMap::new();
        for d in claimed {
            by_endpoint.entry((d.gym_id, d.endpoint_id)).or_default().push(d);
        }
        let mut release: HashMap<GymId, Vec<Uuid>> = HashMap::new();
        for ((gym, _), group) in &mut by_endpoint {
            group.sort_by_key(|d| (d.created_at, d.id));
            if group.len() > PER_ENDPOINT {
                release.entry(*gym).or_default().extend(group.drain(PER_ENDPOINT..).map(|d| d.id));
            }
        }
        for (gym, ids) in release {
            webhook_delivery::Entity::update_many()
                .col_expr(
                    webhook_delivery::Column::ClaimedUntil,
                    sea_orm::sea_query::Expr::value(Option::<DateTime<Utc>>::None),
                )
                .filter(webhook_delivery::Column::GymId.eq(gym))
                .filter(webhook_delivery::Column::Id.is_in(ids))
                .exec(&self.db)
                .await?;
        }
        let (endpoints, events) = self.load(&by_endpoint).await?;
        let sends = by_endpoint.into_iter().map(|(key, group)| {
            let endpoint = endpoints.get(&key);
            let events = &events;
            async move {
                for d in group {
                    if let Err(e) = self.deliver(d, endpoint, events).await {
                        tracing::warn!(error = %e, "webhook dispatcher: recording an attempt failed");
                    }
                }
            }
        });
        join_all(sends).await;
        Ok(n)
    }

    /// The endpoints and events of the claimed deliveries, by `(gym, id)`: one statement of each
    /// kind per gym.
    #[allow(clippy::type_complexity)]
    async fn load(
        &self,
        groups: &HashMap<(GymId, Uuid), Vec<webhook_delivery::Model>>,
    ) -> Result<(HashMap<(GymId, Uuid), webhook_endpoint::Model>, HashMap<(GymId, Uuid), webhook_event::Model>), DbErr>
    {
        let mut by_gym: HashMap<GymId, (Vec<Uuid>, Vec<Uuid>)> = HashMap::new();
        for ((gym, endpoint), group) in groups {
            let (endpoints, events) = by_gym.entry(*gym).or_default();
            endpoints.push(*endpoint);
            events.extend(group.iter().map(|d| d.event_id));
        }
        let (mut endpoints, mut events) = (HashMap::new(), HashMap::new());
        for (gym, (endpoint_ids, event_ids)) in by_gym {
            let found = webhook_endpoint::Entity::find()
                .filter(webhook_endpoint::Column::GymId.eq(gym))
                .filter(webhook_endpoint::Column::Id.is_in(endpoint_ids))
                .all(&self.db)
                .await?;
            endpoints.extend(found.into_iter().map(|e| ((e.gym_id, e.id), e)));
            let found = webhook_event::Entity::find()
                .filter(webhook_event::Column::GymId.eq(gym))
                .filter(webhook_event::Column::Id.is_in(event_ids))
                .all(&self.db)
                .await?;
            events.extend(found.into_iter().map(|e| ((e.gym_id, e.id), e)));
        }
        Ok((endpoints, events))
    }

    /// Leases up to [`CLAIM`] due deliveries, oldest due first, gym by gym: one read finds the gyms
    /// with due deliveries (an idle poll is that one indexed read: no write lock on SQLite, no row
    /// locks on PostgreSQL), then each gym's are leased by a statement of their own, so no lease
    /// locks rows of two gyms (on a database distributed by gym, two nodes; see docs/scaling.md).
    async fn claim(&self) -> Result<Vec<webhook_delivery::Model>, DbErr> {
        let backend = self.db.get_database_backend();
        let at = now();
        let due = placeholders(
            backend,
            "SELECT gym_id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? \
             AND (claimed_until IS NULL OR claimed_until < ?) GROUP BY gym_id ORDER BY MIN(next_attempt_at) LIMIT ?",
        );
        let due = Statement::from_sql_and_values(backend, due, [at.into(), at.into(), CLAIM.into()]);
        let gyms: Vec<GymId> = crate::db::query_across_gyms(&self.db, due)
            .await?
            .iter()
            .map(|row| row.try_get::<GymId>("", "gym_id"))
            .collect::<Result<_, _>>()?;
        let until = at + chrono::Duration::from_std(LEASE).unwrap_or_default();
        let leasable = "SELECT id FROM webhook_deliveries WHERE gym_id = ? AND status = 'pending' AND next_attempt_at <= ? \
                   AND (claimed_until IS NULL OR claimed_until < ?) ORDER BY next_attempt_at, id LIMIT ?";
        let sql = placeholders(
            backend,
            &format!(
                "UPDATE webhook_deliveries SET claimed_until = ? WHERE gym_id = ? AND id {} RETURNING *",
                crate::db::claimed(backend, leasable)
            ),
        );
        let mut claimed = Vec::new();
        for gym in gyms {
            let room = CLAIM - i64::try_from(claimed.len()).unwrap_or(CLAIM);
            if room <= 0 {
                break;
            }
            let values = [until.into(), gym.into(), gym.into(), at.into(), at.into(), room.into()];
            let stmt = Statement::from_sql_and_values(backend, sql.clone(), values);
            claimed.extend(webhook_delivery::Entity::find().from_raw_sql(stmt).all(&self.db).await?);
        }
        Ok(claimed)
    }

    async fn deliver(
        &self,
        d: webhook_delivery::Model,
        endpoint: Option<&webhook_endpoint::Model>,
        events: &HashMap<(GymId, Uuid), webhook_event::Model>,
    ) -> Result<(), DbErr> {
        let started = Instant::now();
        let attempted_at = now();
        let (outcome, gone) = match (endpoint, events.get(&(d.gym_id, d.event_id))) {
            (None, _) => (Outcome::failed("The endpoint no longer exists.", started), true),
            (Some(e), _) if !e.enabled => (Outcome::failed("The endpoint is disabled.", started), true),
            (_, None) => (Outcome::failed("The event no longer exists.", started), true),
            (Some(e), Some(event)) => {
                let outcome = self.send(e, event, started).await;
                let gone = outcome.response_status == Some(410);
                if gone {
                    self.disable(e).await?;
                }
                (outcome, gone)
            }
        };
        self.record(d, attempted_at, outcome, gone).await
    }

    async fn send(&self, e: &webhook_endpoint::Model, event: &webhook_event::Model, started: Instant) -> Outcome {
        if let Err(why) = check_url(&e.url, self.allow_private) {
            return Outcome::failed(why, started);
        }
        let id = event.id.to_string();
        let timestamp = Utc::now().timestamp();
        let body = event.payload.as_bytes();
        let signature = signature_header(e, &id, timestamp, body);
        let headers = [
            ("content-type", "application/json".to_string()),
            ("webhook-id", id),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ];
        let answer = match &self.transport {
            Transport::Direct(client) => post_direct(client, &e.url, &headers, event.payload.clone()).await,
            Transport::Proxy(proxy) => {
                let target = match url::Url::parse(&e.url) {
                    Ok(u) => u,
                    Err(err) => return Outcome::failed(format!("not a URL ({err})"), started),
                };
                let body = bytes::Bytes::from(event.payload.clone());
                tokio::time::timeout(TIMEOUT, proxy.post(&target, &headers, body, EXCERPT_BYTES))
                    .await
                    .unwrap_or_else(|_| Err("the receiver did not answer in time".into()))
            }
        };
        let Answer { status, excerpt } = match answer {
            Ok(a) => a,
            Err(why) => return Outcome::failed(why, started),
        };
        let text = String::from_utf8_lossy(&excerpt).into_owned();
        Outcome {
            response_status: Some(status),
            excerpt: (!text.is_empty()).then_some(text),
            error: None,
            duration_ms: elapsed_ms(started),
        }
    }

    async fn disable(&self, e: &webhook_endpoint::Model) -> Result<(), DbErr> {
        use sea_orm::sea_query::Expr;
        webhook_endpoint::Entity::update_many()
            .col_expr(webhook_endpoint::Column::Enabled, Expr::value(false))
            .col_expr(
                webhook_endpoint::Column::DisabledReason,
                Expr::value("The endpoint answered 410 Gone.".to_string()),
            )
            .col_expr(webhook_endpoint::Column::UpdatedAt, Expr::value(now()))
            .filter(webhook_endpoint::Column::GymId.eq(e.gym_id))
            .filter(webhook_endpoint::Column::Id.eq(e.id))
            .exec(&self.db)
            .await?;
        tracing::info!(endpoint = %e.id, "webhook endpoint disabled: it answered 410 Gone");
        Ok(())
    }

    /// Appends the attempt and moves the delivery on: delivered, retried later, or failed. A
    /// redelivery asked for while the attempt ran (the row's `updated_at` moved) keeps it pending.
    async fn record(
        &self,
        d: webhook_delivery::Model,
        attempted_at: DateTime<Utc>,
        o: Outcome,
        gone: bool,
    ) -> Result<(), DbErr> {
        use sea_orm::sea_query::Expr;
        use webhook_delivery::Column as C;
        let delivered = o.response_status.is_some_and(|s| (200..300).contains(&s));
        let mut attempts: Vec<serde_json::Value> = serde_json::from_str(&d.attempts).unwrap_or_default();
        attempts.push(json!({
            "attempted_at": rfc3339(attempted_at),
            "response_status": o.response_status,
            "response_excerpt": o.excerpt,
            "error": o.error,
            "duration_ms": o.duration_ms,
        }));
        if attempts.len() > ATTEMPTS_KEPT {
            attempts.drain(..attempts.len() - ATTEMPTS_KEPT);
        }
        let attempts = serde_json::Value::from(attempts).to_string();
        let count = d.attempt_count.saturating_add(1);
        // Attempt n is followed by the n-th wait of the schedule; a redelivery past its end is one
        // attempt.
        let retry = usize::try_from(count).ok().and_then(|n| self.schedule.get(n.saturating_sub(1)));
        let at = now();
        let (status, next) = match (delivered, gone, retry) {
            (true, _, _) => (DeliveryStatus::Delivered, None),
            (false, false, Some(wait)) => {
                (DeliveryStatus::Pending, Some(at + chrono::Duration::from_std(*wait).unwrap_or_default()))
            }
            _ => (DeliveryStatus::Failed, None),
        };
        let outcome = match status {
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Pending => "retrying",
            _ => "failed",
        };
        self.metrics.webhook_deliveries.get_or_create(&crate::metrics::OutcomeLabel { outcome }).inc();
        let updated = webhook_delivery::Entity::update_many()
            .col_expr(C::Status, Expr::value(status.as_str()))
            .col_expr(C::Attempts, Expr::value(attempts.clone()))
            .col_expr(C::AttemptCount, Expr::value(count))
            .col_expr(C::NextAttemptAt, Expr::value(next))
            .col_expr(C::ClaimedUntil, Expr::value(Option::<DateTime<Utc>>::None))
            .col_expr(C::UpdatedAt, Expr::value(at))
            .filter(C::GymId.eq(d.gym_id))
            .filter(C::Id.eq(d.id))
            .filter(C::UpdatedAt.eq(d.updated_at))
            .exec(&self.db)
            .await?;
        if updated.rows_affected == 0 {
            // Redelivered meanwhile: keep its new schedule, add the attempt.
            webhook_delivery::Entity::update_many()
                .col_expr(C::Attempts, Expr::value(attempts))
                .col_expr(C::AttemptCount, Expr::value(count))
                .col_expr(C::ClaimedUntil, Expr::value(Option::<DateTime<Utc>>::None))
                .filter(C::GymId.eq(d.gym_id))
                .filter(C::Id.eq(d.id))
                .exec(&self.db)
                .await?;
            self.wake.notify_one();
        }
        Ok(())
    }
}

/// A send error in words a gym user understands.
fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        format!("No answer within {} s.", TIMEOUT.as_secs())
    } else if err.is_connect() {
        let mut source: Option<&dyn std::error::Error> = Some(err);
        let mut last = String::new();
        while let Some(s) = source {
            last = s.to_string();
            source = s.source();
        }
        format!("Could not connect: {last}")
    } else {
        format!("The request failed: {err}")
    }
}

/// Starts the dispatcher of `serve` (unless `GYMAPI_WEBHOOK_DISPATCH=0`); it stops with the process.
pub fn spawn(db: DatabaseConnection, config: &Config, wake: Arc<Notify>, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    let d = Dispatcher::new(db, config, wake, metrics)?;
    tokio::spawn(d.run(std::future::pending()));
    Ok(())
}
