//! The device API of the front-desk app: its licence and budget, devices, the door's decisions,
//! the doorbell, and door commands by long poll, over HTTP, every answer checked against
//! openapi-devices.yaml.

use std::time::{Duration, Instant};

use gymapi::{
    accounts::{self, Actor, GymUpdate},
    records::now,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::common::{Gym, TestApp, devices_oracle, oracle};

/// Registers a device through the API; returns its id.
async fn register(app: &TestApp, key: &str, kind: &str, name: &str) -> String {
    let r = app.device("POST", "/devices", key, Some(json!({"kind": kind, "name": name})), &[]).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!((r.body["kind"].as_str(), r.body["online"].as_bool()), (Some(kind), Some(false)));
    r.body["id"].as_str().unwrap().to_string()
}

/// Asks `door` about `who` (`{"card": ..}` or `{"member_id": ..}`).
async fn ask(app: &TestApp, key: &str, door: &str, who: Value) -> Value {
    let r = app.device("POST", &format!("/doors/{door}/access"), key, Some(who), &[]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body
}

fn outcome(decision: &Value) -> (&str, Option<&str>) {
    (decision["decision"].as_str().unwrap(), decision["reason"].as_str())
}

/// The gym's members and memberships for the door's rules, through the import API: `ADA` may
/// enter, `BOB` once (a plan with one visit), `CY` is inactive, `DEE` holds no membership, `EVE`
/// lives at another facility. Returns the members' ids by legacy id.
async fn people(app: &TestApp, gym: &Gym, other_facility: Uuid) -> std::collections::HashMap<String, String> {
    let k = &gym.live_key;
    let price = json!({"amount": 100, "currency": "EUR"});
    let plans = json!({"rows": [
        {"legacy_id": "P-OPEN", "kind": "membership", "name": "Open", "price": price, "duration_days": 30},
        {"legacy_id": "P-ONE", "kind": "membership", "name": "One visit", "price": price, "visit_limit": 1},
    ]});
    assert_eq!(app.post(k, "/import/plans", plans).await.status, 200);
    let member = |id: &str, card: &str, status: &str| json!({"legacy_id": id, "first_name": id, "last_name": "Door", "access_card": card, "status": status});
    let members = json!({"rows": [
        member("ADA", "CARD-ADA", "active"), member("BOB", "CARD-BOB", "active"), member("CY", "CARD-CY", "inactive"),
        member("DEE", "CARD-DEE", "active"), member("EVE", "CARD-EVE", "active"),
    ]});
    assert_eq!(app.post(k, "/import/members", members).await.status, 200);
    let today = now().date_naive();
    let (from, to) =
        ((today - chrono::Duration::days(1)).to_string(), (today + chrono::Duration::days(30)).to_string());
    let holding = |id: &str, member: &str, plan: &str| json!({"legacy_id": id, "member_legacy_id": member, "plan_legacy_id": plan, "starts_on": from, "ends_on": to});
    let memberships = json!({"rows": [
        holding("H1", "ADA", "P-OPEN"), holding("H2", "BOB", "P-ONE"), holding("H3", "CY", "P-OPEN"),
        holding("H4", "EVE", "P-OPEN"),
        // DEE's membership ended before today.
        {"legacy_id": "H5", "member_legacy_id": "DEE", "plan_legacy_id": "P-OPEN", "starts_on": "2020-01-01", "ends_on": "2020-12-31"},
    ]});
    assert_eq!(app.post(k, "/import/memberships", memberships).await.status, 200);
    let list = app.get(k, "/members?per_page=100").await.body;
    let ids: std::collections::HashMap<String, String> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["legacy_id"].as_str().unwrap().to_string(), m["id"].as_str().unwrap().to_string()))
        .collect();
    let eve = &ids["EVE"];
    let moved = app.patch(k, &format!("/members/{eve}"), json!({"facility_id": other_facility})).await;
    assert_eq!(moved.status, 200, "{:?}", moved.body);
    ids
}

