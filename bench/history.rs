//! The cost of a request as one gym's history grows (`bench/history` runs it per backend): one gym
//! with 10,000 members whose check-ins grow step by step through the import API, and at each step
//! the cost of the lists a partner's sync asks for, one request at a time (median of `--samples`).
//!
//!     DATABASE_URL=... [REDIS_URL=...] cargo run --release --example bench-history -- \
//!         --steps 10000,100000,1000000 [--samples 7] [--walk-limit-secs 300] [--out FILE.json] [--start N]
//!
//! The check-ins go back in time 30 s apart from now (ten million of them span nine and a half
//! years), one in twenty denied, each of one member in turn but for one in fifty, which is the
//! regular's (`M0`, whose page is full at every size), in 500-row batches, two at a time.
//! A step's import rate is the rate of its last 20,000 rows (all of them in a smaller step): the
//! rate with that much history already present; `import_step_rows_per_s` is the step's average.
//! On PostgreSQL each step ends with `VACUUM ANALYZE`, as autovacuum would after a bulk load, and
//! a long step vacuums the members every 250,000 check-ins, as autovacuum would meanwhile, its
//! time counted in the rate (this machine runs without autovacuum; every check-in updates its
//! member's counts, and without vacuum the members' table keeps every old version: the members'
//! search took 110 ms at 1,000,000 check-ins).
//!
//! `--start N` goes on growing the gym of an earlier run whose database holds N check-ins.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

#[path = "support.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const MEMBERS: usize = 10_000;
const BATCH: usize = 500;
const JOBS: usize = 2;
const PER_PAGE: usize = 100;
/// The check-ins whose import is timed at each size: the last of the step's rows (all of them
/// when the step adds fewer), so that a step's rate is the rate with that much history present.
const PROBE: usize = 20_000;

struct Args {
    steps: Vec<usize>,
    samples: usize,
    walk_limit: Duration,
    out: Option<String>,
    start: usize,
}

