//! Bulk import speed. Not a test: figures, printed as a Markdown report.
//!
//!     cargo bench --bench import                         # SQLite + in-process store
//!     BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test BENCH_REDIS_URL=redis://127.0.0.1:6379 \
//!         cargo bench --bench import                     # PostgreSQL + Redis as well
//!
//! Per backend:
//! - time of one 500-row `POST /import/members` batch (new rows), and of the same batch resent
//!   (every row skipped), and of a 500-row attendance batch: median and p99 over sequential batches
//!   on one keep-alive connection, as the client sees it on loopback;
//! - the `gymapi import` client end to end: 100,000 members from a CSV file, limit raised, with one
//!   and with two batches in flight;
//! - with `BENCH_LIMITED=1`: the client against the default 120 requests/min, which it must ride
//!   out (every 429 waited for, no batch failed).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support.rs"]
mod support;

use std::time::{Duration, Instant};

use gymapi::config::Config;
use serde_json::{Value, json};
use support::{database, drop_database, ms, percentile, serve};

const BATCHES: usize = 60;

struct Target {
    base: String,
    db: sea_orm::DatabaseConnection,
}

async fn start(database_url: &str, redis: Option<&str>, limit: u32) -> Target {
    let (state, db) =
        support::state(Config { rate_limit_per_minute: limit, ..support::config(database_url, redis) }).await;
    Target { base: format!("{}/api/v1", serve(state).await), db }
}

fn members(batch: usize) -> Value {
    let rows: Vec<Value> = (0..500)
        .map(|i| {
            let n = batch * 500 + i;
            json!({"legacy_id": format!("M-{n}"), "first_name": format!("First{n}"), "last_name": "Member",
                   "email": format!("member{n}@example.com"), "phone": "+49 30 1234567", "city": "Berlin",
                   "date_of_birth": "1990-05-17"})
        })
        .collect();
    json!({ "rows": rows })
}

fn checkins(batch: usize) -> Value {
    let rows: Vec<Value> = (0..500)
        .map(|i| {
            let n = batch * 500 + i;
            json!({"legacy_id": format!("A-{n}"), "member_legacy_id": format!("M-{}", (n * 7) % (BATCHES * 500)),
                   "occurred_at": format!("2025-{:02}-{:02}T07:{:02}:00Z", 1 + n % 12, 1 + n % 28, n % 60)})
        })
        .collect();
    json!({ "rows": rows })
}

/// Median and p99 of sequential batches.
async fn batches(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    n: usize,
    body: impl Fn(usize) -> Value,
) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let body = body(i).to_string();
        let started = Instant::now();
        let r = client
            .post(url)
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        times.push(started.elapsed());
        assert_eq!(status, 200, "{text}");
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn csv_file(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let mut text = String::from("legacy_id,first_name,last_name,email,city\n");
    for i in 0..n {
        text.push_str(&format!("C-{i},Client{i},Member,client{i}@example.com,Hamburg\n"));
    }
    let path = dir.join("members.csv");
    std::fs::write(&path, text).unwrap();
    path
}

fn client_run(base: &str, key: &str, file: &std::path::Path, jobs: usize) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gymapi"))
        .args(["import", "--base-url", base, "--entity", "members", "--json", "--jobs", &jobs.to_string()])
        .arg(file)
        .env("GYMAPI_KEY", key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn run(label: &str, database_url: Option<&str>, redis: Option<&str>) {
    let (url, _dir) = database(database_url).await;
    let t = start(&url, redis, u32::MAX / 2).await;
    let client = reqwest::Client::new();
    let k = support::live_key(&t.db, "Import bench").await;
    println!("\n## {label}\n");
    println!("| scenario | median ms | p99 ms | rows/s at the median |");
    println!("|---|---:|---:|---:|");
    let row = |name: &str, (p50, p99): (Duration, Duration)| {
        println!("| {name} | {} | {} | {:.0} |", ms(p50, 1), ms(p99, 1), 500.0 / p50.as_secs_f64());
    };
    let new = batches(&client, &format!("{}/import/members", t.base), &k, BATCHES, members).await;
    row("500 new members", new);
    let resent = batches(&client, &format!("{}/import/members", t.base), &k, BATCHES, members).await;
    row("the same 500 members resent (all skipped)", resent);
    let att = batches(&client, &format!("{}/import/attendance", t.base), &k, BATCHES, checkins).await;
    row("500 check-ins (member lookups, visit counts)", att);
    println!("\nA resent batch is {:.1}x faster than the first.", new.0.as_secs_f64() / resent.0.as_secs_f64());

    let dir = tempfile::tempdir().unwrap();
    let file = csv_file(dir.path(), 100_000);
    let server = t.base.trim_end_matches("/api/v1");
    println!("\n`gymapi import` client, 100,000 members from CSV, limit raised:\n");
    println!("| batches in flight | seconds | rows/s | created |");
    println!("|---:|---:|---:|---:|");
    for jobs in [1, 2] {
        let k = support::live_key(&t.db, &format!("Client bench {jobs}")).await;
        let s = client_run(server, &k, &file, jobs);
        println!("| {jobs} | {} | {} | {} |", s["seconds"], s["rows_per_second"], s["created"]);
    }

    if std::env::var("BENCH_LIMITED").is_ok_and(|v| v == "1") {
        let limited = start(&url, redis, 120).await;
        let k = support::live_key(&limited.db, "Limited").await;
        let s = client_run(limited.base.trim_end_matches("/api/v1"), &k, &file, 1);
        println!(
            "\nAt the default 120 requests/min: {} rows in {} batches, {} s ({} rows/s), {} waits for 429, {} retries of errors, created {}.",
            s["rows"], s["batches"], s["seconds"], s["rows_per_second"], s["rate_limited"], s["retried"], s["created"]
        );
    }
    if let Some(base) = database_url {
        t.db.close().await.unwrap();
        drop_database(base, &url).await;
    }
}

#[tokio::main]
async fn main() {
    let pg = std::env::var("BENCH_DATABASE_URL").ok().filter(|s| !s.is_empty());
    let redis = std::env::var("BENCH_REDIS_URL").ok().filter(|s| !s.is_empty());
    println!("# gymapi bulk import ({})", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"));
    run("SQLite + in-process store", None, None).await;
    if let Some(pg) = pg.as_deref() {
        run("PostgreSQL + Redis", Some(pg), redis.as_deref()).await;
    }
}
