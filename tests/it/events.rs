//! `GET /events`: every event a webhook carries, listed and read by id as the bytes delivered,
//! whether or not an endpoint listens, for the 30 days events are kept.

use std::{collections::BTreeSet, time::Duration};

use gymapi::accounts::Actor;
use reqwest::Method;
use serde_json::json;

use crate::common::TestApp;
use crate::counter::{approved, counter};
use crate::webhooks::{Receiver, endpoint, spawn_app};

/// The body of `GET path` as its bytes.
async fn raw_get(app: &TestApp, key: &str, path: &str) -> (u16, String) {
    let r = app.raw(Method::GET, &format!("/api/v1{path}")).bearer_auth(key).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// A change of each kind that has an event: a member created and changed, an import, a door's
/// decision, a sale ordered and paid, a ping.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_kind_of_event_reads_back_byte_for_byte_as_it_was_delivered() {
    let app = spawn_app(true).await;
    let c = counter(&app, "Events").await;
    let k = c.key().to_string();
    let receiver = Receiver::start(&[]).await;
    let ep = endpoint(&app, &c.gym, &receiver.url, &[]).await;

    let member = app.member(&k, "Ada", "Lovelace").await;
    let id = member["id"].as_str().unwrap();
    assert_eq!(app.patch(&k, &format!("/members/{id}"), json!({"city": "London"})).await.status, 200);
    let rows = json!({"rows": [{"legacy_id": "M-1", "first_name": "Imported", "last_name": "Member"}]});
    assert_eq!(app.post(&k, "/import/members", rows).await.status, 200);
    let door = crate::counter::register(&app, &k, "door", "Door").await;
    let r = app.device("POST", &format!("/doors/{door}/access"), &k, Some(json!({"member_id": id})), &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let order = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    assert_eq!(order.status, 201, "{}", order.body);
    let jobs = c.take_payment(&app, &c.terminal).await;
    let job = jobs[0]["id"].as_str().unwrap();
    assert_eq!(c.report_payment(&app, &c.terminal, job, approved()).await.status, 200);
    gymapi::webhooks::ping(&app.db, &Actor::Operator, ep.model.id).await.unwrap();

    let got = receiver.wait_for(7).await;
    let kinds: BTreeSet<String> = got.iter().map(|r| r.json()["type"].as_str().unwrap().to_string()).collect();
    let every: BTreeSet<String> = ["member.created", "member.updated", "import.completed", "attendance.created"]
        .into_iter()
        .chain(["purchase.created", "purchase.updated", "ping"])
        .map(str::to_string)
        .collect();
    assert_eq!(kinds, every, "a change of every kind was delivered");
    let (status, list) = raw_get(&app, &k, "/events?per_page=100").await;
    assert_eq!(status, 200, "{list}");
    crate::common::oracle().check_schema("EventList", &serde_json::from_str(&list).unwrap());
    for delivered in &got {
        let (status, event) = raw_get(&app, &k, &format!("/events/{}", delivered.header("webhook-id"))).await;
        assert_eq!(status, 200, "{event}");
        assert_eq!(event, delivered.body, "GET /events/{{id}} is the delivered body, byte for byte");
        assert!(list.contains(&delivered.body), "the list holds the delivered body: {}", delivered.body);
    }
    // A delivery names its event.
    let d = app.get(&k, "/webhook-deliveries?event_type=ping").await.body;
    let event_id = d["data"][0]["event_id"].as_str().unwrap();
    assert_eq!(app.get(&k, &format!("/events/{event_id}")).await.body["type"], "ping");
}

/// Nothing listens to the sandbox: its events are kept all the same, apart from the gym's own,
/// and listed by type and time like any list.
#[tokio::test]
async fn events_are_kept_without_an_endpoint_and_filtered_by_type_and_time() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Quiet").await;
    let test_key = app.test_key(&gym).await;
    let before = chrono::Utc::now();
    let member = app.member(&test_key, "Grace", "Hopper").await;
    let id = member["id"].as_str().unwrap();
    assert_eq!(app.patch(&test_key, &format!("/members/{id}"), json!({"city": "Arlington"})).await.status, 200);

    let all = app.get(&test_key, "/events").await;
    assert_eq!(all.status, 200, "{}", all.body);
    let types: Vec<&str> = all.body["data"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["member.updated", "member.created"], "newest first");
    assert_eq!(all.body["meta"]["total"], 2);
    let created = app.get(&test_key, "/events?event_type=member.created").await.body;
    assert_eq!(created["data"].as_array().unwrap().len(), 1);
    assert_eq!(created["data"][0]["data"], member, "the member as POST /members answered it");
    let since = before.format("%Y-%m-%dT%H:%M:%S%.6f%:z").to_string().replace('+', "%2B");
    assert_eq!(app.get(&test_key, &format!("/events?from={since}")).await.body["meta"]["total"], 2);
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    assert_eq!(app.get(&test_key, &format!("/events?from={later}")).await.body["meta"]["total"], 0);
    assert_eq!(app.get(&test_key, &format!("/events?to={later}")).await.body["meta"]["total"], 2);

    // The gym's live key sees none of the sandbox's events, nor another gym's.
    let event = all.body["data"][0]["id"].as_str().unwrap();
    assert_eq!(app.get(&gym.live_key, "/events").await.body["meta"]["total"], 0);
    assert_eq!(app.get(&gym.live_key, &format!("/events/{event}")).await.status, 404);
    let other = app.gym("Other").await;
    assert_eq!(app.get(&other.live_key, &format!("/events/{event}")).await.status, 404);
    let bad = app.get(&test_key, "/events?event_type=member.deleted").await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    // A sandbox reset removes them.
    assert_eq!(app.request("POST", "/sandbox/reset", Some(&test_key), None, &[]).await.status, 200);
    assert_eq!(app.get(&test_key, "/events").await.body["meta"]["total"], 0);
}

