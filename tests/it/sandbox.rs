//! The sandbox as a partner's CI fixture: a test key empties it (`POST /sandbox/reset`), a live
//! key never resets anything, and an empty sandbox is empty in every list of both documents, in
//! every table a reset empties, and in the idempotency keys it held; its setup stays.

use gymapi::accounts::Actor;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::common::{Gym, TestApp};

/// Fills a gym through `key`: plans, members, memberships, check-ins, door events, products and
/// sales by import, a member by `POST /members` with `idem` as its `Idempotency-Key`, a door's
/// decision, and a webhook endpoint whose events are queued.
async fn fill(app: &TestApp, gym: &Gym, key: &str, sandbox: bool, idem: &str) {
    gymapi::webhooks::create_endpoint(&app.db, &Actor::Operator, gym.id, sandbox, "http://127.0.0.1:9/h", &[], true)
        .await
        .unwrap();
    let price = json!({"amount": 900, "currency": "EUR"});
    let batches = [
        (
            "plans",
            json!([{"legacy_id": "P-1", "kind": "membership", "name": "Ten", "price": price, "duration_days": 30}]),
        ),
        ("members", json!([{"legacy_id": "M-0", "first_name": "Ada", "last_name": "L", "access_card": "CARD-ADA"}])),
        (
            "memberships",
            json!([{"legacy_id": "MS-1", "member_legacy_id": "M-0", "plan_legacy_id": "P-1", "starts_on": "2026-01-01"}]),
        ),
        ("attendance", json!([{"legacy_id": "A-1", "member_legacy_id": "M-0", "occurred_at": "2026-06-01T08:00:00Z"}])),
        ("access_logs", json!([{"legacy_id": "A-1", "occurred_at": "2026-06-01T08:00:00Z"}])),
        ("products", json!([{"legacy_id": "PR-1", "name": "Bar", "price": {"amount": 250, "currency": "EUR"}}])),
        (
            "purchases",
            json!([{"legacy_id": "S-1", "member_legacy_id": "M-0", "description": "Bar",
                               "total": {"amount": 250, "currency": "EUR"}, "payment_status": "paid",
                               "purchased_at": "2026-06-01T08:00:00Z"}]),
        ),
    ];
    for (entity, rows) in batches {
        let r = app.post(key, &format!("/import/{entity}"), json!({ "rows": rows })).await;
        assert_eq!(r.status, 200, "{entity}: {}", r.body);
    }
    let grace = json!({"first_name": "Grace", "last_name": "Hopper"});
    let r = app.request("POST", "/members", Some(key), Some(grace), &[("Idempotency-Key", idem)]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let door = app.device("POST", "/devices", key, Some(json!({"kind": "door", "name": "Front"})), &[]).await;
    assert_eq!(door.status, 201, "{}", door.body);
    let path = format!("/doors/{}/access", door.body["id"].as_str().unwrap());
    let decided = app.device("POST", &path, key, Some(json!({"card": "CARD-ADA"})), &[]).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
}

/// The totals of every list of both documents with no parameter in its path, read from them.
async fn totals(app: &TestApp, key: &str) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for (file, base) in [("openapi.yaml", "/api/v1"), ("openapi-devices.yaml", "/api/v1/devices")] {
        let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let oracle = if file == "openapi.yaml" { crate::common::oracle() } else { crate::common::devices_oracle() };
        for (path, item) in doc["paths"].as_object().unwrap() {
            // The documents themselves (YAML) are no lists.
            if path.contains('{') || path.ends_with(".yaml") || item.get("get").is_none() {
                continue;
            }
            let r = app.send((base, oracle), "GET", &format!("{path}?wait=0"), Some(key), None, &[]).await;
            if let Some(total) = r.body["meta"]["total"].as_i64() {
                out.push((format!("{base}{path}"), total));
            }
        }
    }
    out
}

/// The rows a gym holds in every table a reset empties.
async fn rows_left(app: &TestApp, gym: entity::ids::GymId) -> Vec<(&'static str, i64)> {
    let backend = app.db.get_database_backend();
    let mut out = Vec::new();
    for table in gymapi::sandbox::EMPTIED {
        let sql = gymapi::db::placeholders(
            backend,
            &format!("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM {table} WHERE gym_id = ?"),
        );
        let row = app.db.query_one(Statement::from_sql_and_values(backend, sql, [gym.into()])).await.unwrap().unwrap();
        out.push((*table, row.try_get::<i64>("", "n").unwrap()));
    }
    out
}