fn args() -> Args {
    let mut a =
        Args { steps: vec![10_000, 100_000], samples: 7, walk_limit: Duration::from_secs(300), out: None, start: 0 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--steps" => a.steps = value.split(',').map(|s| s.trim().parse().expect("--steps: numbers")).collect(),
            "--samples" => a.samples = value.parse().expect("--samples: a number"),
            "--walk-limit-secs" => a.walk_limit = Duration::from_secs(value.parse().expect("a number")),
            "--out" => a.out = Some(value),
            "--start" => a.start = value.parse().expect("--start: a number"),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// One check-in in this many is the regular's (`M0`): a member whose page is full at every size,
/// where a member taken in turn has one check-in at 10,000 and a hundred at 1,000,000.
const REGULAR_EVERY: usize = 50;

fn check_in(n: usize) -> Value {
    let at = chrono::Utc::now() - chrono::Duration::seconds(30 * n as i64);
    let member = if n % REGULAR_EVERY == REGULAR_EVERY / 2 { 0 } else { n % MEMBERS };
    json!({
        "legacy_id": format!("A{n}"),
        "member_legacy_id": format!("M{member}"),
        "occurred_at": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "status": if n % 20 == 0 { "denied" } else { "granted" },
    })
}

fn member(n: usize) -> Value {
    let first = ["Ada", "Grace", "Alan", "Linus", "Margaret", "Ken", "Barbara", "Dennis"][n % 8];
    json!({"legacy_id": format!("M{n}"), "first_name": first, "last_name": format!("Member{n}"),
           "email": format!("member{n}@example.com")})
}

/// Imports rows `from..to` of `row` to `/import/{entity}`; returns rows per second.
async fn import(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    entity: &str,
    range: std::ops::Range<usize>,
    row: fn(usize) -> Value,
) -> f64 {
    let url = format!("{base}/api/v1/import/{entity}");
    let started = Instant::now();
    let rows = range.len();
    let mut starts = range.clone().step_by(BATCH);
    loop {
        let mut set = tokio::task::JoinSet::new();
        for start in starts.by_ref().take(JOBS) {
            let body = json!({"rows": (start..(start + BATCH).min(range.end)).map(row).collect::<Vec<_>>()});
            let (client, url, key) = (client.clone(), url.clone(), key.to_string());
            set.spawn(async move {
                let r = client.post(&url).bearer_auth(&key).json(&body).send().await.unwrap();
                let status = r.status();
                assert!(status.is_success(), "{url}: {status} {}", r.text().await.unwrap());
            });
        }
        if set.is_empty() {
            break;
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }
    }
    rows as f64 / started.elapsed().as_secs_f64()
}

/// Check-ins that go in between two `VACUUM members` on PostgreSQL, as autovacuum would clear
/// the members' old versions during a long import (this machine runs without it).
const VACUUM_EVERY: usize = 250_000;

/// Imports check-ins `range` in parts of [`VACUUM_EVERY`], vacuuming the members after each on
/// PostgreSQL (`db`); returns rows per second, the vacuums' time included.
async fn import_check_ins(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    range: std::ops::Range<usize>,
    db: Option<&sea_orm::DatabaseConnection>,
) -> f64 {
    use sea_orm::ConnectionTrait;
    let started = Instant::now();
    let rows = range.len();
    for from in range.clone().step_by(VACUUM_EVERY) {
        let to = (from + VACUUM_EVERY).min(range.end);
        import(client, base, key, "attendance", from..to, check_in).await;
        if let (Some(db), true) = (db, to < range.end) {
            db.execute_unprepared("VACUUM members").await.unwrap();
        }
    }
    rows as f64 / started.elapsed().as_secs_f64()
}

/// One timed `GET`, its body.
async fn get(client: &reqwest::Client, url: &str, key: &str) -> (Duration, Value) {
    let started = Instant::now();
    let r = client.get(url).bearer_auth(key).send().await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    let body: Value = r.json().await.unwrap();
    (started.elapsed(), body)
}

fn median(mut d: Vec<Duration>) -> f64 {
    d.sort();
    d[d.len() / 2].as_secs_f64() * 1000.0
}

/// The medians (ms) of each list request at the current size of history.
async fn costs(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    samples: usize,
    rows: usize,
) -> Vec<(&'static str, f64)> {
    let api = format!("{base}/api/v1");
    let member = {
        let (_, first) = get(client, &format!("{api}/members?per_page=1"), key).await;
        first["data"][0]["id"].as_str().unwrap().to_string()
    };
    let regular = {
        let (_, found) = get(client, &format!("{api}/members?per_page=1&search=member0@example.com"), key).await;
        found["data"][0]["id"].as_str().unwrap().to_string()
    };
    // A day in the middle of the history, in UTC (the gym's zone).
    let day = (chrono::Utc::now() - chrono::Duration::seconds(15 * rows as i64)).date_naive();
    let plain = [
        ("page 1", format!("{api}/attendance?per_page={PER_PAGE}")),
        ("one member's page", format!("{api}/attendance?per_page={PER_PAGE}&member_id={member}")),
        ("a regular's page (full)", format!("{api}/attendance?per_page={PER_PAGE}&member_id={regular}")),
        ("status=denied", format!("{api}/attendance?per_page={PER_PAGE}&status=denied")),
        ("one day (from/to)", format!("{api}/attendance?per_page={PER_PAGE}&from={day}&to={day}")),
        ("members search", format!("{api}/members?per_page={PER_PAGE}&search=ada")),
    ];
    let mut out = Vec::new();
    for (name, url) in &plain {
        let mut t = Vec::new();
        for _ in 0..samples {
            t.push(get(client, url, key).await.0);
        }
        out.push((*name, median(t)));
    }
    let (mut by_link, mut by_number, mut middle) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples {
        let (_, first) = get(client, &format!("{api}/attendance?per_page={PER_PAGE}"), key).await;
        let next = first["links"]["next"].as_str().unwrap().to_string();
        by_link.push(get(client, &format!("{base}{next}"), key).await.0);
        let as_of = first["meta"]["as_of"].as_str().unwrap();
        let q =
            |page: i64| format!("{api}/attendance?per_page={PER_PAGE}&page={page}&as_of={}", as_of.replace('+', "%2B"));
        by_number.push(get(client, &q(2), key).await.0);
        let last = first["meta"]["last_page"].as_i64().unwrap();
        middle.push(get(client, &q((last / 2).max(1)), key).await.0);
    }
    out.push(("next page (links.next)", median(by_link)));
    out.push(("next page (page=N, as_of)", median(by_number)));
    out.push(("middle page by number", median(middle)));
    out
}

/// A whole walk by `links.next`: its time in seconds, or `None` when its estimate passes `limit`.
async fn walk(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    per_page_ms: f64,
    rows: usize,
    limit: Duration,
) -> Option<f64> {
    let pages = rows.div_ceil(PER_PAGE);
    if per_page_ms * pages as f64 > limit.as_secs_f64() * 1000.0 {
        return None;
    }
    let started = Instant::now();
    let mut next = Some(format!("/api/v1/attendance?per_page={PER_PAGE}"));
    let mut seen = 0;
    while let Some(path) = next {
        let (_, page) = get(client, &format!("{base}{path}"), key).await;
        seen += page["data"].as_array().unwrap().len();
        next = page["links"]["next"].as_str().map(str::to_string);
    }
    assert_eq!(seen, rows, "the walk saw every check-in once");
    Some(started.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() {
    let a = args();
    let url = std::env::var("DATABASE_URL").expect("set DATABASE_URL");
    let redis = std::env::var("REDIS_URL").ok().filter(|r| !r.is_empty());
    let mut config = support::config(&url, redis.as_deref());
    config.webhook_dispatch = false;
    let (state, db) = support::state(config).await;
    let base = support::serve(state).await;
    let key = match a.start {
        0 => support::live_key(&db, "History").await,
        _ => support::existing_key(&db, "History").await,
    };
    let client = reqwest::Client::new();
    if a.start == 0 {
        import(&client, &base, &key, "members", 0..MEMBERS, member).await;
    }
    let postgres = url.starts_with("postgres");
    let mut steps = Vec::new();
    let mut have = a.start;
    for &target in &a.steps {
        let probe_from = target.saturating_sub(PROBE).max(have);
        let average = import_check_ins(&client, &base, &key, have..probe_from, postgres.then_some(&db)).await;
        let rate = import(&client, &base, &key, "attendance", probe_from..target, check_in).await;
        let added = (target - have) as f64;
        let step_rate = if probe_from > have {
            added / ((probe_from - have) as f64 / average + (target - probe_from) as f64 / rate)
        } else {
            rate
        };
        have = target;
        if postgres {
            use sea_orm::ConnectionTrait;
            db.execute_unprepared("VACUUM ANALYZE").await.unwrap();
        }
        let costs = costs(&client, &base, &key, a.samples, have).await;
        let next_ms = costs.iter().find(|(n, _)| n.starts_with("next page (links")).map_or(f64::MAX, |c| c.1);
        let walked = walk(&client, &base, &key, next_ms, have, a.walk_limit).await;
        eprintln!("{have} rows: import {rate:.0} rows/s ({step_rate:.0} over the step), {costs:?}, walk {walked:?}");
        steps.push(json!({"rows": have, "import_rows_per_s": rate, "import_step_rows_per_s": step_rate, "walk_s": walked,
                          "costs_ms": costs.iter().map(|(n, v)| (n.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()}));
    }
    let report = json!({"database": url.split(':').next(), "redis": redis.is_some(), "per_page": PER_PAGE,
                        "samples": a.samples, "steps": steps});
    let text = serde_json::to_string_pretty(&report).unwrap();
    match a.out {
        Some(path) => std::fs::write(path, text).unwrap(),
        None => println!("{text}"),
    }
}
