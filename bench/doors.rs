//! Doors waiting on one server, for `bench/run`: registers a doorbell and `--doors` doors through
//! the device API of a running gymapi, keeps one long poll waiting per door (`wait=25`, polled
//! again as soon as it answers), then opens doors from the front desk and times each command from
//! the desk's request to its arrival at the door. Not a test.
//!
//!     bench-doors --base http://127.0.0.1:8080 --key svc_live_... [--doors 2000] [--idle 10] [--commands 200]
//!
//! Prints `registered` when the devices are, `ready` once every poll is waiting, `idle-done` after `--idle` seconds without traffic
//! (the harness reads the server's CPU time and memory between the two), then one JSON line of the
//! command latencies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

#[path = "support.rs"]
mod support;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use support::{ms, percentile};

struct Args {
    base: String,
    key: String,
    doors: usize,
    idle: u64,
    commands: usize,
}

fn args() -> Args {
    let mut a = Args { base: String::new(), key: String::new(), doors: 2000, idle: 10, commands: 200 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--base" => a.base = value,
            "--key" => a.key = value,
            "--doors" => a.doors = value.parse().unwrap(),
            "--idle" => a.idle = value.parse().unwrap(),
            "--commands" => a.commands = value.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!a.base.is_empty() && !a.key.is_empty(), "--base and --key are required");
    a
}

/// The device API with one key.
#[derive(Clone)]
struct Desk {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Desk {
    async fn post(&self, path: &str, body: Value) -> Value {
        let r = self.client.post(format!("{}/api/v1/devices{path}", self.base)).bearer_auth(&self.key).json(&body);
        let r = r.send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert!(status.is_success(), "POST {path}: {status} {body}");
        body
    }

    async fn register(&self, kind: &str, name: String) -> String {
        self.post("/devices", json!({"kind": kind, "name": name})).await["id"].as_str().unwrap().to_string()
    }
}

/// When each command reached its door.
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

/// One door: polls for its commands for as long as the process runs, notes each arrival, and
/// acknowledges it.
async fn door(desk: Desk, id: String, arrivals: Arrivals) {
    let url = format!("{}/api/v1/devices/doors/{id}/commands?wait=25", desk.base);
    loop {
        let r = desk.client.get(&url).bearer_auth(&desk.key).send().await;
        let Ok(r) = r else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let batch: Value = r.json().await.unwrap_or(Value::Null);
        let at = Instant::now();
        for c in batch["data"].as_array().into_iter().flatten() {
            let command = c["id"].as_str().unwrap().to_string();
            arrivals.lock().unwrap().insert(command.clone(), at);
            desk.post(&format!("/doors/{id}/commands/{command}/ack"), json!({"outcome": "executed"})).await;
        }
    }
}

#[tokio::main]
async fn main() {
    let a = args();
    let client = reqwest::Client::builder().pool_max_idle_per_host(a.doors + 16).build().unwrap();
    let desk = Desk { client, base: a.base.clone(), key: a.key.clone() };
    let bell = desk.register("doorbell", "Bench bell".into()).await;
    let mut doors = Vec::with_capacity(a.doors);
    for chunk in (0..a.doors).collect::<Vec<_>>().chunks(16) {
        let made = chunk.iter().map(|i| desk.register("door", format!("Bench door {i}")));
        doors.extend(futures_util::future::join_all(made).await);
    }
    println!("registered");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let arrivals: Arrivals = Arc::default();
    for id in &doors {
        tokio::spawn(door(desk.clone(), id.clone(), arrivals.clone()));
    }
    // Every poll has been asked and found nothing by then.
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!("ready");
    tokio::time::sleep(Duration::from_secs(a.idle)).await;
    println!("idle-done");

    let mut sent = Vec::with_capacity(a.commands);
    for i in 0..a.commands {
        let ring = desk.post(&format!("/doorbells/{bell}/rings"), json!({})).await;
        let ring = ring["id"].as_str().unwrap().to_string();
        let target = &doors[(i * 7919) % doors.len()];
        let asked = Instant::now();
        let opened = desk.post(&format!("/rings/{ring}/open"), json!({"door_id": target})).await;
        sent.push((opened["command_id"].as_str().unwrap().to_string(), asked));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let arrived = arrivals.lock().unwrap().clone();
    let mut lags: Vec<Duration> =
        sent.iter().filter_map(|(c, asked)| arrived.get(c).map(|at| at.duration_since(*asked))).collect();
    lags.sort();
    let (p50, p99, max) = if lags.is_empty() {
        (Duration::ZERO, Duration::ZERO, Duration::ZERO)
    } else {
        (percentile(&lags, 0.5), percentile(&lags, 0.99), lags[lags.len() - 1])
    };
    println!(
        "{}",
        json!({
            "doors": doors.len(),
            "commands": sent.len(),
            "delivered": lags.len(),
            "p50_ms": ms(p50, 2).parse::<f64>().unwrap(),
            "p99_ms": ms(p99, 2).parse::<f64>().unwrap(),
            "max_ms": ms(max, 2).parse::<f64>().unwrap(),
        })
    );
    std::process::exit(0);
}
