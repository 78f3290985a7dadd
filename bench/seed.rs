//! Fills a database with a realistic deployment for `bench/run`: one large gym (100,000 members,
//! 1,000,000 attendance rows, 200,000 purchases, 1,000 live keys) and 499 small gyms (40 members,
//! 200 check-ins and 40 purchases each, one key). Every member has an access card; the large gym's
//! first 1,000 members hold an unlimited pass, and it has a door. Everything goes in through the public import API of
//! an in-process server, so both backends are filled by the same code paths.
//!
//!     DATABASE_URL=... cargo run --release --example bench-seed -- --out seed.json [--scale 0.1]
//!
//! Prints nothing but progress on stderr; writes the keys and ids the scenarios need as JSON.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

#[path = "support.rs"]
mod support;

use std::time::Instant;

use gymapi::{
    accounts::{self, Actor},
    config::Config,
    context::Environment,
    state::AppState,
};
use serde_json::{Value, json};

const FIRST: [&str; 8] = ["Ada", "Grace", "Alan", "Linus", "Margaret", "Ken", "Barbara", "Dennis"];
const LAST: [&str; 10] =
    ["Lovelace", "Hopper", "Turing", "Torvalds", "Hamilton", "Thompson", "Liskov", "Ritchie", "Allen", "Dijkstra"];
const BATCH: usize = 500;
/// Batches in flight at once.
const JOBS: usize = 3;

struct Args {
    out: String,
    scale: f64,
    small_gyms: usize,
    keys: usize,
}

const USAGE: &str = "usage: DATABASE_URL=... bench-seed [--out seed.json] [--scale 1] [--small-gyms 499] [--keys 1000]";

