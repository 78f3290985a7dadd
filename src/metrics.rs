//! What operators scrape at `GET /metrics` (Prometheus text format): requests by operation and
//! status with their latency, the refusals and replays of the gate, key lookups, webhook
//! deliveries, and gauges read at scrape time (the outbox's oldest pending delivery, the database
//! pool, the store's health). One set per server process; nothing here reads a request's content.

use std::sync::atomic::AtomicU64;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The document's `operationId`, or the route outside the API (`settings`, `healthz`, ...).
    pub operation: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    pub operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// The operation a response answered (its `operationId`), set by the gate for the edge to count.
#[derive(Clone, Debug)]
pub struct Operation(pub String);

type Latency = Family<OperationLabel, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms to about 16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The process's metrics; cheap to update from any task (atomics behind `Arc`s).
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Latency,
    pub rate_limited: Family<OperationLabel, Counter>,
    pub replays: Counter,
    pub idempotency_conflicts: Counter,
    /// Keys looked up in the database (a key cache miss), by what the lookup found.
    pub key_lookups: Family<OutcomeLabel, Counter>,
    pub webhook_deliveries: Family<OutcomeLabel, Counter>,
    pub outbox_oldest_pending: Gauge<f64, AtomicU64>,
    pub db_connections: Family<OutcomeLabel, Gauge>,
    /// 1 while the store (Redis) answers, 0 while its breaker is open.
    pub store_up: Gauge,
    pub breaker_opened: Counter,
    /// Sign-ins that waited for a password hash slot ([`crate::accounts::PASSWORD_HASHES_AT_ONCE`]).
    pub sign_in_hash_waits: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gymapi");
        let m = Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            rate_limited: Family::default(),
            replays: Counter::default(),
            idempotency_conflicts: Counter::default(),
            key_lookups: Family::default(),
            webhook_deliveries: Family::default(),
            outbox_oldest_pending: Gauge::default(),
            db_connections: Family::default(),
            store_up: Gauge::default(),
            breaker_opened: Counter::default(),
            sign_in_hash_waits: Counter::default(),
            registry: Registry::default(),
        };
        registry.register("http_requests", "Requests answered, by operation and status", m.requests.clone());
        registry.register("http_request_duration_seconds", "Time to answer, by operation", m.latency.clone());
        registry.register("rate_limited", "Requests refused with 429, by operation", m.rate_limited.clone());
        registry.register("idempotent_replays", "Keyed writes answered from their kept response", m.replays.clone());
        registry.register(
            "idempotency_conflicts",
            "Keyed writes refused with 409 while the first was running",
            m.idempotency_conflicts.clone(),
        );
        registry.register("key_lookups", "API keys looked up in the database, by result", m.key_lookups.clone());
        registry.register("webhook_deliveries", "Webhook attempts, by outcome", m.webhook_deliveries.clone());
        registry.register(
            "webhook_outbox_oldest_pending_seconds",
            "Age of the oldest webhook delivery due and not yet delivered (0: none)",
            m.outbox_oldest_pending.clone(),
        );
        registry.register("db_connections", "Database pool connections, by state", m.db_connections.clone());
        registry.register(
            "store_up",
            "1 while the limits store answers, 0 while its breaker is open",
            m.store_up.clone(),
        );
        registry.register("store_breaker_opened", "Times the limits store's breaker opened", m.breaker_opened.clone());
        registry.register(
            "sign_in_hash_waits",
            "Sign-ins that waited for one of the password hashes a server runs at once",
            m.sign_in_hash_waits.clone(),
        );
        m.store_up.set(1);
        Self { registry, ..m }
    }

    /// One answered request.
    pub fn observe(&self, operation: &str, status: u16, seconds: f64) {
        let operation = operation.to_string();
        self.requests.get_or_create(&RequestLabels { operation: operation.clone(), status }).inc();
        let label = OperationLabel { operation };
        self.latency.get_or_create(&label).observe(seconds);
        if status == 429 {
            self.rate_limited.get_or_create(&label).inc();
        }
    }

    /// The text format Prometheus scrapes.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_in_the_text_format() {
        let m = Metrics::new();
        m.observe("listMembers", 200, 0.003);
        m.observe("listMembers", 429, 0.001);
        m.replays.inc();
        let text = m.render();
        assert!(text.contains(r#"gymapi_http_requests_total{operation="listMembers",status="200"} 1"#), "{text}");
        assert!(text.contains(r#"gymapi_rate_limited_total{operation="listMembers"} 1"#), "{text}");
        assert!(text.contains("gymapi_idempotent_replays_total 1"), "{text}");
        assert!(text.contains("gymapi_store_up 1"), "{text}");
    }
}
