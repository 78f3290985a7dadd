//! `POST /import/{entity}` and `GET /import/status`, over HTTP, on the backend of the run.

use serde_json::{Value, json};

use crate::common::TestApp;

fn member_rows(from: usize, to: usize) -> Value {
    let rows: Vec<Value> = (from..to)
        .map(|i| {
            json!({
                "legacy_id": format!("M-{i}"),
                "first_name": format!("First{i}"),
                "last_name": "Imported",
                "email": format!("m{i}@example.com"),
            })
        })
        .collect();
    json!({ "rows": rows })
}

async fn import(app: &TestApp, key: &str, entity: &str, body: Value) -> Value {
    let r = app.post(key, &format!("/import/{entity}"), body).await;
    assert_eq!(r.status, 200, "{entity}: {}", r.body);
    assert_eq!(r.body["object"], "import_result");
    assert_eq!(r.body["entity"], entity);
    r.body
}

fn counts(result: &Value) -> (i64, i64, i64) {
    (result["received"].as_i64().unwrap(), result["created"].as_i64().unwrap(), result["skipped"].as_i64().unwrap())
}

async fn total(app: &TestApp, key: &str, path: &str) -> i64 {
    let r = app.get(key, path).await;
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.body["meta"]["total"].as_i64().unwrap()
}