async fn second_facility(app: &TestApp, gym: &Gym) -> Uuid {
    let annex = gymapi::facilities::NewFacility { name: "Annex".into(), ..Default::default() };
    gymapi::facilities::create(&app.db, gym.id, annex).await.unwrap().id
}

#[tokio::test]
async fn the_door_decides_by_every_rule_and_writes_each_decision_as_attendance() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Door").await;
    let k = &gym.live_key;
    let hook =
        gymapi::webhooks::create_endpoint(&app.db, &Actor::Operator, gym.id, false, "http://127.0.0.1:9/h", &[], true);
    hook.await.unwrap();
    let annex = second_facility(&app, &gym).await;
    let ids = people(&app, &gym, annex).await;
    let door = register(&app, k, "door", "Main entrance").await;

    let ada = ask(&app, k, &door, json!({"card": "CARD-ADA"})).await;
    assert_eq!(outcome(&ada), ("granted", None));
    assert_eq!(ada["member_id"], ids["ADA"].as_str());
    assert_eq!(ada["device_id"], door.as_str());
    let by_id = ask(&app, k, &door, json!({"member_id": ids["ADA"]})).await;
    assert_eq!(outcome(&by_id), ("granted", None));
    let cases = [
        (json!({"card": "card-ada"}), "unknown_card"),
        (json!({"member_id": Uuid::now_v7()}), "unknown_member"),
        (json!({"card": "CARD-CY"}), "member_inactive"),
        (json!({"card": "CARD-EVE"}), "wrong_facility"),
        (json!({"card": "CARD-DEE"}), "no_active_membership"),
    ];
    for (who, reason) in cases {
        assert_eq!(outcome(&ask(&app, k, &door, who.clone()).await), ("denied", Some(reason)), "{who}");
    }
    assert_eq!(outcome(&ask(&app, k, &door, json!({"card": "CARD-BOB"})).await), ("granted", None));
    let again = ask(&app, k, &door, json!({"card": "CARD-BOB"})).await;
    assert_eq!(outcome(&again), ("denied", Some("visit_limit_reached")));
    assert_eq!(again["member_id"], ids["BOB"].as_str());

    // Every decision is an attendance entry at once: the granted ones check-ins, with the door.
    let ada_entries = app.get(k, &format!("/attendance?member_id={}", ids["ADA"])).await.body;
    assert_eq!(ada_entries["meta"]["total"], 2);
    for e in ada_entries["data"].as_array().unwrap() {
        assert_eq!((e["kind"].as_str(), e["status"].as_str()), (Some("check_in"), Some("granted")));
        assert_eq!(e["device_id"], door.as_str());
    }
    let denied = app.get(k, "/access-logs?status=denied").await.body;
    assert_eq!(denied["meta"]["total"], 6);
    assert!(denied["data"].as_array().unwrap().iter().all(|e| e["kind"] == "access"));
    let member = app.get(k, &format!("/members/{}", ids["ADA"])).await.body;
    assert_eq!(member["visits_count"], 2);
    assert!(member["last_visit_at"].is_string());
    // BOB's page counts his denied entry too, from his own count of entries.
    let bob = app.get(k, &format!("/attendance?member_id={}", ids["BOB"])).await.body;
    assert_eq!((bob["meta"]["total"].as_i64(), bob["data"].as_array().map(Vec::len)), (Some(2), Some(2)));
    crate::common::assert_day_counts_hold(&app.db, gym.id).await;
    let stats = app.get(k, "/statistics").await.body;
    assert_eq!(stats["check_ins_today"], 3);

    // Each fired attendance.created, whose payload is the document's AttendanceEvent.
    let deliveries = app.get(k, "/webhook-deliveries?event_type=attendance.created").await.body;
    assert_eq!(deliveries["meta"]["total"], 9);
    use sea_orm::EntityTrait;
    let events = entity::webhook_event::Entity::find().all(&app.db).await.unwrap();
    let attendance_events: Vec<_> = events.iter().filter(|e| e.event_type == "attendance.created").collect();
    assert_eq!(attendance_events.len(), 9);
    for e in attendance_events {
        let payload: serde_json::Value = serde_json::from_str(&e.payload).unwrap();
        oracle().check_schema("AttendanceEvent", &payload);
        oracle().check_schema("WebhookEvent", &payload);
    }
}

