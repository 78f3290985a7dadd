//! List, search and statistics at scale on PostgreSQL: one gym with 100,000 members, 1,000,000
//! attendance rows, 200,000 sales and 50,000 memberships, plus 50 small gyms as noise. Not a test.
//!
//!     BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test [BENCH_REDIS_URL=redis://127.0.0.1:6379] \
//!         cargo bench --bench resources
//!
//! Prints a Markdown report: latency (sequential, one connection) and throughput (8 concurrent
//! client tasks) per scenario, and the plans PostgreSQL chooses for the queries behind them.
//! `BENCH_KEEP=1` keeps the database for a look with psql.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support.rs"]
mod support;

use std::time::{Duration, Instant};

use entity::ids::GymId;
use gymapi::{
    accounts::{self, Actor},
    config::Config,
    context::Environment,
    state::AppState,
};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use support::{ms, percentile, serve, throughput};
use uuid::Uuid;

const MEMBERS: i64 = 100_000;
const ATTENDANCE: i64 = 1_000_000;
const PURCHASES: i64 = 200_000;
const MEMBERSHIPS: i64 = 50_000;
const NOISE_GYMS: usize = 50;

async fn exec(db: &DatabaseConnection, sql: &str) {
    db.execute_unprepared(sql).await.unwrap_or_else(|e| panic!("{e}\n{sql}"));
}

/// Fills a gym with `members` members and proportional activity, set-based in SQL.
async fn seed_gym(
    db: &DatabaseConnection,
    gym: GymId,
    members: i64,
    attendance: i64,
    purchases: i64,
    memberships: i64,
) {
    let facility = accounts::first_facility(db, gym).await.unwrap().unwrap().id;
    exec(db, &format!(
        "INSERT INTO members (id, gym_id, facility_id, first_name, last_name, email, email_normalized, phone, gender, date_of_birth, \
         city, country, status, legacy_id, visits_count, last_visit_at, created_at, updated_at, search_text) \
         SELECT gen_random_uuid(), '{gym}', '{facility}', f, l, e, e, NULL, NULL, NULL, 'Berlin', 'DE', \
                CASE WHEN g % 9 = 0 THEN 'inactive' ELSE 'active' END, 'L' || g, 0, NULL, t, t, lower(f || ' ' || l || chr(10) || e) \
         FROM (SELECT g, (ARRAY['Ada','Grace','Alan','Linus','Margaret','Ken','Barbara','Dennis'])[1 + g % 8] AS f, \
                      (ARRAY['Lovelace','Hopper','Turing','Torvalds','Hamilton','Thompson','Liskov','Ritchie','Allen','Dijkstra'])[1 + (g / 8) % 10] || g AS l, \
                      'member' || g || '@example.com' AS e, now() - make_interval(secs => g * 300) AS t \
               FROM generate_series(1, {members}) g) s"
    )).await;
    exec(db, "DROP TABLE IF EXISTS bench_mids").await;
    exec(db, &format!("CREATE UNLOGGED TABLE bench_mids AS SELECT id, row_number() OVER () AS rn FROM members WHERE gym_id = '{gym}'")).await;
    exec(db, &format!(
        "INSERT INTO attendance (id, gym_id, facility_id, member_id, kind, status, occurred_at, legacy_id, created_at, updated_at) \
         SELECT gen_random_uuid(), '{gym}', '{facility}', m.id, CASE WHEN g % 3 = 0 THEN 'access' ELSE 'check_in' END, \
                CASE WHEN g % 20 = 0 THEN 'denied' ELSE 'granted' END, t, NULL, t, t \
         FROM (SELECT g, now() - make_interval(secs => g * 30) AS t FROM generate_series(1, {attendance}) g) s \
         JOIN bench_mids m ON m.rn = 1 + (s.g % {members})"
    )).await;
    exec(db, &format!(
        "INSERT INTO purchases (id, gym_id, member_id, product_id, description, quantity, total_amount, currency, payment_status, purchased_at, legacy_id, created_at, updated_at) \
         SELECT gen_random_uuid(), '{gym}', m.id, NULL, 'Day pass', 1, 1200 + (g % 7) * 100, 'EUR', \
                (ARRAY['paid','paid','paid','paid','pending','failed','refunded'])[1 + g % 7], t, NULL, t, t \
         FROM (SELECT g, now() - make_interval(secs => g * 120) AS t FROM generate_series(1, {purchases}) g) s \
         JOIN bench_mids m ON m.rn = 1 + (s.g % {members})"
    )).await;
    exec(db, &format!(
        "INSERT INTO member_memberships (id, gym_id, member_id, membership_plan_id, subscription_plan_id, starts_on, ends_on, legacy_id, created_at, updated_at) \
         SELECT gen_random_uuid(), '{gym}', m.id, NULL, NULL, current_date - (g % 400), \
                CASE WHEN g % 4 = 0 THEN NULL ELSE current_date - (g % 400) + 365 END, NULL, now(), now() \
         FROM generate_series(1, {memberships}) g JOIN bench_mids m ON m.rn = 1 + (g % {members})"
    )).await;
    exec(db, "DROP TABLE bench_mids").await;
    gymapi::counters::recount(db, gym).await.unwrap();
}