/// Every kind, in the documented order, shows up in its read endpoint with its legacy id.
#[tokio::test]
async fn every_kind_imports_and_appears_in_its_read_endpoint() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Importer").await;
    let k = &gym.live_key;
    let plans = json!({"rows": [
        {"legacy_id": "P-1", "kind": "membership", "name": "10 visits", "price": {"amount": 9900, "currency": "EUR"},
         "duration_days": 90, "visit_limit": 10},
        {"legacy_id": "P-2", "kind": "subscription", "name": "Monthly", "price": {"amount": 4900, "currency": "EUR"},
         "billing_interval": "month", "status": "inactive"},
    ]});
    assert_eq!(counts(&import(&app, k, "plans", plans).await), (2, 2, 0));
    assert_eq!(counts(&import(&app, k, "members", member_rows(0, 3)).await), (3, 3, 0));
    let memberships = json!({"rows": [
        {"legacy_id": "MS-1", "member_legacy_id": "M-0", "plan_legacy_id": "P-1", "starts_on": "2026-01-01", "ends_on": null},
        {"legacy_id": "MS-2", "member_legacy_id": "M-1", "plan_legacy_id": "P-2", "starts_on": "2026-01-01", "ends_on": "2026-12-31"},
    ]});
    assert_eq!(counts(&import(&app, k, "memberships", memberships).await), (2, 2, 0));
    let checkins = json!({"rows": [
        {"legacy_id": "A-1", "member_legacy_id": "M-0", "occurred_at": "2025-06-01T07:30:00Z"},
        {"legacy_id": "A-2", "member_legacy_id": "M-0", "occurred_at": "2025-06-03T07:30:00Z"},
        {"legacy_id": "A-3", "member_legacy_id": "M-0", "occurred_at": "2025-06-04T07:30:00Z", "status": "denied"},
        {"legacy_id": "A-4", "occurred_at": "2025-06-02T07:30:00Z"},
    ]});
    assert_eq!(counts(&import(&app, k, "attendance", checkins).await), (4, 4, 0));
    // Door events have their own legacy id space: "A-1" again is a new entry.
    let doors =
        json!({"rows": [{"legacy_id": "A-1", "member_legacy_id": "M-1", "occurred_at": "2025-06-01T08:00:00Z"}]});
    assert_eq!(counts(&import(&app, k, "access_logs", doors).await), (1, 1, 0));
    let products = json!({"rows": [
        {"legacy_id": "PR-1", "name": "Protein bar", "sku": "PB-1", "price": {"amount": 250, "currency": "EUR"}},
    ]});
    assert_eq!(counts(&import(&app, k, "products", products).await), (1, 1, 0));
    let purchases = json!({"rows": [
        {"legacy_id": "S-1", "member_legacy_id": "M-0", "product_legacy_id": "PR-1", "description": "Protein bar",
         "quantity": 2, "total": {"amount": 500, "currency": "EUR"}, "payment_status": "paid",
         "purchased_at": "2025-06-01T08:00:00Z"},
        {"legacy_id": "S-2", "description": "Day pass", "total": {"amount": 1200, "currency": "EUR"},
         "payment_status": "refunded", "purchased_at": "2025-06-02T08:00:00Z"},
    ]});
    assert_eq!(counts(&import(&app, k, "purchases", purchases).await), (2, 2, 0));

    // Members: legacy ids, and the visits of their granted check-ins.
    let members = app.get(k, "/members?per_page=100").await.body;
    assert_eq!(members["meta"]["total"], 3);
    let ada = members["data"].as_array().unwrap().iter().find(|m| m["legacy_id"] == "M-0").unwrap().clone();
    assert_eq!(ada["visits_count"], 2, "granted check-ins only: {ada}");
    let last: chrono::DateTime<chrono::Utc> = ada["last_visit_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(last.to_rfc3339(), "2025-06-03T07:30:00+00:00");
    assert_eq!(ada["email"], "m0@example.com");
    let ada_id = ada["id"].as_str().unwrap();

    let plans = app.get(k, "/memberships").await.body;
    assert_eq!(plans["meta"]["total"], 1);
    assert_eq!(plans["data"][0]["legacy_id"], "P-1");
    assert_eq!(plans["data"][0]["visit_limit"], 10);
    let subs = app.get(k, "/membership-subscriptions?status=inactive").await.body;
    assert_eq!(subs["meta"]["total"], 1);
    assert_eq!(subs["data"][0]["legacy_id"], "P-2");
    assert_eq!(subs["data"][0]["billing_interval_count"], 1);

    let attendance = app.get(k, &format!("/attendance?member_id={ada_id}&per_page=100")).await.body;
    assert_eq!(attendance["meta"]["total"], 3);
    assert!(attendance["data"].as_array().unwrap().iter().all(|a| a["kind"] == "check_in"));
    assert_eq!(total(&app, k, "/attendance?status=denied").await, 1);
    assert_eq!(total(&app, k, "/access-logs").await, 5);
    let unattributed = app.get(k, "/attendance?per_page=100").await.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["legacy_id"] == "A-4")
        .cloned()
        .unwrap();
    assert_eq!(unattributed["member_id"], Value::Null);

    let products = app.get(k, "/products").await.body;
    assert_eq!(products["data"][0]["legacy_id"], "PR-1");
    let purchases = app.get(k, "/purchases?payment_status=paid").await.body;
    assert_eq!(purchases["meta"]["total"], 1);
    assert_eq!(purchases["data"][0]["legacy_id"], "S-1");
    assert_eq!(purchases["data"][0]["member_id"], ada_id);
    assert_eq!(purchases["data"][0]["quantity"], 2);
    assert_eq!(total(&app, k, "/purchases").await, 2);

    let status = app.get(k, "/import/status").await;
    assert_eq!(status.status, 200);
    let entities = status.body["entities"].as_array().unwrap();
    let order: Vec<&str> = entities.iter().map(|e| e["entity"].as_str().unwrap()).collect();
    assert_eq!(
        order,
        ["plans", "members", "memberships", "attendance", "access_logs", "products", "purchases", "facilities"]
    );
    assert_eq!(entities[3]["received"], 4);
    assert_eq!(entities[3]["created"], 4);
    assert!(entities[3]["last_batch_at"].is_string());
}

#[tokio::test]
async fn a_resent_batch_creates_nothing_new() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Resend").await;
    let k = &gym.live_key;
    assert_eq!(counts(&import(&app, k, "members", member_rows(0, 50)).await), (50, 50, 0));
    // The same batch again, and one that overlaps it by half.
    assert_eq!(counts(&import(&app, k, "members", member_rows(0, 50)).await), (50, 0, 50));
    assert_eq!(counts(&import(&app, k, "members", member_rows(25, 75)).await), (50, 25, 25));
    assert_eq!(total(&app, k, "/members").await, 75);
    assert_eq!(total(&app, k, "/members?status=active").await, 75);
    assert_eq!(total(&app, k, "/members?search=imported").await, 75);
    let status = app.get(k, "/import/status").await.body;
    assert_eq!(
        status["entities"][1],
        json!({
            "entity": "members", "received": 150, "created": 75, "skipped": 75,
            "last_batch_at": status["entities"][1]["last_batch_at"],
        })
    );
    // A skipped row is left as it was, whatever the resent row says.
    let changed = json!({"rows": [{"legacy_id": "M-0", "first_name": "Changed", "last_name": "Name"}]});
    assert_eq!(counts(&import(&app, k, "members", changed).await), (1, 0, 1));
    assert_eq!(total(&app, k, "/members?search=changed").await, 0);
}

