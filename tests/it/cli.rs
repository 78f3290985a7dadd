//! The operators' CLI, exactly as the README's "Operators' CLI" writes it.

use std::{
    io::Write,
    process::{Command, Output, Stdio},
};

use serde_json::Value;

use crate::common::{TestApp, fresh_database};

pub(crate) fn gymapi(database_url: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gymapi"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .env_remove("REDIS_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

pub(crate) fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("not one JSON object: {}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test]
async fn key_lifecycle_through_the_cli() {
    let (url, _dir) = fresh_database().await;
    let gym =
        json_of(&gymapi(&url, &["gym", "create", "--name", "CLI Gym", "--timezone", "Europe/Berlin", "--json"], None));
    let gym_id = gym["id"].as_str().unwrap();

    let no_sandbox = gymapi(&url, &["key", "create", "--gym", gym_id, "--env", "test", "--name", "ci", "--json"], None);
    assert_eq!(no_sandbox.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_sandbox.stderr).contains("Provision a sandbox first to create a test key."));

    let sandbox = json_of(&gymapi(&url, &["sandbox", "provision", "--gym", gym_id, "--json"], None));
    assert!(sandbox["id"].is_string());
    assert_eq!(gymapi(&url, &["sandbox", "provision", "--gym", gym_id], None).status.code(), Some(2));

    let live = json_of(&gymapi(
        &url,
        &["key", "create", "--gym", gym_id, "--env", "live", "--name", "Front desk", "--json"],
        None,
    ));
    assert!(live["key"].as_str().unwrap().starts_with("svc_live_"));
    assert_eq!(live["environment"], "live");
    assert_eq!(live["prefix"].as_str().unwrap(), &live["key"].as_str().unwrap()[..13]);
    let test =
        json_of(&gymapi(&url, &["key", "create", "--gym", gym_id, "--env", "test", "--name", "CI", "--json"], None));
    assert!(test["key"].as_str().unwrap().starts_with("svc_test_"));

    let rolled = json_of(&gymapi(&url, &["key", "roll", live["id"].as_str().unwrap(), "--json"], None));
    assert_eq!(rolled["retiring_id"], live["id"]);
    assert!(rolled["key"].as_str().unwrap().starts_with("svc_live_"));
    assert!(rolled["expires_at"].is_string());
    let again = gymapi(&url, &["key", "roll", live["id"].as_str().unwrap()], None);
    assert_eq!(again.status.code(), Some(2), "a retiring key cannot be rolled again");

    assert!(gymapi(&url, &["key", "revoke", test["id"].as_str().unwrap()], None).status.success());
    let list = json_of(&gymapi(&url, &["key", "list", "--gym", gym_id, "--json"], None));
    let rows = list["data"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let status_of = |id: &Value| rows.iter().find(|r| &r["id"] == id).unwrap()["status"].as_str().unwrap().to_string();
    assert!(status_of(&live["id"]).starts_with("Retires in 2"), "{}", status_of(&live["id"]));
    assert_eq!(status_of(&test["id"]), "Revoked");
    assert_eq!(status_of(&rolled["id"]), "Active");
    for r in rows {
        for field in ["id", "name", "environment", "prefix", "status", "last_used_at", "expires_at"] {
            assert!(r.get(field).is_some(), "{field}");
        }
        assert!(!r.to_string().contains(&live["key"].as_str().unwrap()[9..]), "the list never shows a key");
    }
}

#[tokio::test]
async fn gym_update_and_users_through_the_cli() {
    let (url, _dir) = fresh_database().await;
    let gym_id = json_of(&gymapi(&url, &["gym", "create", "--name", "Plans", "--no-api-access", "--json"], None))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let updated = json_of(&gymapi(
        &url,
        &[
            "gym",
            "update",
            &gym_id,
            "--api-access",
            "on",
            "--subscription",
            "past-due",
            "--grace-ends-at",
            "2030-01-01T00:00:00Z",
            "--json",
        ],
        None,
    ));
    assert_eq!(updated["api_access"], true);
    assert_eq!(updated["subscription"], "past_due");
    let user = json_of(&gymapi(
        &url,
        &["user", "create", "--gym", &gym_id, "--email", "Owner@Example.com", "--role", "owner", "--json"],
        Some("a long enough password\n"),
    ));
    assert_eq!(user["email"], "owner@example.com");
    let short = gymapi(
        &url,
        &[
            "user",
            "create",
            "--gym",
            &gym_id,
            "--email",
            "e@example.com",
            "--role",
            "employee",
            "--grant",
            "settings.manage",
        ],
        Some("short"),
    );
    assert_eq!(short.status.code(), Some(2));
    let bad_grant = gymapi(
        &url,
        &[
            "user",
            "create",
            "--gym",
            &gym_id,
            "--email",
            "e@example.com",
            "--role",
            "employee",
            "--grant",
            "everything",
        ],
        Some("a long enough password"),
    );
    assert_eq!(bad_grant.status.code(), Some(2));
}

#[tokio::test]
async fn bad_input_exits_2_with_a_message() {
    let (url, _dir) = fresh_database().await;
    for args in [
        vec!["gym", "create", "--name", "X", "--timezone", "Mars/Olympus"],
        vec!["key", "list", "--gym", "not-a-uuid"],
        vec!["key", "revoke", "0192f7c4-3b7e-7cc1-a8e3-5b8f4d1e2a90"],
        vec!["gym", "update", "0192f7c4-3b7e-7cc1-a8e3-5b8f4d1e2a90", "--grace-ends-at", "tomorrow"],
        vec!["key", "create", "--gym", "0192f7c4-3b7e-7cc1-a8e3-5b8f4d1e2a90", "--env", "staging", "--name", "x"],
    ] {
        let out = gymapi(&url, &args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!out.stderr.is_empty());
    }
}

#[tokio::test]
async fn openapi_prints_the_document() {
    let out = gymapi("sqlite::memory:", &["openapi"], None);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml")).unwrap()
    );
}

/// `gymapi demo` creates the demo gym once and prints keys that work. (Worker threads: the server
/// goes on while the test's thread waits for the CLI, which may need the file's write lock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_keys_work_against_the_demo_data() {
    let app = TestApp::spawn().await;
    let first = json_of(&gymapi(&app.database_url, &["demo", "--json"], None));
    let second = json_of(&gymapi(&app.database_url, &["demo", "--json"], None));
    assert_eq!(first["gym_id"], second["gym_id"], "the demo gym is created once");
    // The owner signs in to the settings area with the newest password only.
    let email = second["owner_email"].as_str().unwrap();
    let newest = second["owner_password"].as_str().unwrap();
    assert_ne!(first["owner_password"], second["owner_password"]);
    assert!(gymapi::accounts::verify_user(&app.db, email, newest).await.unwrap().is_some());
    let older = first["owner_password"].as_str().unwrap();
    assert!(gymapi::accounts::verify_user(&app.db, email, older).await.unwrap().is_none());
    let live = second["live_key"].as_str().unwrap();
    let test = second["test_key"].as_str().unwrap();
    for path in [
        "/members",
        "/memberships",
        "/membership-subscriptions",
        "/attendance",
        "/access-logs",
        "/products",
        "/purchases",
    ] {
        let r = app.get(live, path).await;
        assert!(r.body["meta"]["total"].as_i64().unwrap() > 0, "{path} is empty in the demo");
    }
    assert!(app.get(live, "/statistics").await.body["members"]["total"].as_i64().unwrap() >= 300);
    // Every total served from the gym's counters equals a real count (updated_since forces one).
    for path in [
        "/members",
        "/members?status=inactive",
        "/memberships",
        "/membership-subscriptions",
        "/products",
        "/products?status=inactive",
        "/purchases",
        "/purchases?payment_status=paid",
        "/attendance",
        "/attendance?status=denied",
    ] {
        let sep = if path.contains('?') { '&' } else { '?' };
        let counted = app.get(live, path).await.body["meta"]["total"].clone();
        let real = app.get(live, &format!("{path}{sep}updated_since=2000-01-01T00:00:00Z")).await.body["meta"]["total"]
            .clone();
        assert_eq!(counted, real, "{path}");
        assert!(real.as_i64().unwrap() > 0, "{path}");
    }
    assert_eq!(app.get(test, "/members").await.body["meta"]["total"], 0, "the sandbox starts empty");
    // Keys printed by an earlier run were revoked.
    assert_eq!(app.get(first["live_key"].as_str().unwrap(), "/members").await.status, 401);
    demo_door_lets_its_card_in(&app, &second).await;
}

