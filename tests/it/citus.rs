//! On a Citus cluster (`TEST_CITUS=1`; elsewhere these tests return at once): a request's
//! transaction stays on one node, and a gym's shards move to another worker and are isolated onto
//! shards of their own while keyed writes, door decisions and sales run against it, losing and
//! doubling nothing. Every other test of the suite runs on the cluster too, with any statement
//! that runs on more than one shard refused (`common::citus`).

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use entity::ids::GymId;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use serde_json::{Value, json};

use crate::{
    common::{TestApp, citus::on_citus},
    counter::{Counter, approved, counter, register},
};

async fn number(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db.query_one(Statement::from_string(db.get_database_backend(), sql.to_string())).await.unwrap().unwrap();
    row.try_get::<i64>("", "n").unwrap()
}

/// Two-phase commits the coordinator has recorded (the cluster keeps them: `.ci/citus`).
async fn two_phase_commits(app: &TestApp) -> i64 {
    number(&app.db, "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_dist_transaction").await
}

/// One sale: a kiosk's order, the terminal's take and its approval. The order's id, once paid.
async fn sale(app: &TestApp, c: &Counter) -> Result<String, String> {
    let order = c.order(app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    if order.status != 201 {
        return Err(format!("order: {} {}", order.status, order.body));
    }
    let jobs = c.take_payment(app, &c.terminal).await;
    let Some(job) = jobs.as_array().and_then(|j| j.first()).and_then(|j| j["id"].as_str()) else {
        return Err(format!("no payment job for the order: {jobs}"));
    };
    let report = c.report_payment(app, &c.terminal, job, approved()).await;
    if report.status != 200 {
        return Err(format!("report: {} {}", report.status, report.body));
    }
    Ok(order.body["id"].as_str().unwrap().to_string())
}

/// A keyed write, a door decision and a sale each commit on the gym's node alone: Citus records
/// no two-phase commit for them.
#[tokio::test]
async fn a_request_commits_on_one_node() {
    if !on_citus() {
        return;
    }
    let app = TestApp::spawn().await;
    let c = counter(&app, "One node").await;
    let door = register(&app, c.key(), "door", "Front").await;
    let before = two_phase_commits(&app).await;
    let body = json!({"first_name": "Ada", "last_name": "Lovelace"});
    let keyed = [("Idempotency-Key", "one-node")];
    let created = app.request("POST", "/members", Some(c.key()), Some(body.clone()), &keyed).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let replay = app.request("POST", "/members", Some(c.key()), Some(body), &keyed).await;
    assert_eq!(replay.header("idempotency-replayed"), Some("true"));
    let who = json!({"member_id": created.body["id"]});
    let decided = app.device("POST", &format!("/doors/{door}/access"), c.key(), Some(who), &[]).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    sale(&app, &c).await.unwrap();
    assert_eq!(two_phase_commits(&app).await, before, "a request's transaction spanned nodes");
}

/// What the load saw: the members it was answered 201 for (by idempotency key), the door
/// decisions and sales answered, every 5xx, and the longest answer.
#[derive(Default)]
struct Seen {
    /// (key, member id, when answered since the load began)
    members: Vec<(String, String, Duration)>,
    /// The attendance entries the decisions were written as.
    decisions: Vec<String>,
    sales: Vec<String>,
    failures: Vec<String>,
    longest: Duration,
}

/// Keyed member writes, door decisions and sales against one gym, one after another, until told
/// to stop.
async fn load(
    app: Arc<TestApp>,
    c: Arc<Counter>,
    door: String,
    lane: usize,
    t0: Instant,
    (sold, stop): (Arc<AtomicUsize>, Arc<AtomicBool>),
) -> Seen {
    let mut seen = Seen::default();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let started = Instant::now();
        let key = format!("move-{lane}-{i}");
        let body = json!({"first_name": "Load", "last_name": format!("{lane}-{i}")});
        let r = app.request("POST", "/members", Some(c.key()), Some(body), &[("Idempotency-Key", &key)]).await;
        match r.status {
            201 => seen.members.push((key, r.body["id"].as_str().unwrap().to_string(), t0.elapsed())),
            s => seen.failures.push(format!("POST /members: {s} {}", r.body)),
        }
        let who = json!({"member_id": seen.members.last().map_or(Value::Null, |(_, id, _)| json!(id))});
        let d = app.device("POST", &format!("/doors/{door}/access"), c.key(), Some(who), &[]).await;
        match d.status {
            200 => seen.decisions.push(d.body["id"].as_str().unwrap().to_string()),
            s => seen.failures.push(format!("door: {s} {}", d.body)),
        }
        if lane == 0 {
            match sale(&app, &c).await {
                Ok(id) => {
                    seen.sales.push(id);
                    sold.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => seen.failures.push(e),
            }
        }
        seen.longest = seen.longest.max(started.elapsed());
    }
    seen
}

/// The gym's door asking for commands, again and again, until told to stop: each poll is a
/// claiming statement of its own, the kind a split can catch between planning and execution.
async fn poll(app: Arc<TestApp>, c: Arc<Counter>, door: String, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let path = format!("/doors/{door}/commands?wait=0");
        let r = app.device("GET", &path, c.key(), None, &[]).await;
        if r.status != 200 {
            seen.failures.push(format!("poll: {} {}", r.status, r.body));
        }
        seen.longest = seen.longest.max(started.elapsed());
    }
    seen
}