/// One invalid row refuses the whole batch: nothing of it is written or counted.
#[tokio::test]
async fn a_bad_row_in_the_middle_leaves_the_database_untouched() {
    let app = TestApp::spawn().await;
    let gym = app.gym("AllOrNothing").await;
    let k = &gym.live_key;
    let taken =
        app.post(k, "/members", json!({"first_name": "Has", "last_name": "Email", "email": "M7@Example.com"})).await;
    assert_eq!(taken.status, 201);
    let mut body = member_rows(0, 20);
    body["rows"][12]["legacy_id"] = json!("M-3");
    body["rows"][15]["email"] = json!("m14@example.com");
    let r = app.post(k, "/import/members", body).await;
    assert_eq!(r.status, 422, "{}", r.body);
    let errors = r.body["errors"].as_object().unwrap();
    let mut fields: Vec<&str> = errors.keys().map(String::as_str).collect();
    fields.sort();
    assert_eq!(fields, ["rows.12.legacy_id", "rows.15.email", "rows.7.email"], "{}", r.body);
    assert_eq!(errors["rows.7.email"][0], "The email has already been taken.");
    assert_eq!(total(&app, k, "/members").await, 1);
    let status = app.get(k, "/import/status").await.body;
    assert_eq!(status["entities"][1]["received"], 0);
    assert_eq!(status["entities"][1]["last_batch_at"], Value::Null);
}

#[tokio::test]
async fn references_to_rows_not_imported_yet_are_named() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Order").await;
    let other = app.gym("Other").await;
    let k = &gym.live_key;
    // Memberships before members (and plans): each missing reference is named.
    let memberships = json!({"rows": [
        {"legacy_id": "MS-1", "member_legacy_id": "M-0", "plan_legacy_id": "P-1", "starts_on": "2026-01-01"},
    ]});
    let r = app.post(k, "/import/memberships", memberships.clone()).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.body["errors"]["rows.0.member_legacy_id"][0], "No member with legacy_id \"M-0\" has been imported.");
    assert_eq!(r.body["errors"]["rows.0.plan_legacy_id"][0], "No plan with legacy_id \"P-1\" has been imported.");
    // Another gym's members are not this gym's.
    import(&app, &other.live_key, "members", member_rows(0, 1)).await;
    let r = app
        .post(
            k,
            "/import/attendance",
            json!({"rows": [
                {"legacy_id": "A-1", "member_legacy_id": "M-0", "occurred_at": "2025-06-01T07:30:00Z"},
            ]}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["rows.0.member_legacy_id"].is_array(), "{}", r.body);
    let r = app.post(k, "/import/purchases", json!({"rows": [
        {"legacy_id": "S-1", "product_legacy_id": "PR-9", "description": "x", "total": {"amount": 1, "currency": "EUR"},
         "payment_status": "paid", "purchased_at": "2025-06-01T08:00:00Z"},
    ]})).await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["rows.0.product_legacy_id"].is_array(), "{}", r.body);
    assert_eq!(total(&app, k, "/attendance").await, 0);
    assert_eq!(total(&app, k, "/purchases").await, 0);
    // In order, the same memberships import.
    let plans = json!({"rows": [{"legacy_id": "P-1", "kind": "membership", "name": "Visits", "price": {"amount": 1, "currency": "EUR"}}]});
    import(&app, k, "plans", plans).await;
    import(&app, k, "members", member_rows(0, 1)).await;
    assert_eq!(counts(&import(&app, k, "memberships", memberships).await), (1, 1, 0));
}