#[tokio::test]
async fn a_reset_empties_the_sandbox_and_keeps_its_setup_and_the_gyms_data() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Fixture").await;
    let test = app.test_key(&gym).await;
    let sandbox = gymapi::accounts::sandbox_of(&app.db, gym.id).await.unwrap().unwrap().id;
    fill(&app, &gym, &gym.live_key, false, "key-1").await;
    fill(&app, &gym, &test, true, "key-1").await;
    let live_before = totals(&app, &gym.live_key).await;
    assert!(rows_left(&app, sandbox).await.iter().filter(|(_, n)| *n > 0).count() >= 10);

    // A live key resets nothing.
    let r = app.request("POST", "/sandbox/reset", Some(&gym.live_key), None, &[]).await;
    assert_eq!((r.status, r.error_type()), (403, "forbidden"), "{}", r.body);
    assert!(totals(&app, &test).await.iter().any(|(_, n)| *n > 0));

    let r = app.request("POST", "/sandbox/reset", Some(&test), None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"], "sandbox_reset");

    // Every list is empty but the setup the reset keeps: the facility and the door.
    for (list, total) in totals(&app, &test).await {
        let kept = list.ends_with("/facilities") || list.ends_with("/devices/devices");
        assert_eq!(total, i64::from(kept), "{list} after the reset");
    }
    let left: Vec<_> = rows_left(&app, sandbox).await.into_iter().filter(|(_, n)| *n > 0).collect();
    assert!(left.is_empty(), "rows left in the sandbox: {left:?}");
    let stats = app.get(&test, "/statistics").await.body;
    assert_eq!((stats["members"]["total"].as_i64(), stats["check_ins_today"].as_i64()), (Some(0), Some(0)));
    let endpoints = gymapi::webhooks::list_endpoints(&app.db, &Actor::Operator, gym.id).await.unwrap();
    assert_eq!(endpoints.len(), 2, "both endpoints stay");
    // The gym's own data is untouched.
    assert_eq!(totals(&app, &gym.live_key).await, live_before);

    // A key the sandbox held before is new: another body is not refused, the same one runs again.
    for body in
        [json!({"first_name": "Alan", "last_name": "Turing"}), json!({"first_name": "Grace", "last_name": "Hopper"})]
    {
        let r = app.request("POST", "/members", Some(&test), Some(body), &[("Idempotency-Key", "key-1")]).await;
        assert_eq!((r.status, r.header("idempotency-replayed")), (201, Some("false")), "{}", r.body);
        assert_eq!(app.request("POST", "/sandbox/reset", Some(&test), None, &[]).await.status, 200);
    }
    // The live gym's key still replays its own first answer.
    let grace = json!({"first_name": "Grace", "last_name": "Hopper"});
    let r = app.request("POST", "/members", Some(&gym.live_key), Some(grace), &[("Idempotency-Key", "key-1")]).await;
    assert_eq!((r.status, r.header("idempotency-replayed")), (201, Some("true")), "{}", r.body);
}

/// Operators empty a sandbox with `gymapi sandbox reset`; a gym without one is told to provision it.
#[tokio::test]
async fn operators_reset_a_sandbox_from_the_cli() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Cli").await;
    let url = app.database_url.clone();
    let refused = crate::cli::gymapi(&url, &["sandbox", "reset", "--gym", &gym.id.to_string()], None);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Provision a sandbox first"));
    let test = app.test_key(&gym).await;
    assert_eq!(app.member(&test, "Ada", "Lovelace").await["object"], "member");
    let out = crate::cli::gymapi(&url, &["sandbox", "reset", "--gym", &gym.id.to_string(), "--json"], None);
    assert!(out.status.success(), "{out:?}");
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(said["reset_at"].is_string(), "{said}");
    assert_eq!(app.get(&test, "/members").await.body["meta"]["total"], 0);
    let args = ["sandbox", "reset", "--gym", &gym.id.to_string(), "--fixtures", "--json"];
    let out = crate::cli::gymapi(&url, &args, None);
    assert!(out.status.success(), "{out:?}");
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["contents"], "fixtures", "{said}");
    let members = app.get(&test, "/members").await.body;
    assert_eq!(members["data"][0]["email"], "ada@example.com", "{members}");
}