async fn latency(client: &reqwest::Client, url: &str, key: &str, n: usize) -> (Duration, Duration, serde_json::Value) {
    let mut last = serde_json::Value::Null;
    for _ in 0..n / 10 {
        client.get(url).bearer_auth(key).send().await.unwrap().bytes().await.unwrap();
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let r = client.get(url).bearer_auth(key).send().await.unwrap();
        assert_eq!(r.status(), 200, "{url}");
        last = r.json().await.unwrap();
        times.push(started.elapsed());
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99), last)
}

async fn explain(db: &DatabaseConnection, title: &str, sql: &str) {
    let rows = db
        .query_all(Statement::from_string(
            sea_orm::DatabaseBackend::Postgres,
            format!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}"),
        ))
        .await
        .unwrap();
    println!("\n**{title}**\n\n```");
    for r in rows {
        println!("{}", r.try_get::<String>("", "QUERY PLAN").unwrap());
    }
    println!("```");
}

#[tokio::main]
async fn main() {
    let Some(base) = std::env::var("BENCH_DATABASE_URL").ok().filter(|s| !s.is_empty()) else {
        println!("set BENCH_DATABASE_URL to a PostgreSQL URL");
        return;
    };
    let redis = std::env::var("BENCH_REDIS_URL").ok().filter(|s| !s.is_empty());
    let name = format!("gymapi_bench_{}", Uuid::now_v7().simple());
    let admin = sea_orm::Database::connect(&base).await.unwrap();
    exec(&admin, &format!("CREATE DATABASE \"{name}\"")).await;
    let mut url = url::Url::parse(&base).unwrap();
    url.set_path(&format!("/{name}"));
    let db = gymapi::db::connect(url.as_str()).await.unwrap();
    gymapi::db::migrate(&db).await.unwrap();

    let started = Instant::now();
    let gym = accounts::create_gym(&db, "Big gym", "Europe/Berlin", true).await.unwrap();
    seed_gym(&db, gym.id, MEMBERS, ATTENDANCE, PURCHASES, MEMBERSHIPS).await;
    let mut small = None;
    for i in 0..NOISE_GYMS {
        let g = accounts::create_gym(&db, &format!("Noise {i}"), "UTC", true).await.unwrap();
        seed_gym(&db, g.id, 1_000, 5_000, 1_000, 500).await;
        small.get_or_insert(g.id);
    }
    let small = small.unwrap();
    exec(&db, "VACUUM ANALYZE").await;
    let seeded = started.elapsed();

    let mut config = Config { database_url: url.to_string(), rate_limit_per_minute: u32::MAX / 2, ..Config::default() };
    config.redis_url = redis.clone();
    config.redis_prefix = format!("gymapi-bench:{name}:");
    let state = AppState::new(db.clone(), config).await.unwrap();
    let address = serve(state).await;
    let key = accounts::create_key(&db, &Actor::Operator, gym.id, Environment::Live, "bench").await.unwrap().key;
    let small_key = accounts::create_key(&db, &Actor::Operator, small, Environment::Live, "bench").await.unwrap().key;
    let api = format!("{address}/api/v1");
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();

    let member: String = {
        let r = support::get_json(&client, &format!("{api}/members?per_page=1&page=5000"), &key).await;
        r["data"][0]["id"].as_str().unwrap().to_string()
    };
    let today = chrono::Utc::now().date_naive();
    let month_ago = today - chrono::Duration::days(30);

    println!("# gymapi at scale on PostgreSQL ({})\n", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"));
    println!(
        "One gym with {MEMBERS} members, {ATTENDANCE} attendance rows, {PURCHASES} sales and {MEMBERSHIPS} memberships; {NOISE_GYMS} gyms of 1,000 members \
         and 5,000 attendance rows as noise. Store: {}. Seeded in {:.1} s.\n",
        if redis.is_some() { "Redis" } else { "in process" },
        seeded.as_secs_f64()
    );
    println!("| scenario | median ms | p99 ms | total reported |");
    println!("|---|---|---|---|");
    let scenarios = [
        ("GET /members (page 1, exact total)", format!("{api}/members")),
        ("GET /members?status=active (page 1)", format!("{api}/members?status=active")),
        ("GET /members?page=2000", format!("{api}/members?page=2000")),
        ("GET /members?search=torvalds12345 (one match)", format!("{api}/members?search=torvalds12345")),
        ("GET /members?search=ada (12.5% of members)", format!("{api}/members?search=ada")),
        ("GET /members?search=ada in a 1,000-member gym of the same deployment", format!("{api}/members?search=ada")),
        (
            "GET /attendance?member_id=…&from=…&to=… (30 days)",
            format!("{api}/attendance?member_id={member}&from={month_ago}&to={today}"),
        ),
        ("GET /attendance (page 1, counted)", format!("{api}/attendance")),
        ("GET /purchases?payment_status=paid", format!("{api}/purchases?payment_status=paid")),
        ("GET /statistics", format!("{api}/statistics")),
    ];
    for (name, url) in &scenarios {
        let n = if name.contains("attendance (page 1") || name.contains("search=ada") || name.contains("paid") {
            100
        } else {
            500
        };
        let key = if name.contains("1,000-member gym") { &small_key } else { &key };
        let (p50, p99, body) = latency(&client, url, key, n).await;
        let total =
            body["meta"]["total"].as_i64().map_or_else(|| body["members"]["total"].to_string(), |t| t.to_string());
        println!("| {name} | {} | {} | {total} |", ms(p50, 2), ms(p99, 2));
    }
    let page1 = throughput(&format!("{api}/members"), &key, 10).await;
    let by_id = throughput(&format!("{api}/members/{member}"), &key, 5).await;
    println!(
        "\nThroughput, 8 concurrent client tasks in the same process: `GET /members` page 1 with exact total **{page1:.0} req/s**; `GET /members/{{id}}` {by_id:.0} req/s."
    );

    plans(&db, gym.id, small, &member, (month_ago, today)).await;
    if std::env::var("BENCH_KEEP").is_ok_and(|v| v == "1") {
        println!("\nKept the database {name} (BENCH_KEEP=1).");
    } else {
        exec(&admin, &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await;
    }
}

/// The plans PostgreSQL chooses for the queries behind the scenarios, in gym `g` (and the small
/// gym `small`), for `member` over `(month_ago, today)`.
async fn plans(
    db: &DatabaseConnection,
    g: GymId,
    small: GymId,
    member: &str,
    (month_ago, today): (chrono::NaiveDate, chrono::NaiveDate),
) {
    explain(
        db,
        "Total of GET /members (counter minus rows after as_of)",
        &format!(
            "SELECT CAST(COALESCE((SELECT SUM(value) FROM gym_counters WHERE gym_id = '{g}' AND name = 'members'), 0) \
         - (SELECT COUNT(*) FROM members WHERE gym_id = '{g}' AND created_at > now()) AS BIGINT) AS n"
        ),
    )
    .await;
    explain(db, "Page 1 of GET /members", &format!(
        "SELECT * FROM members WHERE gym_id = '{g}' AND created_at <= now() ORDER BY created_at DESC, id DESC LIMIT 25 OFFSET 0"
    )).await;
    explain(db, "Page 2000 of GET /members (ids first, then rows by primary key)", &format!(
        "SELECT * FROM members WHERE gym_id = '{g}' AND created_at <= now() AND id IN \
         (SELECT id FROM members WHERE gym_id = '{g}' AND created_at <= now() ORDER BY created_at DESC, id DESC LIMIT 25 OFFSET 49975) \
         ORDER BY created_at DESC, id DESC"
    )).await;
    explain(db, "Count of GET /members?search=torvalds12345", &format!(
        "SELECT COUNT(*) FROM members WHERE gym_id = '{g}' AND search_text LIKE '%torvalds12345%' ESCAPE '\\' AND created_at <= now()"
    )).await;
    explain(db, "Count of GET /members?search=ada", &format!(
        "SELECT COUNT(*) FROM members WHERE gym_id = '{g}' AND search_text LIKE '%ada%' ESCAPE '\\' AND created_at <= now()"
    )).await;
    explain(db, "Count of GET /members?search=ada in a 1,000-member gym", &format!(
        "SELECT COUNT(*) FROM members WHERE gym_id = '{small}' AND search_text LIKE '%ada%' ESCAPE '\\' AND created_at <= now()"
    )).await;
    explain(db, "Count of GET /attendance?member_id=…&from=…&to=…", &format!(
        "SELECT COUNT(*) FROM attendance WHERE gym_id = '{g}' AND member_id = '{member}' AND occurred_at >= '{month_ago}' AND occurred_at < '{today}'::date + 1 AND created_at <= now()"
    )).await;
    explain(db, "Page 1 of GET /attendance", &format!(
        "SELECT * FROM attendance WHERE gym_id = '{g}' AND created_at <= now() ORDER BY occurred_at DESC, id DESC LIMIT 25"
    )).await;
    explain(db, "Page 1 of GET /members?search=torvalds12345", &format!(
        "SELECT * FROM members WHERE gym_id = '{g}' AND created_at <= now() AND id IN (SELECT id FROM members WHERE gym_id = '{g}' \
         AND search_text LIKE '%torvalds12345%' ESCAPE '\\' OFFSET 0) ORDER BY created_at DESC, id DESC LIMIT 25"
    )).await;
}