#[tokio::test]
async fn plan_rows_hold_the_fields_of_their_kind() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Plans").await;
    let r = app.post(&gym.live_key, "/import/plans", json!({"rows": [
        {"legacy_id": "P-1", "kind": "subscription", "name": "No interval", "price": {"amount": 1, "currency": "EUR"}},
        {"legacy_id": "P-2", "kind": "membership", "name": "Bad", "price": {"amount": 1, "currency": "EUR"}, "billing_interval": "week"},
        {"legacy_id": "P-3", "kind": "subscription", "name": "Bad", "price": {"amount": 1, "currency": "EUR"},
         "billing_interval": "week", "visit_limit": 3},
        {"legacy_id": "P-4", "kind": "membership", "name": "Once", "price": {"amount": 1, "currency": "EUR"}},
        {"legacy_id": "P-4", "kind": "membership", "name": "Twice", "price": {"amount": 1, "currency": "EUR"}},
        {"legacy_id": "P-5", "kind": "yearly", "name": "Unknown kind", "price": {"amount": 1, "currency": "EUR"}},
    ]})).await;
    assert_eq!(r.status, 422);
    let fields: Vec<&String> = r.body["errors"].as_object().unwrap().keys().collect();
    assert_eq!(
        fields,
        ["rows.0.billing_interval", "rows.1.billing_interval", "rows.2.visit_limit", "rows.4.legacy_id", "rows.5.kind"],
        "{}",
        r.body
    );
    assert_eq!(r.body["errors"]["rows.4.legacy_id"][0], "The legacy_id appears more than once in this batch (row 3).");
    assert_eq!(total(&app, &gym.live_key, "/memberships").await, 0);
}

#[tokio::test]
async fn dry_run_reports_and_writes_nothing() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Dry").await;
    let k = &gym.live_key;
    import(&app, k, "members", member_rows(0, 10)).await;
    let r = app.post(k, "/import/members?dry_run=true", member_rows(5, 20)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["dry_run"], true);
    assert_eq!(counts(&r.body), (15, 10, 5));
    assert_eq!(total(&app, k, "/members").await, 10);
    assert_eq!(app.get(k, "/import/status").await.body["entities"][1]["received"], 10);
    // A dry run finds the same problems a real one would.
    let mut bad = member_rows(20, 22);
    bad["rows"][1]["email"] = json!("m3@example.com");
    let r = app.post(k, "/import/members?dry_run=true", bad).await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["rows.1.email"].is_array());
}

/// The same batch sent by several clients at once is written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_batches_write_each_row_once() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Race").await;
    let k = gym.live_key.clone();
    let sends = (0..4).map(|_| app.post(&k, "/import/members", member_rows(0, 200)));
    let results = futures_util::future::join_all(sends).await;
    let mut created = 0;
    for r in &results {
        assert_eq!(r.status, 200, "{}", r.body);
        created += r.body["created"].as_i64().unwrap();
    }
    assert_eq!(created, 200);
    assert_eq!(total(&app, &k, "/members").await, 200);
    let status = app.get(&k, "/import/status").await.body;
    assert_eq!(status["entities"][1]["received"], 800);
    assert_eq!(status["entities"][1]["created"], 200);
}

/// A batch of one check-in of each of the members `M-0..M-{n}`, in their order turned by `turn`
/// (and reversed if asked), the legacy id of member `i`'s check-in `legacy(i)`.
fn check_ins_in_turn(n: usize, turn: usize, reversed: bool, legacy: impl Fn(usize) -> String) -> Value {
    let mut order: Vec<usize> = (0..n).collect();
    order.rotate_left(turn % n);
    if reversed {
        order.reverse();
    }
    let rows: Vec<Value> = order
        .iter()
        .map(|i| json!({"legacy_id": legacy(*i), "member_legacy_id": format!("M-{i}"), "occurred_at": "2026-01-05T10:00:00Z"}))
        .collect();
    json!({ "rows": rows })
}

