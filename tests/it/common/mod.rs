//! The test harness: each test gets its own database (a SQLite file, or a new PostgreSQL database
//! when `TEST_DATABASE_URL` is set), the real app on a free port, and a client whose every
//! response is checked against openapi.yaml.

pub mod citus;
pub mod oracle;

use std::{
    io::Write,
    sync::{Mutex, OnceLock},
};

use entity::ids::GymId;
use gymapi::{
    accounts::{self, Actor},
    config::Config,
    context::Environment,
    state::AppState,
};
use reqwest::{Method, header::HeaderMap};
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};
use serde_json::Value;
use uuid::Uuid;

pub use oracle::Oracle;

pub fn oracle() -> &'static Oracle {
    static ORACLE: OnceLock<Oracle> = OnceLock::new();
    ORACLE.get_or_init(Oracle::load)
}

/// The device API's document as an oracle.
pub fn devices_oracle() -> &'static Oracle {
    static ORACLE: OnceLock<Oracle> = OnceLock::new();
    ORACLE.get_or_init(|| Oracle::load_from("openapi-devices.yaml"))
}

/// Everything the service logged during this test binary's run, at debug level.
pub fn captured_logs() -> String {
    String::from_utf8_lossy(&LOGS.lock().unwrap()).into_owned()
}

static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct LogSink;
impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_writer(|| LogSink)
            .with_ansi(false)
            .try_init();
    });
}

/// With `TEST_PARTITIONS=N` (and `TEST_DATABASE_URL`), every test's tenant tables are
/// hash-partitioned by gym in N partitions, as `gymapi migrate --partitions N` makes them.
pub fn partitions() -> Option<u32> {
    let n = std::env::var("TEST_PARTITIONS").ok()?.parse().expect("TEST_PARTITIONS must be a number");
    assert!(on_postgres(), "TEST_PARTITIONS needs TEST_DATABASE_URL (PostgreSQL)");
    Some(n)
}

/// Which backend the suite runs on.
pub fn on_postgres() -> bool {
    std::env::var("TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty())
}

/// A client for tests: redirects not followed, and a request the server never answers fails its
/// test after 120 s rather than holding the pass (no operation waits longer than a long poll's
/// 25 s).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .unwrap()
}

/// Where one test's data lives. Dropping it removes the data: the temporary directory of the
/// SQLite file, or the PostgreSQL database.
pub struct Scratch {
    pub dir: Option<tempfile::TempDir>,
    /// The server to drop it from, and the database's name.
    postgres: Option<(String, String)>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some((base, name)) = self.postgres.take() else {
            return;
        };
        // On a thread and runtime of its own: the test's runtime may be shutting down. `FORCE`
        // ends the connections the test's server still holds.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let admin = gymapi::db::connect(&base).await.ok()?;
                admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await.ok()?;
                if citus::on_citus() {
                    citus::drop_from_workers(&admin, &base, &name).await;
                }
                admin.close().await.ok()
            })
        })
        .join();
    }
}

/// Serves `state` on a free local port: its `http://127.0.0.1:PORT` and the server's task.
async fn listen(state: AppState) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(gymapi::server::run(listener, state, std::future::pending()));
    (format!("http://{addr}"), server)
}

/// A fresh database for one test, removed when the returned `Scratch` is dropped. On the Citus
/// pass it is migrated and distributed, as `gymapi migrate --distribute` leaves it.
pub async fn fresh_database() -> (String, Scratch) {
    let (url, scratch) = bare_database().await;
    if citus::on_citus() {
        citus::distribute(&url).await;
    }
    (url, scratch)
}

/// A fresh database with nothing in it (on the Citus pass: the extension and the workers only).
pub async fn bare_database() -> (String, Scratch) {
    match std::env::var("TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        Some(base) => {
            let name = format!("gymapi_t_{}", Uuid::now_v7().simple());
            let admin = gymapi::db::connect(&base).await.expect("TEST_DATABASE_URL must be reachable");
            admin.execute_unprepared(&format!("CREATE DATABASE \"{name}\"")).await.unwrap();
            let scratch = Scratch { dir: None, postgres: Some((base.clone(), name.clone())) };
            if citus::on_citus() {
                citus::prepare(&admin, &base, &name).await;
            }
            admin.close().await.unwrap();
            let mut url = url::Url::parse(&base).unwrap();
            url.set_path(&format!("/{name}"));
            (url.to_string(), scratch)
        }
        None => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("gymapi.db").display());
            (url, Scratch { dir: Some(dir), postgres: None })
        }
    }
}

