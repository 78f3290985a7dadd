//! Sales at the counter against a running gymapi, for `bench/run`: registers a kiosk, `--lanes`
//! card terminals and as many fiscal printers, and imports a product, through the APIs; then
//! `--lanes` lanes sell in a loop for `--secs` seconds, each sale the five requests of the counter
//! (the kiosk's order, a terminal taking the next payment and approving it, a printer taking the
//! next receipt and reporting it printed), every write with an `Idempotency-Key`. Not a test.
//!
//!     bench-counter --base http://127.0.0.1:8080 --key svc_live_... [--lanes 8] [--secs 10]
//!
//! Prints one JSON line: sales completed, sales per second, and the p50, p99 and slowest of a
//! whole sale (order to printed), in milliseconds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

#[path = "support.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::percentile;

struct Args {
    base: String,
    key: String,
    lanes: usize,
    secs: u64,
}

fn args() -> Args {
    let mut a = Args { base: String::new(), key: String::new(), lanes: 8, secs: 10 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--base" => a.base = value,
            "--key" => a.key = value,
            "--lanes" => a.lanes = value.parse().unwrap(),
            "--secs" => a.secs = value.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!a.base.is_empty() && !a.key.is_empty(), "--base and --key are required");
    a
}

/// Both APIs with one key.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Client {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut r = self.http.request(method.clone(), format!("{}/api/v1{path}", self.base)).bearer_auth(&self.key);
        if let Some(b) = body {
            r = r.header("Idempotency-Key", uuid::Uuid::now_v7().to_string()).json(&b);
        }
        let r = r.send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {body}");
        body
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Value {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn register(&self, kind: &str, name: &str) -> String {
        let d = self.post("/devices/devices", json!({"kind": kind, "name": name})).await;
        d["id"].as_str().unwrap().to_string()
    }
}

/// One lane: a terminal and a printer of its own, selling until `until`. Returns each sale's time.
async fn lane(
    c: Client,
    kiosk: String,
    product: String,
    (terminal, printer): (String, String),
    until: Instant,
) -> Vec<Duration> {
    let mut times = Vec::new();
    let order = json!({"device_id": kiosk, "lines": [{"product_id": product, "quantity": 1}]});
    let approved = json!({"outcome": "approved", "card_scheme": "visa", "card_last4": "4242"});
    while Instant::now() < until {
        let started = Instant::now();
        c.post("/devices/orders", order.clone()).await;
        // The next payment of the facility (another lane's, maybe; at the end, none may be left).
        let payment = c.get(&format!("/devices/terminals/{terminal}/jobs?wait=5")).await;
        let Some(job) = payment["data"][0]["id"].as_str().map(str::to_string) else { continue };
        c.post(&format!("/devices/terminals/{terminal}/jobs/{job}/report"), approved.clone()).await;
        let receipt = c.get(&format!("/devices/printers/{printer}/jobs?wait=5")).await;
        let Some(job) = receipt["data"][0]["id"].as_str().map(str::to_string) else { continue };
        c.post(&format!("/devices/printers/{printer}/jobs/{job}/report"), json!({"outcome": "printed"})).await;
        times.push(started.elapsed());
    }
    times
}

#[tokio::main]
async fn main() {
    let a = args();
    let c = Client { http: reqwest::Client::new(), base: a.base.clone(), key: a.key.clone() };
    let row = json!({"legacy_id": format!("BENCH-{}", uuid::Uuid::now_v7()), "name": "Bench bar",
                     "price": {"amount": 250, "currency": "EUR"}});
    c.post("/import/products", json!({"rows": [row]})).await;
    let products = c.get("/products?per_page=100").await;
    let product = products["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Bench bar")
        .map(|p| p["id"].as_str().unwrap().to_string())
        .unwrap();
    let kiosk = c.register("kiosk", "Bench kiosk").await;
    let mut lanes = Vec::new();
    for i in 0..a.lanes {
        let terminal = c.register("card_terminal", &format!("Bench terminal {i}")).await;
        let printer = c.register("fiscal_printer", &format!("Bench printer {i}")).await;
        lanes.push((terminal, printer));
    }
    // A second's warm-up, then the run.
    let warm = Instant::now() + Duration::from_secs(1);
    futures_util::future::join_all(
        lanes.iter().cloned().map(|l| lane(c.clone(), kiosk.clone(), product.clone(), l, warm)),
    )
    .await;
    let started = Instant::now();
    let until = started + Duration::from_secs(a.secs);
    let runs = lanes.into_iter().map(|l| tokio::spawn(lane(c.clone(), kiosk.clone(), product.clone(), l, until)));
    let mut times: Vec<Duration> = Vec::new();
    for r in futures_util::future::join_all(runs).await {
        times.extend(r.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    times.sort();
    assert!(!times.is_empty(), "no sale completed");
    let millis = |d: Duration| d.as_secs_f64() * 1000.0;
    let out = json!({
        "sales": times.len(),
        "sales_per_sec": times.len() as f64 / elapsed,
        "p50_ms": millis(percentile(&times, 0.50)),
        "p99_ms": millis(percentile(&times, 0.99)),
        "max_ms": millis(times.last().copied().unwrap_or_default()),
        "lanes": a.lanes,
    });
    println!("{out}");
}