/// Batches of check-ins sent at once, each naming the same members in another order, all land:
/// every writer locks a gym's members in the order of their ids before its counters, so two
/// batches never wait for each other both ways (PostgreSQL answered one of them 500 "deadlock
/// detected" after a second when each locked them in the order of its rows).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_check_in_batches_of_the_same_members_all_land() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Busy").await;
    let k = gym.live_key.clone();
    import(&app, &k, "members", member_rows(0, 60)).await;
    // A different order of the same members in every batch.
    let batch = |b: usize| check_ins_in_turn(60, b * 7, b % 2 == 1, |i| format!("C-{b}-{i}"));
    for round in 0..3 {
        let sends = (0..8).map(|b| app.post(&k, "/import/attendance", batch(round * 8 + b)));
        for r in futures_util::future::join_all(sends).await {
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(r.body["created"], 60);
        }
    }
    assert_eq!(total(&app, &k, "/attendance").await, 24 * 60);
    let member = app.get(&k, "/members?search=First7&per_page=1").await.body;
    assert_eq!(member["data"][0]["visits_count"], 24);
}

/// Batches of check-ins sent at once that share their rows, each in another order, write each
/// row once and all land: a batch writes its entries in the order of their legacy ids before it
/// locks their members, so two batches wait for each other's rows in one order (in the order of
/// their rows, PostgreSQL answered some of them 500 "deadlock detected").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_check_in_batches_sharing_their_rows_write_each_once() {
    const ROUNDS: i64 = 10;
    let app = TestApp::spawn().await;
    let gym = app.gym("Resent").await;
    let k = gym.live_key.clone();
    import(&app, &k, "members", member_rows(0, 300)).await;
    let batch = |round: i64, b: usize| check_ins_in_turn(300, b * 37, b % 2 == 1, |i| format!("R-{round}-{i}"));
    for round in 0..ROUNDS {
        let sends = (0..8).map(|b| app.post(&k, "/import/attendance", batch(round, b)));
        let mut created = 0;
        for r in futures_util::future::join_all(sends).await {
            assert_eq!(r.status, 200, "{}", r.body);
            created += r.body["created"].as_i64().unwrap_or_default();
        }
        assert_eq!(created, 300, "round {round}: each row once");
    }
    assert_eq!(total(&app, &k, "/attendance").await, ROUNDS * 300);
    let member = app.get(&k, "/members?search=First7&per_page=1").await.body;
    assert_eq!(member["data"][0]["visits_count"], ROUNDS);
}

/// A test key imports into the sandbox only.
#[tokio::test]
async fn a_test_key_imports_into_the_sandbox() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Sandboxed").await;
    let test_key = app.test_key(&gym).await;
    import(&app, &test_key, "members", member_rows(0, 5)).await;
    assert_eq!(total(&app, &test_key, "/members").await, 5);
    assert_eq!(total(&app, &gym.live_key, "/members").await, 0);
    assert_eq!(app.get(&gym.live_key, "/import/status").await.body["entities"][1]["received"], 0);
}

/// An `Idempotency-Key` per batch: a resend is answered from the first response.
#[tokio::test]
async fn a_keyed_batch_replays() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Keyed").await;
    let k = &gym.live_key;
    let headers = [("Idempotency-Key", "members-batch-1")];
    let first = app.request("POST", "/import/members", Some(k), Some(member_rows(0, 10)), &headers).await;
    let again = app.request("POST", "/import/members", Some(k), Some(member_rows(0, 10)), &headers).await;
    assert_eq!(first.body, again.body);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(app.get(k, "/import/status").await.body["entities"][1]["received"], 10);
}

// --- the `gymapi import` client ------------------------------------------------------------------