/// The worker holding the shard of `table` for `gym`, and the shard.
async fn placement_of(db: &DatabaseConnection, table: &str, gym: GymId) -> (i64, i64) {
    let sql = format!(
        "SELECT CAST(s.shardid AS BIGINT) AS shard, CAST(s.nodeport AS BIGINT) AS n FROM citus_shards s \
         WHERE s.shardid = get_shard_id_for_distribution_column('{table}', '{gym}')"
    );
    let row = db.query_one(Statement::from_string(db.get_database_backend(), sql)).await.unwrap().unwrap();
    (row.try_get("", "shard").unwrap(), row.try_get("", "n").unwrap())
}

async fn other_worker(db: &DatabaseConnection, port: i64) -> i64 {
    let sql = format!(
        "SELECT CAST(nodeport AS BIGINT) AS n FROM pg_dist_node WHERE groupid <> 0 AND nodeport <> {port} LIMIT 1"
    );
    number(db, &sql).await
}

/// A gym's shard group moves to the other worker, then the gym is isolated onto shards of its own,
/// while three lanes write members (keyed), ask the door and sell, and three poll the door. No request gets a 5xx, and
/// every acknowledged write is in the database exactly once; a replay of every key answers the
/// member it made. Prints how long the slowest round of requests took during the moves.
#[tokio::test]
async fn a_gym_moves_between_workers_and_is_isolated_while_it_is_used() {
    if !on_citus() {
        return;
    }
    let app = Arc::new(
        TestApp::spawn_with(|c| {
            c.rate_limit_per_minute = 1_000_000;
            c.device_rate_limit_per_minute = 1_000_000;
        })
        .await,
    );
    let c = Arc::new(counter(&app, "Moving").await);
    let door = register(&app, c.key(), "door", "Front").await;
    let gym = c.gym.id;
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let sold = Arc::new(AtomicUsize::new(0));
    let mut lanes: Vec<_> = (0..3)
        .map(|lane| tokio::spawn(load(app.clone(), c.clone(), door.clone(), lane, t0, (sold.clone(), stop.clone()))))
        .collect();
    lanes.extend((0..3).map(|_| tokio::spawn(poll(app.clone(), c.clone(), door.clone(), stop.clone()))));
    // The moves start once the load is under way: a few sales made, whatever the machine's speed.
    while sold.load(Ordering::Relaxed) < 4 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the load did not get going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (shard, from) = placement_of(&app.db, "members", gym).await;
    let to = other_worker(&app.db, from).await;
    let moving = t0.elapsed();
    let started = Instant::now();
    // By logical replication, as docs/scaling.md says (Citus's default, `auto`); with
    // `synchronous_commit = off` on the nodes it once left an acknowledged write behind.
    // `TEST_CITUS_MOVE_MODE=block_writes` runs the test with a blocking move.
    let mode = std::env::var("TEST_CITUS_MOVE_MODE").unwrap_or_else(|_| "auto".into());
    let move_group = format!(
        "SELECT citus_move_shard_placement({shard}, '127.0.0.1', {from}, '127.0.0.1', {to}, \
         shard_transfer_mode => '{mode}')"
    );
    app.db.execute_unprepared(&move_group).await.unwrap();
    let moved_in = started.elapsed();
    assert_eq!(placement_of(&app.db, "members", gym).await.1, to, "the shard did not move");
    assert_eq!(placement_of(&app.db, "payment_jobs", gym).await.1, to, "the colocated shards did not follow");
    tokio::time::sleep(Duration::from_millis(300)).await;

    let isolating = t0.elapsed();
    let started = Instant::now();
    // Writes to the gym's shards wait while they are split (`block_writes`): Citus's split by
    // logical replication stops at gym_counters, whose key gained a column after the table was
    // made ("publisher did not send replica identity column"), and never ends.
    let isolate = format!(
        "SELECT isolate_tenant_to_new_shard('members', '{gym}', 'CASCADE', shard_transfer_mode => 'block_writes')"
    );
    app.db.execute_unprepared(&isolate).await.unwrap();
    let isolated_in = started.elapsed();
    let (own, _) = placement_of(&app.db, "members", gym).await;
    assert_ne!(own, shard, "the gym is still on its old shard");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);

    let mut seen = Seen::default();
    for lane in lanes {
        let s = lane.await.unwrap();
        seen.members.extend(s.members);
        seen.decisions.extend(s.decisions);
        seen.sales.extend(s.sales);
        seen.failures.extend(s.failures);
        seen.longest = seen.longest.max(s.longest);
    }
    assert!(seen.failures.is_empty(), "{:?}", seen.failures);
    assert!(seen.members.len() >= 4 && seen.sales.len() >= 4, "too little load: {}", seen.members.len());
    println!(
        "moved the shard group in {moved_in:?} (from {moving:?} of the load), isolated the gym in {isolated_in:?} \
         (from {isolating:?}); {} members, {} decisions, {} sales; slowest round of requests {:?}",
        seen.members.len(),
        seen.decisions.len(),
        seen.sales.len(),
        seen.longest
    );
    assert_written_once(&app, &c, &seen).await;
}