/// Moves the gym's events and their deliveries `days` back in time, behind the API.
async fn age(app: &TestApp, event: &str, days: i64) {
    let at = gymapi::records::to_micros(chrono::Utc::now() - chrono::Duration::days(days));
    let backend = sea_orm::ConnectionTrait::get_database_backend(&app.db);
    for table in ["webhook_events", "webhook_deliveries"] {
        let column = if table == "webhook_events" { "id" } else { "event_id" };
        let sql = gymapi::db::placeholders(backend, &format!("UPDATE {table} SET created_at = ? WHERE {column} = ?"));
        let event: uuid::Uuid = event.parse().unwrap();
        let statement = sea_orm::Statement::from_sql_and_values(backend, sql, [at.into(), event.into()]);
        sea_orm::ConnectionTrait::execute(&app.db, statement).await.unwrap();
    }
}

/// An event is kept 30 days, then removed with its delivered deliveries; a pending delivery
/// keeps its event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_past_thirty_days_are_removed_with_their_finished_deliveries() {
    let app = TestApp::spawn_with(|c| {
        c.event_sweep_every = Duration::from_millis(200);
        c.webhook_allow_private = true;
        c.webhook_dispatch = false;
    })
    .await;
    let gym = app.gym("Old").await;
    let k = &gym.live_key;
    let receiver = Receiver::start(&[]).await;
    endpoint(&app, &gym, &receiver.url, &["member.created"]).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let m = app.member(k, "Old", &format!("Member {i}")).await;
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    let events = app.get(k, "/events?event_type=member.created").await.body;
    let by_member = |member: &str| {
        let e = events["data"].as_array().unwrap().iter().find(|e| e["data"]["id"] == member).unwrap();
        e["id"].as_str().unwrap().to_string()
    };
    let (gone, young, waiting) = (by_member(&ids[0]), by_member(&ids[1]), by_member(&ids[2]));
    for (event, days) in [(&gone, 31), (&young, 29), (&waiting, 31)] {
        age(&app, event, days).await;
    }
    // The first two deliveries ended; the third is still pending (nothing sends here).
    let backend = sea_orm::ConnectionTrait::get_database_backend(&app.db);
    let sql = gymapi::db::placeholders(
        backend,
        "UPDATE webhook_deliveries SET status = 'delivered' WHERE event_id IN (?, ?)",
    );
    let values = [gone.parse::<uuid::Uuid>().unwrap().into(), young.parse::<uuid::Uuid>().unwrap().into()];
    sea_orm::ConnectionTrait::execute(&app.db, sea_orm::Statement::from_sql_and_values(backend, sql, values))
        .await
        .unwrap();

    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app.get(k, &format!("/events/{gone}")).await.status != 404 {
        assert!(std::time::Instant::now() < deadline, "the 31-day-old event is still there");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(app.get(k, &format!("/events/{young}")).await.status, 200, "29 days old: kept");
    assert_eq!(app.get(k, &format!("/events/{waiting}")).await.status, 200, "a pending delivery keeps its event");
    let deliveries = app.get(k, "/webhook-deliveries").await.body;
    let of: Vec<&str> =
        deliveries["data"].as_array().unwrap().iter().map(|d| d["event_id"].as_str().unwrap()).collect();
    assert!(!of.contains(&gone.as_str()) && of.contains(&young.as_str()) && of.contains(&waiting.as_str()), "{of:?}");
    assert_eq!(app.get(k, "/events").await.body["meta"]["total"], 2);
}