#[tokio::test]
async fn a_door_that_asks_again_with_its_key_gets_the_same_decision_and_writes_nothing() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Retry").await;
    let k = &gym.live_key;
    let annex = second_facility(&app, &gym).await;
    people(&app, &gym, annex).await;
    let door = register(&app, k, "door", "Main").await;
    let path = format!("/doors/{door}/access");
    let key = [("Idempotency-Key", "door-42")];
    let first = app.device("POST", &path, k, Some(json!({"card": "CARD-BOB"})), &key).await;
    let retry = app.device("POST", &path, k, Some(json!({"card": "CARD-BOB"})), &key).await;
    assert_eq!((first.status, retry.status), (200, 200));
    assert_eq!(first.body, retry.body);
    assert_eq!(retry.header("idempotency-replayed"), Some("true"));
    assert_eq!(outcome(&retry.body), ("granted", None), "the retry is the first answer, not a second visit");
    assert_eq!(app.get(k, "/attendance").await.body["meta"]["total"], 1);
}

/// Doors deciding at once, and the member's record changed meanwhile, all answer: on SQLite each
/// transaction takes the write lock before it reads, so none meets a snapshot gone stale.
#[tokio::test]
async fn doors_deciding_at_once_all_answer_and_count_every_visit() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Busy door").await;
    let k = &gym.live_key;
    let annex = second_facility(&app, &gym).await;
    let ids = people(&app, &gym, annex).await;
    let doors = [register(&app, k, "door", "A").await, register(&app, k, "door", "B").await];
    let ada = format!("/members/{}", ids["ADA"]);
    let asks = (0..96).map(|i| {
        let (app, door) = (&app, &doors[i % 2]);
        async move {
            let path = format!("/doors/{door}/access");
            app.device("POST", &path, k, Some(json!({"card": "CARD-ADA"})), &[]).await
        }
    });
    let edits = (0..32).map(|i| app.patch(k, &ada, json!({"city": format!("City {i}")})));
    let (decisions, edited) =
        futures_util::future::join(futures_util::future::join_all(asks), futures_util::future::join_all(edits)).await;
    for d in &decisions {
        assert_eq!((d.status, d.body["decision"].as_str()), (200, Some("granted")), "{}", d.body);
    }
    assert!(edited.iter().all(|r| r.status == 200), "{:?}", edited.iter().map(|r| r.status).collect::<Vec<_>>());
    assert_eq!(app.get(k, &ada).await.body["visits_count"], 96);
    crate::common::assert_day_counts_hold(&app.db, gym.id).await;
}