async fn ids(app: &TestApp, sql: &str) -> BTreeSet<String> {
    let rows = app.db.query_all(Statement::from_string(app.db.get_database_backend(), sql.to_string())).await.unwrap();
    rows.iter().map(|r| r.try_get("", "id").unwrap()).collect()
}

/// Every acknowledged write is in the database once: the members by idempotency key (a replay
/// answers the same member), a decision's attendance entry, a sale paid once.
async fn assert_written_once(app: &TestApp, c: &Counter, seen: &Seen) {
    let gym = c.gym.id;
    let written = ids(app, &format!("SELECT CAST(id AS TEXT) AS id FROM members WHERE gym_id = '{gym}'")).await;
    let lost: Vec<_> = seen.members.iter().filter(|(_, id, _)| !written.contains(id)).collect();
    let records = format!("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM idempotency_records WHERE gym_id = '{gym}'");
    assert!(
        lost.is_empty() && written.len() == seen.members.len(),
        "members lost (key, id, answered at): {lost:?}; {} written, {} answered, {} idempotency records",
        written.len(),
        seen.members.len(),
        number(&app.db, &records).await
    );
    let written = ids(app, &format!("SELECT CAST(id AS TEXT) AS id FROM attendance WHERE gym_id = '{gym}'")).await;
    let answered: BTreeSet<String> = seen.decisions.iter().cloned().collect();
    assert_eq!(answered.len(), seen.decisions.len(), "two decisions answered with one entry");
    let lost: Vec<_> = answered.difference(&written).collect();
    let unanswered: Vec<_> = written.difference(&answered).collect();
    assert!(lost.is_empty() && unanswered.is_empty(), "lost {lost:?}; written without an answer {unanswered:?}");
    let paid = format!(
        "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM purchases WHERE gym_id = '{gym}' AND payment_status = 'paid'"
    );
    assert_eq!(number(&app.db, &paid).await, i64::try_from(seen.sales.len()).unwrap());
    for (key, id, _) in seen.members.iter().step_by(7) {
        let body = json!({"first_name": "Load", "last_name": key.trim_start_matches("move-")});
        let r = app.request("POST", "/members", Some(c.key()), Some(body), &[("Idempotency-Key", key)]).await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(r.header("idempotency-replayed"), Some("true"));
        assert_eq!(r.body["id"].as_str(), Some(id.as_str()));
    }
}

/// A node's own certificate (self-signed, X.509 v1): with `sslmode` left unset gymapi connects as
/// libpq's default `prefer` does (every test of this pass does), while `verify-full` still
/// refuses it, saying why.
#[tokio::test]
async fn verify_full_still_refuses_a_nodes_own_certificate() {
    if !on_citus() {
        return;
    }
    let base = std::env::var("TEST_DATABASE_URL").unwrap();
    let mut url = url::Url::parse(&base).unwrap();
    url.query_pairs_mut().append_pair("sslmode", "verify-full");
    let refused = gymapi::db::connect(url.as_str()).await.expect_err("verify-full accepted a self-signed certificate");
    assert!(format!("{refused:#}").contains("certificate"), "{refused:#}");
    gymapi::db::connect(&base).await.expect("sslmode left unset connects as prefer does");
}

/// A node that commits asynchronously is named in the log when gymapi opens the database: Citus
/// ends a logical shard move's catch-up at `pg_current_wal_lsn()`, and with `synchronous_commit =
/// off` a write already answered can stand after it and be left behind (docs/scaling.md).
#[tokio::test]
async fn nodes_committing_asynchronously_are_named_in_the_log() {
    if !on_citus() {
        return;
    }
    let app = TestApp::spawn().await;
    let name = app.database_url.rsplit('/').next().unwrap().split('?').next().unwrap().to_string();
    let set =
        format!("SELECT * FROM run_command_on_all_nodes($$ALTER DATABASE \"{name}\" SET synchronous_commit = off$$)");
    app.db.execute_unprepared(&set).await.unwrap();
    let served = gymapi::db::open(&app.database_url).await.unwrap();
    served.close().await.unwrap();
    let logs = crate::common::captured_logs();
    let line = logs.lines().find(|l| l.contains("synchronous_commit is off on these Citus nodes"));
    let line = line.unwrap_or_else(|| panic!("no warning in the log"));
    assert!(line.contains(":9701") && line.contains(":9702"), "{line}");
}