/// The example of the 200 answer of `op`, its `$ref` followed.
fn example_answer<'a>(doc: &'a Value, op: &'a Value) -> &'a Value {
    let mut schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
    if let Some(r) = schema["$ref"].as_str() {
        schema = doc.pointer(r.trim_start_matches('#')).unwrap();
    }
    &schema["example"]
}

/// The example of a path's `id` parameter, its `$ref` followed.
fn id_example<'a>(doc: &'a Value, item: &'a Value) -> Option<&'a str> {
    let param = item["parameters"].as_array()?.first()?;
    let param = match param["$ref"].as_str() {
        Some(r) => doc.pointer(r.trim_start_matches('#')).unwrap(),
        None => param,
    };
    (param["name"] == "id").then(|| param["example"].as_str()).flatten()
}

/// A reset to the fixtures writes the records the document's examples show: every path example of
/// a `GET` on one record names a fixture, answered exactly as the record's schema example shows it
/// (the event dated at the reset); every list holds exactly the fixtures, and a second reset
/// writes them again over the fixture facility it kept.
#[tokio::test]
async fn a_reset_to_the_fixtures_answers_every_path_example_with_its_schema_example() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Fixtures").await;
    let test = app.test_key(&gym).await;
    fill(&app, &gym, &test, true, "key-1").await;
    let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string("openapi.yaml").unwrap()).unwrap();
    for round in 0..2 {
        let r = app.request("POST", "/sandbox/reset?contents=fixtures", Some(&test), None, &[]).await;
        assert_eq!((r.status, r.body["contents"].as_str()), (200, Some("fixtures")), "{}", r.body);
        let reset_at = r.body["reset_at"].clone();
        let mut named = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            let (Some(id), Some(get)) = (id_example(&doc, item), item.get("get")) else { continue };
            let r = app.get(&test, &path.replace("{id}", id)).await;
            if path.starts_with("/webhook-deliveries/") {
                // The one documented exception: a delivery needs an endpoint gym users set up.
                assert_eq!(r.status, 404, "{path}: {}", r.body);
                continue;
            }
            assert_eq!(r.status, 200, "round {round}, {path}: {}", r.body);
            let mut expected = example_answer(&doc, get).clone();
            if expected.get("data").is_some_and(Value::is_array) {
                assert_eq!(r.body["meta"]["total"], 1, "{path}: {}", r.body);
                continue;
            }
            if path.starts_with("/events/") {
                expected["created_at"] = reset_at.clone();
            }
            assert_eq!(r.body, expected, "round {round}: {path} answers its example");
            named.push(path.clone());
        }
        assert_eq!(named.len(), 8, "{named:?}");
        for (list, total) in totals(&app, &test).await {
            // The gym's own facility and door stay beside the fixture facility and devices; the
            // orders of the device API are sales of the integration API.
            let expected = match list.rsplit('/').next().unwrap() {
                "attendance" | "access-logs" | "webhook-deliveries" => 0,
                "facilities" | "rings" => 2,
                "orders" | "purchases" => 5,
                "devices" => 6,
                _ => 1,
            };
            assert_eq!(total, expected, "round {round}: {list}");
        }
    }
    // Every path example of a `GET` of the device API names a fixture too.
    let devices: Value = serde_yaml_ng::from_str(&std::fs::read_to_string("openapi-devices.yaml").unwrap()).unwrap();
    for (path, item) in devices["paths"].as_object().unwrap() {
        let Some(params) = item["parameters"].as_array() else { continue };
        let mut filled = path.clone();
        for param in params {
            let param = devices.pointer(param["$ref"].as_str().unwrap().trim_start_matches('#')).unwrap();
            let (name, example) = (param["name"].as_str().unwrap(), param["example"].as_str().unwrap());
            filled = filled.replace(&format!("{{{name}}}"), example);
        }
        if item.get("get").is_some() {
            let r = app.device("GET", &format!("{filled}?wait=0"), &test, None, &[]).await;
            assert_eq!(r.status, 200, "{filled}: {}", r.body);
        }
    }
    // Nothing of the fixtures reaches the gym's own data, and an empty reset removes them.
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 0);
    let r = app.request("POST", "/sandbox/reset", Some(&test), None, &[]).await;
    assert_eq!((r.status, r.body["contents"].as_str()), (200, Some("empty")), "{}", r.body);
    assert_eq!(app.get(&test, "/members").await.body["meta"]["total"], 0);
}