fn client(app: &TestApp, key: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gymapi"));
    cmd.arg("import")
        .args(["--base-url", &app.address])
        .args(args)
        .env("GYMAPI_KEY", key)
        .env_remove("DATABASE_URL")
        .env_remove("REDIS_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Runs the client to its end, off the test's runtime (the server shares it).
async fn run_client(mut cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

fn members_csv(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    // CRLF, as spreadsheets write it, with columns named the way the old system named them.
    let mut text = String::from("Member No,First,Last,E-mail,Born,Notes\r\n");
    for i in 0..n {
        let email = if i % 4 == 0 { String::new() } else { format!("member{i}@example.com") };
        let born = if i % 2 == 0 { "1990-05-17" } else { "" };
        text.push_str(&format!("OLD-{i},Ann,\"Smith, {i}\",{email},{born},ignored\r\n"));
    }
    let path = dir.join("members.csv");
    std::fs::write(&path, text).unwrap();
    path
}

const MAPPING: [&str; 10] = [
    "--map",
    "Member No=legacy_id",
    "--map",
    "First=first_name",
    "--map",
    "Last=last_name",
    "--map",
    "E-mail=email",
    "--map",
    "Born=date_of_birth",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_client_maps_a_csv_file_and_reports_refusals_by_line() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Client").await;
    let dir = tempfile::tempdir().unwrap();
    let file = members_csv(dir.path(), 1_234);
    let file_arg = file.to_str().unwrap();

    // An unmapped column is refused before anything is sent.
    let out = run_client(client(&app, &gym.live_key, &["--entity", "members", file_arg])).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Member No"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(total(&app, &gym.live_key, "/members").await, 0);

    let mut args = vec!["--entity", "members", "--json", "--map", "Notes=-"];
    args.extend(MAPPING);
    args.push(file_arg);
    let out = run_client(client(&app, &gym.live_key, &args)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["rows"], 1_234);
    assert_eq!(summary["batches"], 3);
    assert_eq!(summary["created"], 1_234);
    assert_eq!(total(&app, &gym.live_key, "/members").await, 1_234);
    let found = app.get(&gym.live_key, "/members?search=member17@").await.body;
    assert_eq!(found["data"][0]["legacy_id"], "OLD-17");
    assert_eq!(found["data"][0]["email"], "member17@example.com");
    assert_eq!(found["data"][0]["date_of_birth"], Value::Null);

    // A row the server refuses is reported with its line in the file (header = line 1).
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("NEW-1,Dup,Email,member17@example.com,,\r\n");
    std::fs::write(&file, text).unwrap();
    let out = run_client(client(&app, &gym.live_key, &args)).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 1236 (rows.234.email): The email has already been taken."), "{stderr}");
}

/// Killed mid-file, then run again: the gym holds exactly the file's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_client_run_again_imports_exactly_the_file() {
    use entity::import_counter;
    use sea_orm::EntityTrait;

    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Interrupted").await;
    let dir = tempfile::tempdir().unwrap();
    let n = 6_000;
    let file = members_csv(dir.path(), n);
    let mut args = vec!["--entity", "members", "--batch-size", "20", "--quiet", "--map", "Notes=-"];
    args.extend(MAPPING);
    args.push(file.to_str().unwrap());

    let mut child = client(&app, &gym.live_key, &args).spawn().unwrap();
    let created_so_far = || async {
        import_counter::Entity::find_by_id((gym.id, "members".to_string()))
            .one(&app.db)
            .await
            .unwrap()
            .map_or(0, |c| c.created)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while created_so_far().await < 200 {
        assert!(child.try_wait().unwrap().is_none(), "the client ended before it could be interrupted");
        assert!(std::time::Instant::now() < deadline, "the client made no progress");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = total(&app, &gym.live_key, "/members").await;
    assert!((200..n as i64).contains(&before), "interrupted mid-file: {before}");

    let mut json_args = args.clone();
    json_args.push("--json");
    let out = run_client(client(&app, &gym.live_key, &json_args)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["rows"], n);
    // A batch in flight at the kill may have landed after `before` was read: the rows the first
    // run wrote are "already there" to the second, whatever their number.
    let (created, skipped) = (summary["created"].as_i64().unwrap(), summary["skipped"].as_i64().unwrap());
    assert_eq!(created + skipped, n as i64, "{summary}");
    assert!(skipped >= before, "{summary}");
    assert_eq!(total(&app, &gym.live_key, "/members").await, n as i64);
    assert_eq!(total(&app, &gym.live_key, "/members?search=member5999@").await, 1);
}

/// A 429 waits for `Retry-After`, a 5xx backs off; the retried batch keeps its `Idempotency-Key`.
/// The server here answers as a limited, flaky gymapi would, in a scripted order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_client_waits_out_the_rate_limit_and_retries_errors() {
    use std::sync::{Arc, Mutex};

    use poem::{EndpointExt, Route, handler, http::StatusCode, listener::TcpListener, web::Data};

    type Seen = Arc<Mutex<Vec<String>>>;
    #[handler]
    fn flaky(req: &poem::Request, seen: Data<&Seen>) -> poem::Response {
        let key = req.header("idempotency-key").unwrap_or_default().to_string();
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(key);
            seen.len()
        };
        let json = |status: StatusCode, body: Value| {
            poem::Response::builder().status(status).content_type("application/json").body(body.to_string())
        };
        match n {
            1 | 2 => {
                let mut r = json(
                    StatusCode::TOO_MANY_REQUESTS,
                    json!({"error": {"type": "rate_limited", "message": "slow down"}}),
                );
                r.headers_mut().insert("retry-after", "1".parse().unwrap());
                r
            }
            3 => json(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": {"type": "service_unavailable", "message": "busy"}}),
            ),
            _ => json(
                StatusCode::OK,
                json!({"object": "import_result", "entity": "products", "dry_run": false, "received": 1, "created": 1, "skipped": 0}),
            ),
        }
    }
    let seen: Seen = Arc::default();
    let acceptor = poem::listener::Listener::into_acceptor(TcpListener::bind("127.0.0.1:0")).await.unwrap();
    let addr = *poem::listener::Acceptor::local_addr(&acceptor)[0].as_socket_addr().unwrap();
    let app = Route::new().at("/api/v1/import/products", poem::post(flaky)).data(seen.clone());
    tokio::spawn(poem::Server::new_with_acceptor(acceptor).run(app));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("products.jsonl");
    let row = json!({"legacy_id": "PR-1", "name": "Bar", "price": {"amount": 250, "currency": "EUR"}});
    std::fs::write(&file, format!("{row}\n\n")).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gymapi"));
    cmd.args([
        "import",
        "--base-url",
        &format!("http://{addr}"),
        "--key",
        "svc_live_x",
        "--entity",
        "products",
        "--json",
    ])
    .arg(&file)
    .env_remove("DATABASE_URL")
    .env_remove("GYMAPI_KEY");
    let out = run_client(cmd).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary["rows"].as_u64(), summary["created"].as_i64()), (Some(1), Some(1)), "{summary}");
    assert_eq!(summary["rate_limited"], 2);
    assert_eq!(summary["retried"], 1);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    assert!(seen[0].starts_with("gymapi-import-") && seen.iter().all(|k| *k == seen[0]), "{seen:?}");
}

