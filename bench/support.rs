//! What the benches share: the service on a free port with its database, a gym's key, percentiles,
//! and a throughput driver.
#![allow(dead_code)] // each bench uses a part of it

use std::time::{Duration, Instant};

use gymapi::{
    accounts::{self, Actor},
    app::app,
    config::Config,
    context::Environment,
    state::AppState,
};
use poem::{
    Server,
    listener::{Acceptor, Listener, TcpListener},
};
use sea_orm::ConnectionTrait;

/// Serves `state` on a free loopback port; returns `http://127.0.0.1:PORT`.
pub async fn serve(state: AppState) -> String {
    let acceptor = TcpListener::bind("127.0.0.1:0").into_acceptor().await.unwrap();
    let addr = *acceptor.local_addr()[0].as_socket_addr().unwrap();
    tokio::spawn(async move {
        let _ = Server::new_with_acceptor(acceptor).run(app(state)).await;
    });
    format!("http://{addr}")
}

/// A bench's configuration: `database_url`, Redis when given (under a prefix of its own), and the
/// rate limit raised out of the way.
pub fn config(database_url: &str, redis: Option<&str>) -> Config {
    Config {
        database_url: database_url.to_string(),
        redis_url: redis.map(str::to_string),
        redis_prefix: format!("gymapi-bench:{}:", uuid::Uuid::now_v7().simple()),
        rate_limit_per_minute: u32::MAX / 2,
        ..Config::default()
    }
}

/// The service's state on `config`'s database, migrated, and a connection of its own to it.
pub async fn state(config: Config) -> (AppState, sea_orm::DatabaseConnection) {
    let db = gymapi::db::connect(&config.database_url).await.unwrap();
    gymapi::db::migrate(&db).await.unwrap();
    (AppState::new(db.clone(), config).await.unwrap(), db)
}

/// A new gym's live key.
pub async fn live_key(db: &sea_orm::DatabaseConnection, gym: &str) -> String {
    let gym = accounts::create_gym(db, gym, "UTC", true).await.unwrap();
    accounts::create_key(db, &Actor::Operator, gym.id, Environment::Live, "bench").await.unwrap().key
}

/// A new live key of the gym called `gym`, made by [`live_key`] in an earlier run.
pub async fn existing_key(db: &sea_orm::DatabaseConnection, gym: &str) -> String {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let gym = entity::gym::Entity::find().filter(entity::gym::Column::Name.eq(gym)).one(db).await.unwrap().unwrap();
    accounts::create_key(db, &Actor::Operator, gym.id, Environment::Live, "bench").await.unwrap().key
}

/// The `p` quantile (0..=1) of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Milliseconds with the given number of decimals.
pub fn ms(d: Duration, decimals: usize) -> String {
    format!("{:.*}", decimals, d.as_secs_f64() * 1000.0)
}

/// `GET url` with `key`, as JSON.
pub async fn get_json(client: &reqwest::Client, url: &str, key: &str) -> serde_json::Value {
    client.get(url).bearer_auth(key).send().await.unwrap().json().await.unwrap()
}

/// Requests per second of `GET url` from 8 concurrent client tasks for `secs`; every answer must be 200.
pub async fn throughput(url: &str, key: &str, secs: u64) -> f64 {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (client, url, key) = (client.clone(), url.to_string(), key.to_string());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let r = client.get(&url).bearer_auth(&key).send().await.unwrap();
                assert_eq!(r.status(), 200, "{url}");
                r.bytes().await.unwrap();
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / secs as f64
}

/// A fresh database for a bench run: a new PostgreSQL database beside `url`, or a SQLite file in a
/// temporary directory (kept alive by the returned guard).
pub async fn database(url: Option<&str>) -> (String, Option<tempfile::TempDir>) {
    match url {
        Some(base) => {
            let name = format!("gymapi_bench_{}", uuid::Uuid::now_v7().simple());
            let admin = sea_orm::Database::connect(base).await.unwrap();
            admin.execute_unprepared(&format!("CREATE DATABASE \"{name}\"")).await.unwrap();
            let mut u = url::Url::parse(base).unwrap();
            u.set_path(&format!("/{name}"));
            (u.to_string(), None)
        }
        None => {
            let dir = tempfile::tempdir().unwrap();
            (format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display()), Some(dir))
        }
    }
}

/// Drops a PostgreSQL database [`database`] made (`base` is the server's URL it was made beside).
pub async fn drop_database(base: &str, url: &str) {
    let name = url::Url::parse(url).unwrap().path().trim_start_matches('/').to_string();
    let admin = sea_orm::Database::connect(base).await.unwrap();
    let _ = admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await;
}