pub struct TestApp {
    /// `http://127.0.0.1:PORT`
    pub address: String,
    /// The test's own connection to the server's database, for what a test sets up and checks
    /// behind the API (on Citus, free to read every gym's shards: see [`citus::inspecting`]).
    pub db: DatabaseConnection,
    /// The server's connection, which another instance shares.
    server_db: DatabaseConnection,
    pub database_url: String,
    pub redis_url: Option<String>,
    pub redis_prefix: String,
    /// The server's store: what the settings pages and the CLI clear keys from.
    pub store: std::sync::Arc<dyn gymapi::limits::Store>,
    pub client: reqwest::Client,
    /// The server's shutdown, which ends its waiting long polls.
    pub shutdown: gymapi::wake::Shutdown,
    /// The server's configuration, which another instance shares.
    pub config: Config,
    _server: tokio::task::JoinHandle<()>,
    /// Last, so that it goes after the connections above.
    pub scratch: Scratch,
}

/// A gym with a working live key.
pub struct Gym {
    pub id: GymId,
    pub live_key: String,
    pub live_key_id: Uuid,
}

#[derive(Debug)]
pub struct TestResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl TestResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn error_type(&self) -> &str {
        self.body["error"]["type"].as_str().unwrap_or_default()
    }
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(configure: impl FnOnce(&mut Config)) -> Self {
        Self::spawn_as(configure, None).await
    }

    /// A server as [`TestApp::spawn_with`] makes it, whose reads outside a transaction are copied
    /// into `recorded` (the statements a request sent, to ask the database how it plans them).
    pub async fn spawn_recording(recorded: gymapi::db::Recorded, configure: impl FnOnce(&mut Config)) -> Self {
        Self::spawn_as(configure, Some(recorded)).await
    }

    async fn spawn_as(configure: impl FnOnce(&mut Config), recorded: Option<gymapi::db::Recorded>) -> Self {
        init_logs();
        let (database_url, scratch) = fresh_database().await;
        let mut config = Config { database_url: database_url.clone(), ..Config::default() };
        if let Some(redis) = std::env::var("TEST_REDIS_URL").ok().filter(|u| !u.is_empty()) {
            config.redis_url = Some(redis);
            config.redis_prefix = format!("gymapi-test:{}:", Uuid::now_v7().simple());
        }
        configure(&mut config);
        if let Some(n) = partitions() {
            let first = gymapi::db::connect(&config.database_url).await.unwrap();
            gymapi::db::migrate(&first).await.unwrap();
            gymapi::db::partition(&first, n).await.unwrap();
            first.close().await.unwrap();
        }
        // As `serve` opens it (on partitioned tables, with generic plans).
        let db = gymapi::db::open(&config.database_url).await.unwrap();
        let mut state = AppState::new(db.clone(), config.clone()).await.unwrap();
        if let Some(recorded) = recorded {
            state.db = state.db.clone().recording(recorded);
        }
        let server_db = db.clone();
        let db = if citus::on_citus() { citus::inspecting(&config.database_url).await } else { db };
        // As `serve` does: the webhook dispatcher runs beside the API (unless the config says not).
        state.start_background().unwrap();
        let store = state.store.clone();
        let shutdown = state.shutdown.clone();
        let (address, server) = listen(state).await;
        Self {
            address,
            db,
            server_db,
            database_url,
            redis_url: config.redis_url.clone(),
            redis_prefix: config.redis_prefix.clone(),
            store,
            shutdown,
            config,
            client: http_client(),
            _server: server,
            scratch,
        }
    }

    /// A second server on this one's database and Redis (a process of its own in production), at
    /// the returned `http://127.0.0.1:PORT`.
    pub async fn another_instance(&self) -> String {
        listen(AppState::new(self.server_db.clone(), self.config.clone()).await.unwrap()).await.0
    }

    /// A gym (API access on, subscription active) with a live key.
    pub async fn gym(&self, name: &str) -> Gym {
        self.gym_in(name, "UTC").await
    }

    /// A gym as [`TestApp::gym`], in the time zone `tz`.
    pub async fn gym_in(&self, name: &str, tz: &str) -> Gym {
        let gym = accounts::create_gym(&self.db, name, tz, true).await.unwrap();
        let key = accounts::create_key(&self.db, &Actor::Operator, gym.id, Environment::Live, "test").await.unwrap();
        Gym { id: gym.id, live_key: key.key, live_key_id: key.model.id }
    }

    /// Provisions the gym's sandbox and returns a test key for it.
    pub async fn test_key(&self, gym: &Gym) -> String {
        if accounts::sandbox_of(&self.db, gym.id).await.unwrap().is_none() {
            accounts::provision_sandbox(&self.db, &Actor::Operator, gym.id).await.unwrap();
        }
        accounts::create_key(&self.db, &Actor::Operator, gym.id, Environment::Test, "test").await.unwrap().key
    }

    /// Sends a request below `/api/v1` and checks the answer against openapi.yaml.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> TestResponse {
        self.send(("/api/v1", oracle()), method, path, key, body, headers).await
    }

    /// Sends a request below `/api/v1/devices` and checks the answer against openapi-devices.yaml.
    pub async fn device(
        &self,
        method: &str,
        path: &str,
        key: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> TestResponse {
        self.send(("/api/v1/devices", devices_oracle()), method, path, Some(key), body, headers).await
    }

    /// Sends a request below `base` and checks the answer against that base's document.
    pub async fn send(
        &self,
        (base, oracle): (&str, &Oracle),
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> TestResponse {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.client.request(m, format!("{}{base}{path}", self.address));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{method} {path}: {status} with a body that is not JSON: {text:?}"));
        let api_path = path.split('?').next().unwrap_or_default();
        oracle.check(method, api_path, status, &headers, &body);
        TestResponse { status, headers, body }
    }

    pub async fn get(&self, key: &str, path: &str) -> TestResponse {
        self.request("GET", path, Some(key), None, &[]).await
    }

    pub async fn post(&self, key: &str, path: &str, body: Value) -> TestResponse {
        self.request("POST", path, Some(key), Some(body), &[]).await
    }

    pub async fn patch(&self, key: &str, path: &str, body: Value) -> TestResponse {
        self.request("PATCH", path, Some(key), Some(body), &[]).await
    }

    /// Creates a member through the API and returns its record.
    pub async fn member(&self, key: &str, first: &str, last: &str) -> Value {
        let r = self.post(key, "/members", serde_json::json!({ "first_name": first, "last_name": last })).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        r.body
    }

    /// A raw request (no key handling, no checks), for cases the helpers cannot express.
    pub fn raw(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.address))
    }
}

