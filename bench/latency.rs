//! Latency of the request path, layer by layer. Not a test: figures, printed as a Markdown table.
//!
//!     cargo bench --bench latency                        # SQLite + in-process store
//!     BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test BENCH_REDIS_URL=redis://127.0.0.1:6379 \
//!         cargo bench --bench latency                    # PostgreSQL + Redis as well
//!
//! Each scenario runs sequential requests over one keep-alive connection after a warm-up, and
//! reports the median and p99 of the client-observed time. Throughput runs use 8 concurrent
//! client tasks for a fixed time. Client and server share the machine, so compare figures of one
//! run with each other, not across machines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support.rs"]
mod support;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use gymapi::limits::{
    Admission, Decision, IdempotencyAsk, IdempotencyState, Quota, RatePolicy, Store, StoreError, StoredResponse,
};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use support::{database, ms, percentile, serve, throughput};

/// A store that allows everything and keeps nothing: the baseline "without the limiter".
struct NoStore;

#[async_trait::async_trait]
impl Store for NoStore {
    async fn hit(&self, _: &str, policy: RatePolicy) -> Result<Decision, StoreError> {
        Ok(Decision::fail_open(policy))
    }
    async fn admit(&self, _: &str, _: Quota, _: Option<IdempotencyAsk<'_>>) -> Result<Admission, StoreError> {
        Ok(Admission::Unknown)
    }
    async fn admit_resolved(
        &self,
        _: &str,
        _: Option<(&str, Duration)>,
        Quota { policy, .. }: Quota,
        ask: Option<IdempotencyAsk<'_>>,
    ) -> Result<(Decision, Option<IdempotencyState>), StoreError> {
        Ok((Decision::fail_open(policy), ask.map(|_| IdempotencyState::Started)))
    }
    async fn forget_grants(&self, _: &[String]) -> Result<(), StoreError> {
        Ok(())
    }
    async fn remember_refusal(&self, _: &str, _: gymapi::limits::KeyRefusal, _: Duration) -> Result<(), StoreError> {
        Ok(())
    }
    async fn attempts(
        &self,
        _: &str,
        _: gymapi::limits::Attempt,
        _: gymapi::limits::Backoff,
    ) -> Result<Duration, StoreError> {
        Ok(Duration::ZERO)
    }
    async fn idempotency_begin(&self, _: &str, _: &str, _: Duration) -> Result<IdempotencyState, StoreError> {
        Ok(IdempotencyState::Started)
    }
    async fn idempotency_complete(&self, _: &str, _: &str, _: &StoredResponse, _: Duration) -> Result<(), StoreError> {
        Ok(())
    }
    async fn idempotency_abort(&self, _: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn walk_recall(&self, _: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }
    async fn walk_keep(&self, _: &str, _: &str, _: Duration) -> Result<(), StoreError> {
        Ok(())
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn name(&self) -> &'static str {
        "none"
    }
}

struct Target {
    base: String,
    key: String,
    member_id: String,
    db: DatabaseConnection,
}

async fn start(database_url: &str, redis: Option<&str>, store: Option<Arc<dyn Store>>) -> Target {
    let (mut state, db) = support::state(support::config(database_url, redis)).await;
    if let Some(s) = store {
        state.store = s;
    }
    let address = serve(state).await;
    let key = support::live_key(&db, "Bench").await;
    let base = format!("{address}/api/v1");
    let client = reqwest::Client::new();
    let member: serde_json::Value = client
        .post(format!("{base}/members"))
        .bearer_auth(&key)
        .json(&serde_json::json!({"first_name": "Bench", "last_name": "Mark", "email": "bench@example.com"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    Target { base, key, member_id: member["id"].as_str().unwrap().to_string(), db }
}

/// Median and p99 of `n` sequential requests (after `n / 10` of warm-up).
async fn latency(
    client: &reqwest::Client,
    n: usize,
    mut make: impl FnMut(usize) -> reqwest::RequestBuilder,
) -> (Duration, Duration) {
    for i in 0..n / 10 {
        let r = make(i).send().await.unwrap();
        assert!(r.status().as_u16() < 500, "{}", r.status());
        let _ = r.bytes().await;
    }
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        let r = make(n + i).send().await.unwrap();
        let status = r.status();
        let _ = r.bytes().await.unwrap();
        times.push(started.elapsed());
        assert!(status.as_u16() < 500, "{status}");
    }
    let _ = client;
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

/// Statements PostgreSQL ran for this database so far (every autocommit statement is a transaction).
async fn pg_transactions(db: &DatabaseConnection) -> Option<i64> {
    if db.get_database_backend() != sea_orm::DatabaseBackend::Postgres {
        return None;
    }
    // Backends flush their statistics lazily (at most every 10 s when idle); let them settle.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let row = db
        .query_one(Statement::from_string(
            sea_orm::DatabaseBackend::Postgres,
            "SELECT (xact_commit + xact_rollback)::bigint AS n FROM pg_stat_database WHERE datname = current_database()",
        ))
        .await
        .ok()??;
    row.try_get::<i64>("", "n").ok()
}

async fn round_trips(t: &Target, client: &reqwest::Client, path: &str, n: i64) -> Option<f64> {
    let before = pg_transactions(&t.db).await?;
    for _ in 0..n {
        let _ = client.get(format!("{}{path}", t.base)).bearer_auth(&t.key).send().await.unwrap().bytes().await;
    }
    let after = pg_transactions(&t.db).await?;
    // The statistics query itself is one transaction.
    Some((after - before - 1) as f64 / n as f64)
}

async fn run(label: &str, database_url: Option<&str>, redis: Option<&str>) {
    let n = 2000;
    let (url, _dir) = database(database_url).await;
    let t = start(&url, redis, None).await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
    println!("\n### {label}\n");
    println!("| scenario | median ms | p99 ms |");
    println!("|---|---|---|");
    let row = |name: &str, (p50, p99): (Duration, Duration)| println!("| {name} | {} | {} |", ms(p50, 3), ms(p99, 3));

    row(
        "401 (malformed key: no database)",
        latency(&client, n, |_| client.get(format!("{}/members", t.base)).bearer_auth("nope")).await,
    );
    row(
        "401 (well-formed unknown key: 1 query)",
        latency(&client, n, |_| {
            client.get(format!("{}/members", t.base)).bearer_auth("svc_live_00000000000000000000000000000000")
        })
        .await,
    );
    row(
        "auth + limiter, then 404 (unknown path)",
        latency(&client, n, |_| client.get(format!("{}/nope", t.base)).bearer_auth(&t.key)).await,
    );
    row(
        "GET /members/{id}",
        latency(&client, n, |_| client.get(format!("{}/members/{}", t.base, t.member_id)).bearer_auth(&t.key)).await,
    );
    row(
        "POST /members (no key)",
        latency(&client, n / 4, |i| {
            client
                .post(format!("{}/members", t.base))
                .bearer_auth(&t.key)
                .json(&serde_json::json!({"first_name": "P", "last_name": format!("{i}")}))
        })
        .await,
    );
    row(
        "POST /members + Idempotency-Key (first)",
        latency(&client, n / 4, |i| {
            client
                .post(format!("{}/members", t.base))
                .bearer_auth(&t.key)
                .header("Idempotency-Key", format!("k-{i}"))
                .json(&serde_json::json!({"first_name": "I", "last_name": format!("{i}")}))
        })
        .await,
    );
    row(
        "POST /members + Idempotency-Key (replay)",
        latency(&client, n, |_| {
            client
                .post(format!("{}/members", t.base))
                .bearer_auth(&t.key)
                .header("Idempotency-Key", "k-0")
                .json(&serde_json::json!({"first_name": "I", "last_name": "0"}))
        })
        .await,
    );

    // The store alone, called directly: what the limiter adds to each request.
    let state_store: Arc<dyn Store> = match redis {
        Some(r) => Arc::new(
            gymapi::limits::RedisStore::connect(r, "gymapi-bench-direct:", Duration::from_millis(250)).await.unwrap(),
        ),
        None => Arc::new(gymapi::limits::MemoryStore::default()),
    };
    let policy = RatePolicy::per_minute(u32::MAX / 2);
    let mut times = Vec::new();
    for i in 0..n + n / 10 {
        let started = Instant::now();
        state_store.hit("bench-bucket", policy).await.unwrap();
        if i >= n / 10 {
            times.push(started.elapsed());
        }
    }
    times.sort();
    row(
        &format!("limiter alone ({} store, one call)", state_store.name()),
        (percentile(&times, 0.5), percentile(&times, 0.99)),
    );

    if let Some(rt) = round_trips(&t, &client, &format!("/members/{}", t.member_id), 500).await {
        println!(
            "\nDatabase round trips per `GET /members/{{id}}`: {rt:.2} (PostgreSQL transaction counter over 500 requests)"
        );
    }
    if let Some(rt) = round_trips(&t, &client, "/nope", 500).await {
        println!("Database round trips of the auth path alone (404 after auth): {rt:.2}");
    }

    let with = throughput(&format!("{}/members/{}", t.base, t.member_id), &t.key, 5).await;
    let t2 = start(&url, None, Some(Arc::new(NoStore))).await;
    let without = throughput(&format!("{}/members/{}", t2.base, t2.member_id), &t2.key, 5).await;
    println!(
        "\n`GET /members/{{id}}`, 8 concurrent clients, 5 s: {with:.0} req/s with the limiter ({}), {without:.0} req/s without (ratio {:.2})",
        state_store.name(),
        with / without
    );
}

#[tokio::main]
async fn main() {
    let pg = std::env::var("BENCH_DATABASE_URL").ok().filter(|s| !s.is_empty());
    let redis = std::env::var("BENCH_REDIS_URL").ok().filter(|s| !s.is_empty());
    println!("# gymapi request-path latency ({})", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"));
    run("SQLite + in-process store", None, None).await;
    if let Some(pg) = pg.as_deref() {
        run("PostgreSQL + Redis", Some(pg), redis.as_deref()).await;
    }
}