/// `Money` is never negative and names a currency in circulation; anything else is a 422 naming
/// the field, and nothing of the batch is written.
#[tokio::test]
async fn money_takes_currencies_in_circulation_and_no_negative_amount() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Money").await;
    let k = &gym.live_key;
    let product = |legacy: &str, amount: i64, currency: &str| json!({"legacy_id": legacy, "name": "Bar", "price": {"amount": amount, "currency": currency}});
    let body = json!({"rows": [product("A", -1, "EUR"), product("B", 100, "XXX"), product("C", 100, "ABC"), product("D", 100, "JPY")]});
    let r = app.post(k, "/import/products", body).await;
    assert_eq!(r.status, 422, "{}", r.body);
    let errors = r.body["errors"].as_object().unwrap();
    let mut fields: Vec<&String> = errors.keys().collect();
    fields.sort();
    assert_eq!(fields, ["rows.0.price.amount", "rows.1.price.currency", "rows.2.price.currency"], "{}", r.body);
    assert_eq!(total(&app, k, "/products").await, 0);
    let ok = json!({"rows": [product("D", 100, "JPY"), product("E", 0, "KWD")]});
    assert_eq!(counts(&import(&app, k, "products", ok).await), (2, 2, 0));
}

/// What `/import/memberships` wrote can be read back: gym-wide, per member, by plan and by day.
#[tokio::test]
async fn imported_memberships_are_listed_by_member_plan_and_day() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Holdings").await;
    let k = &gym.live_key;
    let plans = json!({"rows": [
        {"legacy_id": "P-1", "kind": "membership", "name": "Quarter", "price": {"amount": 9900, "currency": "EUR"}},
        {"legacy_id": "P-2", "kind": "subscription", "name": "Monthly", "price": {"amount": 4900, "currency": "EUR"},
         "billing_interval": "month"},
    ]});
    import(&app, k, "plans", plans).await;
    import(&app, k, "members", member_rows(0, 2)).await;
    let memberships = json!({"rows": [
        {"legacy_id": "MS-1", "member_legacy_id": "M-0", "plan_legacy_id": "P-1", "starts_on": "2026-01-01", "ends_on": "2026-03-31"},
        {"legacy_id": "MS-2", "member_legacy_id": "M-0", "plan_legacy_id": "P-2", "starts_on": "2026-04-01"},
        {"legacy_id": "MS-3", "member_legacy_id": "M-1", "plan_legacy_id": "P-1", "starts_on": "2026-02-01", "ends_on": "2026-04-30"},
    ]});
    import(&app, k, "memberships", memberships).await;
    let members = app.get(k, "/members?per_page=100").await.body;
    let id_of = |legacy: &str| {
        let m = members["data"].as_array().unwrap().iter().find(|m| m["legacy_id"] == legacy).unwrap();
        m["id"].as_str().unwrap().to_string()
    };
    let (ada, bob) = (id_of("M-0"), id_of("M-1"));
    let plan = app.get(k, "/memberships").await.body["data"][0]["id"].as_str().unwrap().to_string();
    let legacy = |r: &Value| -> Vec<String> {
        let mut ids: Vec<String> =
            r["data"].as_array().unwrap().iter().map(|m| m["legacy_id"].as_str().unwrap().to_string()).collect();
        ids.sort();
        ids
    };

    let all = app.get(k, "/member-memberships").await;
    assert_eq!(all.status, 200, "{}", all.body);
    assert_eq!(legacy(&all.body), ["MS-1", "MS-2", "MS-3"]);
    let ms2 = all.body["data"].as_array().unwrap().iter().find(|m| m["legacy_id"] == "MS-2").unwrap().clone();
    assert_eq!((ms2["object"].as_str(), ms2["plan_kind"].as_str()), (Some("member_membership"), Some("subscription")));
    assert_eq!((ms2["member_id"].as_str(), &ms2["ends_on"]), (Some(ada.as_str()), &Value::Null));

    let of_ada = app.get(k, &format!("/members/{ada}/memberships")).await.body;
    assert_eq!(legacy(&of_ada), ["MS-1", "MS-2"]);
    assert_eq!(legacy(&app.get(k, &format!("/member-memberships?member_id={bob}")).await.body), ["MS-3"]);
    assert_eq!(legacy(&app.get(k, &format!("/member-memberships?plan_id={plan}")).await.body), ["MS-1", "MS-3"]);
    // A period includes its first and last day; an open end runs on.
    for (day, expected) in [
        ("2025-12-31", vec![]),
        ("2026-03-31", vec!["MS-1", "MS-3"]),
        ("2026-04-01", vec!["MS-2", "MS-3"]),
        ("2030-01-01", vec!["MS-2"]),
    ] {
        let r = app.get(k, &format!("/member-memberships?active_on={day}")).await.body;
        assert_eq!(legacy(&r), expected, "active on {day}");
        assert_eq!(r["meta"]["total"], expected.len());
    }
    let r = app.get(k, &format!("/members/{ada}/memberships?active_on=2026-02-15&plan_id={plan}")).await.body;
    assert_eq!(legacy(&r), ["MS-1"]);
    assert!(r["links"]["first"].as_str().unwrap().contains("active_on=2026-02-15"), "{}", r["links"]);

    let one = app.get(k, &format!("/member-memberships/{}", ms2["id"].as_str().unwrap())).await;
    assert_eq!((one.status, &one.body), (200, &ms2));

    // Unknown ids are 404 like everywhere; a day that is not a date is 422 naming the parameter.
    let nobody = uuid::Uuid::now_v7();
    assert_eq!(app.get(k, &format!("/members/{nobody}/memberships")).await.status, 404);
    assert_eq!(app.get(k, &format!("/member-memberships/{nobody}")).await.status, 404);
    let bad = app.get(k, "/member-memberships?active_on=2026-02-30").await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body["errors"]["active_on"].is_array(), "{}", bad.body);
    // Another gym sees none of them.
    let other = app.gym("Elsewhere").await;
    assert_eq!(total(&app, &other.live_key, "/member-memberships").await, 0);
    assert_eq!(app.get(&other.live_key, &format!("/members/{ada}/memberships")).await.status, 404);
}