fn args() -> Args {
    let mut a = Args { out: "seed.json".into(), scale: 1.0, small_gyms: 499, keys: 1000 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let Some(value) = it.next() else { usage(&format!("{flag} needs a value")) };
        match flag.as_str() {
            "--out" => a.out = value,
            "--scale" => a.scale = number(&flag, &value),
            "--small-gyms" => a.small_gyms = number(&flag, &value),
            "--keys" => a.keys = number(&flag, &value),
            other => usage(&format!("unknown flag {other}")),
        }
    }
    a
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> T {
    value.parse().unwrap_or_else(|_| usage(&format!("{flag} takes a number, not {value:?}")))
}

fn usage(problem: &str) -> ! {
    eprintln!("bench-seed: {problem}\n{USAGE}");
    std::process::exit(2)
}

fn member(n: usize) -> Value {
    json!({
        "legacy_id": format!("M{n}"),
        "first_name": FIRST[n % 8],
        "last_name": format!("{}{n}", LAST[(n / 8) % 10]),
        "email": format!("member{n}@example.com"),
        "city": "Berlin",
        "country": "DE",
        "status": if n % 9 == 0 { "inactive" } else { "active" },
        "access_card": format!("C{n}"),
    })
}

/// Members whose cards the door is asked about: each holds an unlimited pass (every ninth of them is
/// inactive, so the door denies them).
const DOOR_MEMBERS: usize = 1000;

fn membership(n: usize) -> Value {
    let start = chrono::Utc::now().date_naive() - chrono::Duration::days(30);
    json!({"legacy_id": format!("MS{n}"), "member_legacy_id": format!("M{n}"), "plan_legacy_id": "P-UNL",
           "starts_on": start.to_string()})
}

/// The front desk of the large gym: an unlimited pass for its first members, and a door.
async fn front_desk(base: &str, key: &str, members: usize) -> (String, usize) {
    let plan = json!({"legacy_id": "P-UNL", "kind": "membership", "name": "Unlimited",
                      "price": {"amount": 4900, "currency": "EUR"}});
    import(base, key, "plans", 1, |_| plan.clone()).await;
    let holders = members.min(DOOR_MEMBERS);
    import(base, key, "memberships", holders, membership).await;
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{base}/api/v1/devices/devices"))
        .bearer_auth(key)
        .json(&json!({"kind": "door", "name": "Main entrance"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let door: Value = r.json().await.unwrap();
    (door["id"].as_str().unwrap().to_string(), holders)
}

fn check_in(n: usize, members: usize) -> Value {
    let at = chrono::Utc::now() - chrono::Duration::seconds(30 * n as i64);
    json!({
        "legacy_id": format!("A{n}"),
        "member_legacy_id": format!("M{}", n % members),
        "occurred_at": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "status": if n % 20 == 0 { "denied" } else { "granted" },
    })
}

fn purchase(n: usize, members: usize) -> Value {
    let status = ["paid", "paid", "paid", "paid", "pending", "failed", "refunded"][n % 7];
    let at = chrono::Utc::now() - chrono::Duration::seconds(120 * n as i64);
    json!({
        "legacy_id": format!("S{n}"),
        "member_legacy_id": format!("M{}", n % members),
        "description": "Day pass",
        "total": {"amount": 1200 + (n % 7) * 100, "currency": "EUR"},
        "payment_status": status,
        "purchased_at": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

/// Sends `count` rows made by `row` to `/import/{entity}` in 500-row batches, `JOBS` at a time.
async fn import(base: &str, key: &str, entity: &str, count: usize, row: impl Fn(usize) -> Value) {
    let client = reqwest::Client::new();
    let url = format!("{base}/api/v1/import/{entity}");
    let started = Instant::now();
    let mut batches: Vec<Value> = Vec::new();
    for start in (0..count).step_by(BATCH) {
        batches.push(json!({"rows": (start..(start + BATCH).min(count)).map(&row).collect::<Vec<_>>()}));
    }
    let mut pending = batches.into_iter();
    loop {
        let mut set = tokio::task::JoinSet::new();
        for body in pending.by_ref().take(JOBS) {
            let (client, url, key) = (client.clone(), url.clone(), key.to_string());
            set.spawn(async move {
                let r = client.post(&url).bearer_auth(&key).json(&body).send().await.unwrap();
                let status = r.status();
                let text = r.text().await.unwrap();
                assert!(status.is_success(), "{url}: {status} {text}");
            });
        }
        if set.is_empty() {
            break;
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }
    }
    if count >= 10_000 {
        eprintln!("  {entity}: {count} rows in {:.1} s", started.elapsed().as_secs_f64());
    }
}

#[tokio::main]
async fn main() {
    let a = args();
    let Ok(url) = std::env::var("DATABASE_URL") else { usage("set DATABASE_URL") };
    let config = Config {
        database_url: url.clone(),
        rate_limit_per_minute: 10_000_000,
        device_rate_limit_per_minute: 10_000_000,
        webhook_dispatch: false,
        ..Config::default()
    };
    let db = gymapi::db::connect(&url).await.unwrap();
    gymapi::db::migrate(&db).await.unwrap();
    let state = AppState::new(db.clone(), config).await.unwrap();
    let base = support::serve(state.clone()).await;
    let n = |x: f64| ((x * a.scale) as usize).max(1);
    let (members, attendance, purchases) = (n(100_000.0), n(1_000_000.0), n(200_000.0));

    let started = Instant::now();
    let big = accounts::create_gym(&db, "Bench Big Gym", "Europe/Berlin", true).await.unwrap();
    let mut keys = Vec::with_capacity(a.keys);
    for i in 0..a.keys {
        let k = accounts::create_key(&db, &Actor::Operator, big.id, Environment::Live, &format!("bench {i}")).await;
        keys.push(k.unwrap().key);
    }
    let key = keys[0].clone();
    eprintln!("seeding the large gym: {members} members, {attendance} check-ins, {purchases} purchases");
    import(&base, &key, "members", members, member).await;
    import(&base, &key, "attendance", attendance, |i| check_in(i, members)).await;
    import(&base, &key, "purchases", purchases, |i| purchase(i, members)).await;
    let (door_id, card_holders) = front_desk(&base, &key, members).await;

    eprintln!("seeding {} small gyms", a.small_gyms);
    let mut small = Vec::with_capacity(a.small_gyms);
    for g in 0..a.small_gyms {
        let gym = accounts::create_gym(&db, &format!("Bench Gym {g}"), "Europe/Berlin", true).await.unwrap();
        let k = accounts::create_key(&db, &Actor::Operator, gym.id, Environment::Live, "bench").await.unwrap();
        import(&base, &k.key, "members", 40, member).await;
        import(&base, &k.key, "attendance", 200, |i| check_in(i, 40)).await;
        import(&base, &k.key, "purchases", 40, |i| purchase(i, 40)).await;
        small.push(json!({"gym_id": gym.id, "key": k.key}));
    }

    // A member of the large gym for `GET /members/{id}`, and a gym kept empty for the import runs.
    let client = reqwest::Client::new();
    let page = support::get_json(&client, &format!("{base}/api/v1/members?per_page=1&page=50"), &key).await;
    let member_id = page["data"][0]["id"].as_str().expect("a member").to_string();
    let empty = accounts::create_gym(&db, "Bench Import Gym", "Europe/Berlin", true).await.unwrap();
    let import_key = accounts::create_key(&db, &Actor::Operator, empty.id, Environment::Live, "import").await.unwrap();
    // A key no scenario has used, for the run that shows the limiter at its default.
    let limiter_key = accounts::create_key(&db, &Actor::Operator, big.id, Environment::Live, "limiter").await.unwrap();
    let out = json!({
        "gym_id": big.id,
        "key": key,
        "keys": keys,
        "member_id": member_id,
        "door_id": door_id,
        "card_holders": card_holders,
        "members": members,
        "attendance": attendance,
        "purchases": purchases,
        "small_gyms": small,
        "import_gym_id": empty.id,
        "import_key": import_key.key,
        "limiter_key": limiter_key.key,
        "seconds": started.elapsed().as_secs_f64(),
    });
    std::fs::write(&a.out, serde_json::to_vec_pretty(&out).unwrap()).unwrap();
    eprintln!("seeded in {:.0} s; wrote {}", started.elapsed().as_secs_f64(), a.out);
}