/// The door of the banner's curl grants its card, and `gymapi device list` shows it online once
/// it has said so.
async fn demo_door_lets_its_card_in(app: &TestApp, demo: &Value) {
    let (live, gym) = (demo["live_key"].as_str().unwrap(), demo["gym_id"].as_str().unwrap());
    let list = json_of(&gymapi(&app.database_url, &["device", "list", "--gym", gym, "--json"], None));
    let kinds: Vec<&str> = list["data"].as_array().unwrap().iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["door", "doorbell", "door", "kiosk", "card_terminal", "fiscal_printer"]);
    assert_eq!(list["data"][0]["online"], false);
    assert_eq!(list["data"][0]["id"], demo["door_id"]);
    let path = format!("/doors/{}/access", demo["door_id"].as_str().unwrap());
    let r = app.device("POST", &path, live, Some(serde_json::json!({"card": demo["door_card"]})), &[]).await;
    assert_eq!((r.status, r.body["decision"].as_str()), (200, Some("granted")), "{}", r.body);
    let heartbeat = format!("/devices/{}/heartbeat", demo["door_id"].as_str().unwrap());
    assert_eq!(app.device("POST", &heartbeat, live, None, &[]).await.status, 200);
    let list = json_of(&gymapi(&app.database_url, &["device", "list", "--gym", gym, "--json"], None));
    assert_eq!(list["data"][0]["online"], true, "a heartbeat marks the door seen");
    let text = gymapi(&app.database_url, &["device", "list", "--gym", gym], None);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("online") && text.contains("Main entrance"), "{text}");
    demo_counter_sells(app, demo).await;
}