/// A door takes at most 20 commands a poll, the oldest first, and the rest with the next.
#[tokio::test]
async fn a_door_takes_twenty_commands_a_poll() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Busy door").await;
    let k = gym.live_key.clone();
    let door = register(&app, &k, "door", "Front door").await;
    let bell = register(&app, &k, "doorbell", "Bell").await;
    for _ in 0..25 {
        let ring = app.device("POST", &format!("/doorbells/{bell}/rings"), &k, Some(json!({})), &[]).await;
        let path = format!("/rings/{}/open", ring.body["id"].as_str().unwrap());
        assert_eq!(app.device("POST", &path, &k, Some(json!({"door_id": door})), &[]).await.status, 200);
    }
    let path = format!("/doors/{door}/commands");
    let poll = || app.device("GET", &path, &k, None, &[]);
    assert_eq!(poll().await.body["data"].as_array().unwrap().len(), 20);
    assert_eq!(poll().await.body["data"].as_array().unwrap().len(), 5);
    assert!(poll().await.body["data"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn a_ring_is_seen_opened_and_its_command_handed_to_the_door_once() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Bell").await;
    let k = gym.live_key.clone();
    let door = register(&app, &k, "door", "Front door").await;
    let bell = register(&app, &k, "doorbell", "Bell").await;

    // The front desk waits; a ring answers its poll at once.
    let desk = {
        let (client, base, k) = (app.client.clone(), app.address.clone(), k.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let r = client.get(format!("{base}/api/v1/devices/rings?wait=10")).bearer_auth(&k).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ring = app.device("POST", &format!("/doorbells/{bell}/rings"), &k, Some(json!({})), &[]).await;
    assert_eq!((ring.status, ring.body["state"].as_str()), (201, Some("pending")));
    let (status, seen, waited) = desk.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(seen["data"][0]["id"], ring.body["id"]);
    assert!(waited < Duration::from_secs(5), "the poll answered after {waited:?}");
    let ring_id = ring.body["id"].as_str().unwrap();

    // The door waits for commands; opening for the ring wakes it.
    let waiting_door = {
        let (client, base, k, door) = (app.client.clone(), app.address.clone(), k.clone(), door.clone());
        tokio::spawn(async move {
            let url = format!("{base}/api/v1/devices/doors/{door}/commands?wait=10");
            let r = client.get(url).bearer_auth(&k).send().await.unwrap();
            r.json::<Value>().await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let opened = app.device("POST", &format!("/rings/{ring_id}/open"), &k, Some(json!({"door_id": door})), &[]).await;
    assert_eq!((opened.status, opened.body["state"].as_str()), (200, Some("opened")), "{:?}", opened.body);
    let commands = waiting_door.await.unwrap();
    devices_oracle().check_schema("DoorCommandBatch", &commands);
    assert_eq!(commands["data"].as_array().unwrap().len(), 1);
    let command = &commands["data"][0];
    assert_eq!((command["state"].as_str(), command["ring_id"].as_str()), (Some("delivered"), Some(ring_id)));
    assert_eq!(command["id"], opened.body["command_id"]);

    // Handed out once: the next poll gets nothing.
    let next = app.device("GET", &format!("/doors/{door}/commands"), &k, None, &[]).await;
    assert_eq!(next.body["data"], json!([]));
    let ack_path = format!("/doors/{door}/commands/{}/ack", command["id"].as_str().unwrap());
    let ack = app.device("POST", &ack_path, &k, Some(json!({"outcome": "executed"})), &[]).await;
    assert_eq!((ack.status, ack.body["state"].as_str()), (200, Some("executed")));
    let same = app.device("POST", &ack_path, &k, Some(json!({"outcome": "executed"})), &[]).await;
    assert_eq!((same.status, same.body["reported_at"].clone()), (200, ack.body["reported_at"].clone()));
    let contradicting = app.device("POST", &ack_path, &k, Some(json!({"outcome": "failed"})), &[]).await;
    assert_eq!((contradicting.status, contradicting.error_type()), (409, "state_conflict"));

    // An answered ring cannot be answered again; nor a dismissed one.
    let twice = app.device("POST", &format!("/rings/{ring_id}/open"), &k, Some(json!({"door_id": door})), &[]).await;
    assert_eq!((twice.status, twice.error_type()), (409, "state_conflict"));
    let other =
        app.device("POST", &format!("/doorbells/{bell}/rings"), &k, Some(json!({"message": "Parcel"})), &[]).await;
    let other_id = other.body["id"].as_str().unwrap();
    let dismissed = app.device("POST", &format!("/rings/{other_id}/dismiss"), &k, None, &[]).await;
    assert_eq!(dismissed.body["state"], "dismissed");
    let late = app.device("POST", &format!("/rings/{other_id}/open"), &k, Some(json!({"door_id": door})), &[]).await;
    assert_eq!(late.status, 409);
    assert_eq!(app.device("GET", "/rings", &k, None, &[]).await.body["data"], json!([]), "no ring pending");
}

#[tokio::test]
async fn an_expired_command_is_never_handed_out() {
    let app = TestApp::spawn_with(|c| c.door_command_ttl = Duration::from_secs(1)).await;
    let gym = app.gym("Expiry").await;
    let k = &gym.live_key;
    let door = register(&app, k, "door", "Door").await;
    let bell = register(&app, k, "doorbell", "Bell").await;
    let ring = app.device("POST", &format!("/doorbells/{bell}/rings"), k, Some(json!({})), &[]).await;
    let ring_id = ring.body["id"].as_str().unwrap();
    let opened = app.device("POST", &format!("/rings/{ring_id}/open"), k, Some(json!({"door_id": door})), &[]).await;
    let command = opened.body["command_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let poll = app.device("GET", &format!("/doors/{door}/commands"), k, None, &[]).await;
    assert_eq!(poll.body["data"], json!([]));
    let ack = app
        .device("POST", &format!("/doors/{door}/commands/{command}/ack"), k, Some(json!({"outcome": "executed"})), &[])
        .await;
    assert_eq!((ack.status, ack.error_type()), (409, "state_conflict"));
}

/// Two servers on one PostgreSQL and Redis: a command made on one wakes a door waiting on the
/// other within a second. (The embedded default is one server: its wake-ups stay in process.)
#[tokio::test]
async fn a_command_made_on_one_server_wakes_a_door_waiting_on_another() {
    if std::env::var("TEST_REDIS_URL").is_err() {
        return;
    }
    let app = TestApp::spawn().await;
    let other = app.another_instance().await;
    let gym = app.gym("Two servers").await;
    let k = gym.live_key.clone();
    let door = register(&app, &k, "door", "Door").await;
    let bell = register(&app, &k, "doorbell", "Bell").await;
    let waiting = {
        let (client, k, door) = (app.client.clone(), k.clone(), door.clone());
        tokio::spawn(async move {
            let r = client.get(format!("{other}/api/v1/devices/doors/{door}/commands?wait=20")).bearer_auth(&k);
            let body: Value = r.send().await.unwrap().json().await.unwrap();
            (body, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ring = app.device("POST", &format!("/doorbells/{bell}/rings"), &k, Some(json!({})), &[]).await;
    let ring_id = ring.body["id"].as_str().unwrap();
    let opened = app.device("POST", &format!("/rings/{ring_id}/open"), &k, Some(json!({"door_id": door})), &[]).await;
    let made = Instant::now();
    assert_eq!(opened.status, 200);
    let (body, arrived) = waiting.await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "{body}");
    assert!(arrived.duration_since(made) < Duration::from_secs(1), "woken after {:?}", arrived.duration_since(made));
}

#[tokio::test]
async fn a_server_shutting_down_answers_its_waiting_polls_at_once() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Shutdown").await;
    let door = register(&app, &gym.live_key, "door", "Door").await;
    let waiting = {
        let (client, base, k) = (app.client.clone(), app.address.clone(), gym.live_key.clone());
        tokio::spawn(async move {
            let r = client.get(format!("{base}/api/v1/devices/doors/{door}/commands?wait=25")).bearer_auth(&k);
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    app.shutdown.begin();
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
    assert_eq!((status, body["data"].clone()), (200, json!([])));
    assert!(began.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn device_features_and_api_access_are_licensed_apart() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Licence").await;
    let k = &gym.live_key;
    let update = |api: bool, devices: bool| GymUpdate {
        api_access: Some(api),
        device_access: Some(devices),
        ..Default::default()
    };
    accounts::update_gym(&app.db, &*app.store, gym.id, update(true, false)).await.unwrap();
    let refused = app.device("GET", "/devices", k, None, &[]).await;
    assert_eq!(
        (refused.status, refused.body["error"]["message"].as_str()),
        (403, Some("This gym does not have device features enabled."))
    );
    assert_eq!(app.get(k, "/members").await.status, 200);
    accounts::update_gym(&app.db, &*app.store, gym.id, update(false, true)).await.unwrap();
    assert_eq!(app.device("GET", "/devices", k, None, &[]).await.status, 200);
    let no_api = app.get(k, "/members").await;
    assert_eq!(
        (no_api.status, no_api.body["error"]["message"].as_str()),
        (403, Some("This gym does not have API access enabled."))
    );
}

#[tokio::test]
async fn one_key_has_a_device_budget_apart_from_its_integration_budget() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limit_per_minute = 2;
        c.device_rate_limit_per_minute = 3;
    })
    .await;
    let gym = app.gym("Budgets").await;
    let k = &gym.live_key;
    for _ in 0..2 {
        assert_eq!(app.get(k, "/members").await.header("x-ratelimit-limit"), Some("2"));
    }
    assert_eq!(app.get(k, "/members").await.status, 429);
    for left in ["2", "1", "0"] {
        let r = app.device("GET", "/devices", k, None, &[]).await;
        assert_eq!(
            (r.status, r.header("x-ratelimit-limit"), r.header("x-ratelimit-remaining")),
            (200, Some("3"), Some(left))
        );
    }
    let over = app.device("GET", "/devices", k, None, &[]).await;
    assert_eq!(over.status, 429);
    assert!(over.header("retry-after").is_some());
}

#[tokio::test]
async fn a_revoked_key_stops_its_devices_and_a_test_key_sees_only_the_sandbox() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Keys").await;
    let live_door = register(&app, &gym.live_key, "door", "Live door").await;
    let test_key = app.test_key(&gym).await;
    let sandbox_door = register(&app, &test_key, "door", "Sandbox door").await;
    let listed = app.device("GET", "/devices", &test_key, None, &[]).await.body;
    assert_eq!(listed["meta"]["total"], 1);
    assert_eq!(listed["data"][0]["id"], sandbox_door.as_str());
    let crossing =
        app.device("POST", &format!("/doors/{live_door}/access"), &test_key, Some(json!({"card": "X"})), &[]).await;
    assert_eq!(crossing.status, 404);
    accounts::revoke_key(&app.db, &*app.store, &Actor::Operator, gym.live_key_id).await.unwrap();
    assert_eq!(app.device("GET", &format!("/devices/{live_door}"), &gym.live_key, None, &[]).await.status, 401);
}

/// A rolled key keeps working for integrations through its grace period, but its devices stop at
/// once: the companion app signs in with the new key.
#[tokio::test]
async fn a_rolled_key_stops_its_devices_at_once() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Rolled").await;
    let door = register(&app, &gym.live_key, "door", "Door").await;
    let grace = std::time::Duration::from_secs(3600);
    let rolled = accounts::roll_key(&app.db, &*app.store, &Actor::Operator, gym.live_key_id, grace).await.unwrap();
    let old = app.device("GET", &format!("/devices/{door}"), &gym.live_key, None, &[]).await;
    assert_eq!((old.status, old.error_type()), (401, "unauthorized"));
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200, "integrations keep the grace period");
    assert_eq!(app.device("GET", &format!("/devices/{door}"), &rolled.new.key, None, &[]).await.status, 200);
}

#[tokio::test]
async fn devices_are_seen_and_paths_name_the_kind_they_want() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Registry").await;
    let k = &gym.live_key;
    let bell = register(&app, k, "doorbell", "Bell").await;
    let beat = app.device("POST", &format!("/devices/{bell}/heartbeat"), k, None, &[]).await;
    assert_eq!((beat.status, beat.body["online"].as_bool()), (200, Some(true)));
    assert!(beat.body["last_seen_at"].is_string());
    let not_a_door = app.device("POST", &format!("/doors/{bell}/access"), k, Some(json!({"card": "X"})), &[]).await;
    assert_eq!((not_a_door.status, not_a_door.error_type()), (404, "not_found"));
    assert!(not_a_door.body["error"]["message"].as_str().unwrap().starts_with("No door with id"));
    let door = register(&app, k, "door", "Door").await;
    // The front desk looking at a door is not the door's request: it stays offline, never seen.
    assert_eq!(app.device("GET", &format!("/devices/{door}"), k, None, &[]).await.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let looked = app.device("GET", &format!("/devices/{door}"), k, None, &[]).await.body;
    assert_eq!((looked["online"].as_bool(), looked["last_seen_at"].is_null()), (Some(false), true), "{looked}");
    for body in [json!({}), json!({"card": "X", "member_id": Uuid::now_v7()})] {
        let r = app.device("POST", &format!("/doors/{door}/access"), k, Some(body), &[]).await;
        assert_eq!((r.status, r.body["errors"]["body"].is_array()), (422, true));
    }
    let foreign = app
        .device("POST", "/devices", k, Some(json!({"kind": "kiosk", "name": "K", "facility_id": Uuid::now_v7()})), &[])
        .await;
    assert_eq!((foreign.status, foreign.body["errors"]["facility_id"].is_array()), (422, true));
    let kiosks = app.device("GET", "/devices?kind=doorbell", k, None, &[]).await.body;
    assert_eq!(kiosks["meta"]["total"], 1);
}

#[tokio::test]
async fn the_device_document_is_served_to_device_keys_and_never_in_the_integration_one() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Documents").await;
    let r =
        app.raw(reqwest::Method::GET, "/api/v1/devices/openapi.yaml").bearer_auth(&gym.live_key).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("operationId: decideAccess"));
    for path in oracle().doc()["paths"].as_object().unwrap().keys() {
        let first = path.split('/').nth(1).unwrap_or_default();
        assert!(
            !["devices", "doors", "doorbells", "rings"].contains(&first),
            "openapi.yaml lists the device path {path}"
        );
    }
    accounts::update_gym(&app.db, &*app.store, gym.id, GymUpdate { device_access: Some(false), ..Default::default() })
        .await
        .unwrap();
    let r =
        app.raw(reqwest::Method::GET, "/api/v1/devices/openapi.yaml").bearer_auth(&gym.live_key).send().await.unwrap();
    assert_eq!(r.status(), 403);
}

/// Long polls that may wait are bounded per key and per gym on a server: one more is 429 with
/// `Retry-After`, while another gym's polls and requests answer as usual, and a poll that ended
/// gives its place back.
#[tokio::test]
async fn waiting_polls_are_capped_per_key_and_per_gym() {
    let app = TestApp::spawn_with(|c| {
        c.long_polls_per_key = 2;
        c.long_polls_per_gym = 3;
    })
    .await;
    let busy = app.gym("Busy").await;
    let second_key =
        accounts::create_key(&app.db, &Actor::Operator, busy.id, gymapi::context::Environment::Live, "two")
            .await
            .unwrap()
            .key;
    let door = register(&app, &busy.live_key, "door", "Door").await;
    let poll = |key: &str, wait: u32| {
        let url = format!("{}/api/v1/devices/doors/{door}/commands?wait={wait}", app.address);
        crate::common::http_client().get(url).bearer_auth(key).send()
    };
    let waiting: Vec<_> =
        [&busy.live_key, &busy.live_key, &second_key].into_iter().map(|k| tokio::spawn(poll(k, 3))).collect();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let path = format!("/doors/{door}/commands?wait=3");
    for (key, cap) in [(&busy.live_key, "the key's"), (&second_key, "the gym's")] {
        let refused = app.device("GET", &path, key, None, &[]).await;
        assert_eq!((refused.status, refused.error_type()), (429, "rate_limited"), "{cap} cap");
        assert!(refused.header("retry-after").is_some());
    }
    let now = app.device("GET", &format!("/doors/{door}/commands?wait=0"), &busy.live_key, None, &[]).await;
    assert_eq!(now.status, 200, "a poll that does not wait needs no place");

    let quiet = app.gym("Quiet").await;
    let their_door = register(&app, &quiet.live_key, "door", "Their door").await;
    let theirs = app.device("GET", &format!("/doors/{their_door}/commands?wait=1"), &quiet.live_key, None, &[]).await;
    assert_eq!(theirs.status, 200, "another gym's poll waits as usual");
    assert_eq!(app.device("GET", "/devices", &quiet.live_key, None, &[]).await.status, 200);

    for w in waiting {
        assert_eq!(w.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(
        app.device("GET", &format!("/doors/{door}/commands?wait=1"), &busy.live_key, None, &[]).await.status,
        200
    );
}
