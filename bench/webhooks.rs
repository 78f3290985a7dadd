//! Webhook delivery speed of one dispatcher. Not a test: figures, printed as a Markdown report.
//!
//!     cargo bench --bench webhooks                       # SQLite + in-process store
//!     BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test BENCH_REDIS_URL=redis://127.0.0.1:6379 \
//!         cargo bench --bench webhooks                   # PostgreSQL + Redis as well
//!
//! - Throughput: 2,000 `member.created` events are queued with no dispatcher running, then one
//!   dispatcher drains them to a fast receiver on loopback (answers 204 at once): deliveries/s.
//! - Lag: with the dispatcher of `serve` running, members are created one after another; the
//!   receiver notes, per event, the time from the event's `created_at` (inside the writing
//!   transaction) to its arrival: median and p99.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support.rs"]
mod support;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use gymapi::{
    accounts::{self, Actor},
    config::Config,
    context::Environment,
    webhooks::{self, dispatch::Dispatcher},
};
use poem::{
    EndpointExt, Route, handler,
    http::StatusCode,
    listener::{Acceptor, Listener, TcpListener},
    web::Data,
};
use support::{database, drop_database, ms, percentile, serve};

type Lags = Arc<Mutex<Vec<Duration>>>;

#[handler]
fn receive(body: String, lags: Data<&Lags>) -> StatusCode {
    let event: serde_json::Value = serde_json::from_str(&body).unwrap();
    let created: DateTime<Utc> = event["created_at"].as_str().unwrap().parse().unwrap();
    let lag = (Utc::now() - created).to_std().unwrap_or_default();
    lags.lock().unwrap().push(lag);
    StatusCode::NO_CONTENT
}

async fn receiver() -> (String, Lags) {
    let lags: Lags = Arc::default();
    let acceptor = TcpListener::bind("127.0.0.1:0").into_acceptor().await.unwrap();
    let addr = *acceptor.local_addr()[0].as_socket_addr().unwrap();
    let app = Route::new().at("/hook", poem::post(receive)).data(lags.clone());
    tokio::spawn(poem::Server::new_with_acceptor(acceptor).run(app));
    (format!("http://{addr}/hook"), lags)
}

async fn wait_for(lags: &Lags, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while lags.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} arrived", lags.lock().unwrap().len());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn run(label: &str, database_url: Option<&str>, redis: Option<&str>) {
    let (url, _dir) = database(database_url).await;
    let config = Config { webhook_allow_private: true, webhook_dispatch: false, ..support::config(&url, redis) };
    let (state, db) = support::state(config.clone()).await;
    let wake = state.webhooks.clone();
    let base = format!("{}/api/v1", serve(state).await);
    let gym = accounts::create_gym(&db, "Webhook bench", "UTC", true).await.unwrap();
    let key = accounts::create_key(&db, &Actor::Operator, gym.id, Environment::Live, "bench").await.unwrap().key;
    let (hook, lags) = receiver().await;
    webhooks::create_endpoint(&db, &Actor::Operator, gym.id, false, &hook, &[], true).await.unwrap();
    let client = reqwest::Client::new();
    let create = |i: usize| {
        client
            .post(format!("{base}/members"))
            .bearer_auth(&key)
            .json(&serde_json::json!({"first_name": "Hook", "last_name": format!("Member{i}")}))
            .send()
    };

    // Throughput: a backlog drained by one dispatcher.
    let n = 2_000;
    for i in 0..n {
        assert_eq!(create(i).await.unwrap().status(), 201);
    }
    let started = Instant::now();
    let dispatcher = Dispatcher::new(db.clone(), &config, wake, Default::default()).unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(dispatcher.run(async {
        let _ = stop_rx.await;
    }));
    wait_for(&lags, n).await;
    let drained = started.elapsed();

    // Lag: one change at a time with the dispatcher running (woken by the commit).
    lags.lock().unwrap().clear();
    let m = 500;
    for i in 0..m {
        assert_eq!(create(n + i).await.unwrap().status(), 201);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    wait_for(&lags, m).await;
    let _ = stop_tx.send(());
    let _ = running.await;
    let mut l = lags.lock().unwrap().clone();
    l.sort();
    println!("\n## {label}\n");
    println!("| measure | figure |");
    println!("|---|---:|");
    println!("| deliveries/s, one dispatcher draining {n} queued events | {:.0} |", n as f64 / drained.as_secs_f64());
    println!("| lag from commit to receipt, median (ms), {m} events | {} |", ms(percentile(&l, 0.5), 1));
    println!("| lag from commit to receipt, p99 (ms) | {} |", ms(percentile(&l, 0.99), 1));

    if let Some(base) = database_url {
        db.close().await.unwrap();
        drop_database(base, &url).await;
    }
}

#[tokio::main]
async fn main() {
    let pg = std::env::var("BENCH_DATABASE_URL").ok().filter(|s| !s.is_empty());
    let redis = std::env::var("BENCH_REDIS_URL").ok().filter(|s| !s.is_empty());
    println!("# gymapi webhook delivery ({})", Utc::now().format("%Y-%m-%d %H:%M UTC"));
    run("SQLite + in-process store", None, None).await;
    if let Some(pg) = pg.as_deref() {
        run("PostgreSQL + Redis", Some(pg), redis.as_deref()).await;
    }
}