/// The sale of `docs/devices.md` with the demo's ids: the kiosk orders, the terminal approves, the
/// printer gets a numbered receipt.
async fn demo_counter_sells(app: &TestApp, demo: &Value) {
    use serde_json::json;
    let live = demo["live_key"].as_str().unwrap();
    let id = |field: &str| demo[field].as_str().unwrap().to_string();
    let order = json!({"device_id": id("kiosk_id"), "lines": [{"product_id": id("product_id"), "quantity": 2}]});
    let r = app.device("POST", "/orders", live, Some(order), &[]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let terminal = id("terminal_id");
    let job = app.device("GET", &format!("/terminals/{terminal}/jobs"), live, None, &[]).await.body;
    let job = job["data"][0]["id"].as_str().unwrap().to_string();
    let approved = json!({"outcome": "approved", "card_scheme": "visa", "card_last4": "4242"});
    let path = format!("/terminals/{terminal}/jobs/{job}/report");
    assert_eq!(app.device("POST", &path, live, Some(approved), &[]).await.status, 200);
    let receipts = app.device("GET", &format!("/printers/{}/jobs", id("printer_id")), live, None, &[]).await.body;
    assert_eq!(receipts["data"][0]["receipt"]["number"], 1, "{receipts}");
}

#[tokio::test]
async fn webhook_endpoints_through_the_cli() {
    let (url, _dir) = fresh_database().await;
    let gym = json_of(&gymapi(&url, &["gym", "create", "--name", "Hooks", "--json"], None));
    let gym_id = gym["id"].as_str().unwrap();

    // Outside development an endpoint must be https (exit 2, bad input).
    let plain = gymapi(&url, &["webhook", "create", "--gym", gym_id, "--url", "http://example.com/h"], None);
    assert_eq!(plain.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&plain.stderr).contains("https"), "{}", String::from_utf8_lossy(&plain.stderr));
    let unknown = gymapi(
        &url,
        &["webhook", "create", "--gym", gym_id, "--url", "https://example.com/h", "--events", "member.deleted"],
        None,
    );
    assert_eq!(unknown.status.code(), Some(2));
    let no_sandbox =
        gymapi(&url, &["webhook", "create", "--gym", gym_id, "--sandbox", "--url", "https://example.com/s"], None);
    assert_eq!(no_sandbox.status.code(), Some(2));

    let created = json_of(&gymapi(
        &url,
        &[
            "webhook",
            "create",
            "--gym",
            gym_id,
            "--url",
            "https://example.com/hooks",
            "--events",
            "member.created,import.completed",
            "--json",
        ],
        None,
    ));
    let id = created["id"].as_str().unwrap();
    assert!(created["secret"].as_str().unwrap().starts_with("whsec_"));

    let disabled = json_of(&gymapi(&url, &["webhook", "disable", id, "--json"], None));
    assert_eq!(disabled["enabled"], false);
    let enabled = json_of(&gymapi(&url, &["webhook", "enable", id, "--json"], None));
    assert_eq!(enabled["enabled"], true);
    let rotated = json_of(&gymapi(&url, &["webhook", "rotate-secret", id, "--json"], None));
    assert_ne!(rotated["secret"], created["secret"]);
    assert!(rotated["previous_valid_until"].is_string());
    let ping = json_of(&gymapi(&url, &["webhook", "ping", id, "--json"], None));
    assert!(ping["delivery_id"].is_string());

    let list = json_of(&gymapi(&url, &["webhook", "list", "--gym", gym_id, "--json"], None));
    let rows = list["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["events"], serde_json::json!(["member.created", "import.completed"]));
    assert!(!list.to_string().contains("whsec_"), "a list never shows a secret");

    assert!(gymapi(&url, &["webhook", "delete", id], None).status.success());
    assert_eq!(gymapi(&url, &["webhook", "delete", id], None).status.code(), Some(2));
    let list = json_of(&gymapi(&url, &["webhook", "list", "--gym", gym_id, "--json"], None));
    assert_eq!(list["data"], serde_json::json!([]));
}

/// `gymapi migrate --distribute`: on a database without Citus (SQLite, plain PostgreSQL) it
/// refuses with exit 2 and says what is missing; on a Citus coordinator it places every table,
/// keeps the rows already there, and a second run changes nothing.
#[tokio::test]
async fn migrate_distribute_places_the_tables_on_citus_and_refuses_elsewhere() {
    let (url, _dir) = crate::common::bare_database().await;
    if !crate::common::citus::on_citus() {
        let out = gymapi(&url, &["migrate", "--distribute"], None);
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("--distribute needs"), "{said}");
        return;
    }
    let migrated = gymapi(&url, &["migrate"], None);
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    let gym = json_of(&gymapi(&url, &["gym", "create", "--name", "Before", "--timezone", "UTC", "--json"], None));
    let first = gymapi(&url, &["migrate", "--distribute"], None);
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{said}");
    let (reference, tenant) = (migration::tenancy::REFERENCE_TABLES.len(), migration::tenancy::TENANT_TABLES.len());
    assert!(said.contains(&format!("{reference} reference, {tenant} distributed by gym (0 already placed)")), "{said}");
    let again = gymapi(&url, &["migrate", "--distribute"], None);
    let said = String::from_utf8_lossy(&again.stderr);
    let placed = reference + tenant;
    assert!(said.contains(&format!("0 reference, 0 distributed by gym ({placed} already placed)")), "{said}");
    // The gym (a reference table) and its first facility (a tenant table) are still there.
    use sea_orm::ConnectionTrait;
    let db = gymapi::db::connect(&url).await.unwrap();
    let sql = format!(
        "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM facilities f JOIN gyms g ON g.id = f.gym_id WHERE f.gym_id = '{}'",
        gym["id"].as_str().unwrap()
    );
    let row = db.query_one(sea_orm::Statement::from_string(db.get_database_backend(), sql)).await.unwrap().unwrap();
    assert_eq!(row.try_get::<i64>("", "n").unwrap(), 1);
}