/// A gym's counts per month and day (`list`, `bucket`, the sum of its shards) and its members'
/// counts of attendance entries (`member:` and the member's id), as its writers left them.
async fn day_counts(db: &DatabaseConnection, gym_id: GymId) -> Vec<(String, i64, i64)> {
    let backend = db.get_database_backend();
    let sql = gymapi::db::placeholders(
        backend,
        "SELECT list, bucket, CAST(SUM(value) AS BIGINT) AS n FROM gym_day_counts WHERE gym_id = ? \
         GROUP BY list, bucket HAVING SUM(value) <> 0 ORDER BY list, bucket",
    );
    let rows = db.query_all(sea_orm::Statement::from_sql_and_values(backend, sql, [gym_id.into()])).await.unwrap();
    let mut counts: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|r| (r.try_get("", "list").unwrap(), r.try_get("", "bucket").unwrap(), r.try_get("", "n").unwrap()))
        .collect();
    let members = entity::member::Entity::find()
        .filter(entity::member::Column::GymId.eq(gym_id))
        .filter(entity::member::Column::EntriesCount.ne(0))
        .order_by_asc(entity::member::Column::Id)
        .all(db)
        .await
        .unwrap();
    counts.extend(members.iter().map(|m| (format!("member:{}", m.id), 0, m.entries_count)));
    counts
}

/// Asserts that the counts the writers of a gym's check-ins and sales kept per month and day, and
/// of its members' entries, are what a count of its rows makes of them (`counters::recount`,
/// which rebuilds them).
pub async fn assert_day_counts_hold(db: &DatabaseConnection, gym_id: GymId) {
    let kept = day_counts(db, gym_id).await;
    assert!(!kept.is_empty(), "no counts per day were kept");
    gymapi::counters::recount(db, gym_id).await.unwrap();
    assert_eq!(kept, day_counts(db, gym_id).await, "the counts per month and day and the members' the writers kept");
}
