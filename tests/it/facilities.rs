//! A gym with several locations: facilities made, listed, renamed and archived by the operators'
//! CLI, read through the API, and holding members and doors apart.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::cli::{gymapi, json_of};
use crate::common::{Gym, TestApp};

/// Runs the CLI, blocking the test's thread: the tests run on a runtime with worker threads, so
/// that the server goes on meanwhile (on the test's one thread, a write the server had begun would
/// hold the file's lock until the CLI gave up: "database is locked").
fn cli(app: &TestApp, args: &[&str]) -> Value {
    json_of(&gymapi(&app.database_url, args, None))
}

/// The CLI refuses, exiting 2 with a message containing `says`.
fn cli_refuses(app: &TestApp, args: &[&str], says: &str) {
    let out = gymapi(&app.database_url, args, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(says), "{stderr}");
}

async fn member_in(app: &TestApp, gym: &Gym, name: &str, facility: Option<&str>) -> Value {
    let mut body = json!({"first_name": name, "last_name": "Placed"});
    if let Some(f) = facility {
        body["facility_id"] = json!(f);
    }
    let r = app.request("POST", "/members", Some(&gym.live_key), Some(body), &[]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gym_with_two_facilities_from_the_cli_keeps_members_and_doors_apart() {
    let app = TestApp::spawn().await;
    let gym = app.gym_in("Two studios", "Europe/Berlin").await;
    let g = gym.id.to_string();
    let made = cli(
        &app,
        &[
            "facility",
            "create",
            "--gym",
            &g,
            "--name",
            "Riverside",
            "--timezone",
            "Europe/London",
            "--legacy-id",
            "RIV",
            "--json",
        ],
    );
    let riverside = made["id"].as_str().unwrap().to_string();
    let listed = cli(&app, &["facility", "list", "--gym", &g, "--json"]);
    let names: Vec<_> = listed["data"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Main facility", "Riverside"]);
    let main = listed["data"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(listed["data"][1]["timezone"], "Europe/London");
    assert_eq!(listed["data"][1]["sandbox"], false);

    // The API lists both, newest first; a facility without its own time zone has the gym's.
    let page = app.get(&gym.live_key, "/facilities").await.body;
    assert_eq!(page["meta"]["total"], 2);
    let ids: Vec<_> = page["data"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [riverside.as_str(), main.as_str()]);
    let one = app.get(&gym.live_key, &format!("/facilities/{main}")).await;
    assert_eq!((one.status, one.body["timezone"].as_str()), (200, Some("Europe/Berlin")));
    assert_eq!(app.get(&gym.live_key, &format!("/facilities/{riverside}")).await.body["legacy_id"], "RIV");
    let other = app.gym("Elsewhere").await;
    assert_eq!(app.get(&other.live_key, &format!("/facilities/{main}")).await.status, 404);
    assert_eq!(app.get(&gym.live_key, &format!("/facilities/{}", Uuid::now_v7())).await.status, 404);

    // Members go where they are placed; a door of Riverside lets in only Riverside's members.
    let at_main = member_in(&app, &gym, "Ada", None).await;
    assert_eq!(at_main["facility_id"], main.as_str());
    let at_river = member_in(&app, &gym, "Bo", Some(&riverside)).await;
    let door = json!({"kind": "door", "name": "River door", "facility_id": riverside});
    let door = app.device("POST", "/devices", &gym.live_key, Some(door), &[]).await;
    assert_eq!(door.status, 201, "{}", door.body);
    let access = format!("/doors/{}/access", door.body["id"].as_str().unwrap());
    let asked = app.device("POST", &access, &gym.live_key, Some(json!({"member_id": at_main["id"]})), &[]).await;
    assert_eq!(
        (asked.body["decision"].as_str(), asked.body["reason"].as_str()),
        (Some("denied"), Some("wrong_facility"))
    );
    let asked = app.device("POST", &access, &gym.live_key, Some(json!({"member_id": at_river["id"]})), &[]).await;
    assert_ne!(asked.body["reason"], "wrong_facility", "{}", asked.body);
    assert_eq!(app.get(&gym.live_key, "/statistics").await.body["facilities"], 2);

    let renamed = cli(&app, &["facility", "rename", &riverside, "--name", "Riverside studio", "--json"]);
    assert_eq!(renamed["name"], "Riverside studio");
    archive_moves_everyone(&app, &gym, (&main, &riverside), (&at_river, &door.body)).await;
}

/// Archiving Riverside: refused while its member and door are there and for the last open
/// facility; with `--move-to` both move in the same step, and it takes no new member or device.
async fn archive_moves_everyone(
    app: &TestApp,
    gym: &Gym,
    (main, river): (&str, &str),
    (member, door): (&Value, &Value),
) {
    cli_refuses(app, &["facility", "archive", river], "choose where they move to");
    let archived = cli(app, &["facility", "archive", river, "--move-to", main, "--json"]);
    assert_eq!((archived["members_moved"].as_u64(), archived["devices_moved"].as_u64()), (Some(1), Some(1)));
    assert!(archived["archived_at"].is_string());
    let moved = app.get(&gym.live_key, &format!("/members/{}", member["id"].as_str().unwrap())).await.body;
    assert_eq!(moved["facility_id"], main);
    let device =
        app.device("GET", &format!("/devices/{}", door["id"].as_str().unwrap()), &gym.live_key, None, &[]).await;
    assert_eq!(device.body["facility_id"], main);
    cli_refuses(app, &["facility", "archive", main], "last open facility");

    let body = json!({"first_name": "Late", "last_name": "Comer", "facility_id": river});
    let refused = app.request("POST", "/members", Some(&gym.live_key), Some(body), &[]).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body["errors"]["facility_id"][0].as_str().unwrap().contains("archived"), "{}", refused.body);
    let door = json!({"kind": "door", "name": "Late door", "facility_id": river});
    assert_eq!(app.device("POST", "/devices", &gym.live_key, Some(door), &[]).await.status, 422);
    let read = app.get(&gym.live_key, &format!("/facilities/{river}")).await.body;
    assert!(read["archived_at"].is_string(), "{read}");
    assert_eq!(app.get(&gym.live_key, "/statistics").await.body["facilities"], 1);
    assert_eq!(app.get(&gym.live_key, "/facilities").await.body["meta"]["total"], 2, "archived ones stay listed");
}

/// A facility of the sandbox is the sandbox's alone: a test key sees it, a live key does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_facility_is_seen_by_test_keys_only() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Rehearsing").await;
    let test_key = app.test_key(&gym).await;
    let g = gym.id.to_string();
    let made = cli(&app, &["facility", "create", "--gym", &g, "--sandbox", "--name", "Rehearsal room", "--json"]);
    let id = made["id"].as_str().unwrap();
    assert_eq!(app.get(&test_key, &format!("/facilities/{id}")).await.status, 200);
    assert_eq!(app.get(&gym.live_key, &format!("/facilities/{id}")).await.status, 404);
    let listed = cli(&app, &["facility", "list", "--gym", &g, "--json"]);
    let sandboxed: Vec<_> = listed["data"].as_array().unwrap().iter().filter(|f| f["sandbox"] == true).collect();
    assert_eq!(sandboxed.len(), 2, "the sandbox's first facility and the new one: {listed}");
    cli_refuses(&app, &["facility", "create", "--gym", &g, "--name", " "], "1 to 200 characters");
    cli_refuses(
        &app,
        &["facility", "create", "--gym", &g, "--name", "X", "--timezone", "Mars/Base"],
        "unknown time zone",
    );
}

/// An archive and a new member racing for one facility, many times: the member is either refused
/// (422 on `facility_id`) or written and moved with the others, never left in the archived
/// facility; the archive always goes through. Checked in the database after each try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_and_a_new_member_racing_never_leave_the_member_behind() {
    let app = std::sync::Arc::new(TestApp::spawn().await);
    let gym = app.gym("Racing studios").await;
    let main = gymapi::accounts::first_facility(&app.db, gym.id).await.unwrap().unwrap().id;
    let store = gymapi::limits::MemoryStore::default();
    let (mut written, mut refused) = (0, 0);
    for i in 0..16 {
        let new = gymapi::facilities::NewFacility { name: format!("Pop-up {i}"), ..Default::default() };
        let popup = gymapi::facilities::create(&app.db, gym.id, new).await.unwrap().id;
        let body = json!({"first_name": "Racer", "last_name": format!("{i}"), "facility_id": popup});
        let (app2, key) = (app.clone(), gym.live_key.clone());
        let member = tokio::spawn(async move { app2.request("POST", "/members", Some(&key), Some(body), &[]).await });
        let operator = gymapi::accounts::Actor::Operator;
        let archived = gymapi::accounts::archive_facility(&app.db, &store, &operator, gym.id, popup, Some(main)).await;
        let member = member.await.unwrap();
        assert!(archived.is_ok(), "try {i}: {archived:?}");
        match member.status {
            201 => written += 1,
            422 => refused += 1,
            s => panic!("try {i}: {s} {}", member.body),
        }
        let left = gymapi::facilities::find(&app.db, &[gym.id], popup).await.unwrap();
        assert!(left.archived_at.is_some());
        let page = app.get(&gym.live_key, "/members?per_page=100").await.body;
        let behind = page["data"].as_array().unwrap().iter().filter(|m| m["facility_id"] == popup.to_string()).count();
        assert_eq!(behind, 0, "try {i}: a member was left in the archived facility");
    }
    println!("{written} members written and moved, {refused} refused");
}

/// The writes that place a member racing an archive of the facility they name, many times each:
/// moving a member there (`PATCH /members/{id}`) and importing one into it (`POST /import/members`)
/// are either refused (422 naming the facility) or written and moved with the others, never 500
/// and never left in the archived facility (PostgreSQL answered 500 to a refusal of the
/// facility's key in most races).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_and_imports_racing_an_archive_are_refused_or_moved() {
    let app = std::sync::Arc::new(TestApp::spawn().await);
    let gym = app.gym("Racing moves").await;
    let main = gymapi::accounts::first_facility(&app.db, gym.id).await.unwrap().unwrap().id;
    let mover = app.post(&gym.live_key, "/members", json!({"first_name": "Mover", "last_name": "M"})).await;
    let mover = mover.body["id"].as_str().unwrap().to_string();
    let store = gymapi::limits::MemoryStore::default();
    let mut answers = std::collections::BTreeMap::new();
    for i in 0..24 {
        let legacy = format!("POP-{i}");
        let new = gymapi::facilities::NewFacility {
            name: format!("Pop-up {i}"),
            legacy_id: Some(legacy.clone()),
            ..Default::default()
        };
        let popup = gymapi::facilities::create(&app.db, gym.id, new).await.unwrap().id;
        let (method, path, body) = match i % 2 {
            0 => ("PATCH", format!("/members/{mover}"), json!({"facility_id": popup})),
            _ => {
                let row = json!({"legacy_id": format!("I-{i}"), "first_name": "Imported", "last_name": format!("{i}"),
                                 "facility_legacy_id": legacy});
                ("POST", "/import/members".to_string(), json!({"rows": [row]}))
            }
        };
        let (app2, key) = (app.clone(), gym.live_key.clone());
        let write = tokio::spawn(async move { app2.request(method, &path, Some(&key), Some(body), &[]).await });
        let operator = gymapi::accounts::Actor::Operator;
        let archived = gymapi::accounts::archive_facility(&app.db, &store, &operator, gym.id, popup, Some(main)).await;
        let write = write.await.unwrap();
        assert!(archived.is_ok(), "try {i}: {archived:?}");
        match write.status {
            200 => {}
            422 => {
                let problems = write.body["errors"].as_object().unwrap();
                assert!(problems.keys().all(|k| k.contains("facility")), "try {i}: {}", write.body);
            }
            s => panic!("try {i}: {method} answered {s} {}", write.body),
        }
        *answers.entry((method, write.status)).or_insert(0) += 1;
        let page = app.get(&gym.live_key, "/members?per_page=100").await.body;
        let behind = page["data"].as_array().unwrap().iter().filter(|m| m["facility_id"] == popup.to_string()).count();
        assert_eq!(behind, 0, "try {i}: a member was left in the archived facility");
    }
    println!("{answers:?}");
}

/// A door's "today" is its facility's: a gym keeping Pago Pago's time (UTC−11) with a studio on
/// Kiritimati (UTC+14), whose calendars never show the same day. A membership that starts on the
/// studio's today lets the member through the studio's door, while by the gym's calendar it has
/// not started yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_door_counts_days_in_its_facilitys_time_zone() {
    let app = TestApp::spawn().await;
    let gym = app.gym_in("Date line", "Pacific/Pago_Pago").await;
    let k = &gym.live_key;
    let facilities = json!({"rows": [{"legacy_id": "KIR", "name": "Island studio", "timezone": "Pacific/Kiritimati"}]});
    assert_eq!(app.post(k, "/import/facilities", facilities).await.status, 200);
    let plans = json!({"rows": [{"legacy_id": "P", "kind": "membership", "name": "Open", "price": {"amount": 100, "currency": "EUR"}, "duration_days": 30}]});
    assert_eq!(app.post(k, "/import/plans", plans).await.status, 200);
    let members =
        json!({"rows": [{"legacy_id": "M", "first_name": "Kiri", "last_name": "Early", "facility_legacy_id": "KIR"}]});
    assert_eq!(app.post(k, "/import/members", members).await.status, 200);
    let island_today = gymapi::records::now().with_timezone(&chrono_tz::Pacific::Kiritimati).date_naive();
    let holding = json!({"rows": [{"legacy_id": "H", "member_legacy_id": "M", "plan_legacy_id": "P", "starts_on": island_today.to_string()}]});
    assert_eq!(app.post(k, "/import/memberships", holding).await.status, 200);
    let member = app.get(k, "/members?per_page=1").await.body["data"][0].clone();
    let island = member["facility_id"].as_str().unwrap();
    let door = json!({"kind": "door", "name": "Island door", "facility_id": island});
    let door = app.device("POST", "/devices", k, Some(door), &[]).await.body["id"].as_str().unwrap().to_string();
    let asked =
        app.device("POST", &format!("/doors/{door}/access"), k, Some(json!({"member_id": member["id"]})), &[]).await;
    assert_eq!(asked.body["decision"], "granted", "{}", asked.body);
}

/// A sale at the island studio's kiosk is taken only by the island's terminal, and its receipt's
/// local time is the island's: it prints in Kiritimati's time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_is_printed_in_its_facilitys_time_zone() {
    let app = TestApp::spawn().await;
    let gym = app.gym_in("Receipts", "Pacific/Pago_Pago").await;
    let k = gym.live_key.clone();
    let facilities = json!({"rows": [{"legacy_id": "KIR", "name": "Island studio", "timezone": "Pacific/Kiritimati"}]});
    assert_eq!(app.post(&k, "/import/facilities", facilities).await.status, 200);
    let island = app.get(&k, "/facilities").await.body["data"][0]["id"].as_str().unwrap().to_string();
    let product = json!({"rows": [{"legacy_id": "BAR", "name": "Bar", "price": {"amount": 250, "currency": "EUR"}}]});
    assert_eq!(app.post(&k, "/import/products", product).await.status, 200);
    let bar = app.get(&k, "/products").await.body["data"][0]["id"].as_str().unwrap().to_string();
    let at_island = |kind: &str| json!({"kind": kind, "name": kind, "facility_id": island});
    let mut ids = Vec::new();
    for kind in ["kiosk", "card_terminal", "fiscal_printer"] {
        ids.push(
            app.device("POST", "/devices", &k, Some(at_island(kind)), &[]).await.body["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let [kiosk, terminal, printer] = <[String; 3]>::try_from(ids).unwrap();
    let c = crate::counter::Counter { gym, kiosk, terminal, printer, products: [("bar", bar)].into() };
    let main_terminal = json!({"kind": "card_terminal", "name": "Main terminal"});
    let main_terminal = app.device("POST", "/devices", &k, Some(main_terminal), &[]).await.body["id"].clone();
    let order = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    assert_eq!(order.status, 201, "{}", order.body);
    let elsewhere = c.take_payment(&app, main_terminal.as_str().unwrap()).await;
    assert_eq!(elsewhere, json!([]), "another facility's terminal took the island's payment");
    let jobs = c.take_payment(&app, &c.terminal).await;
    let report = c.report_payment(&app, &c.terminal, jobs[0]["id"].as_str().unwrap(), crate::counter::approved()).await;
    assert_eq!(report.status, 200, "{}", report.body);
    let printed = app.device("GET", &format!("/printers/{}/jobs?wait=0", c.printer), &k, None, &[]).await;
    let receipt = &printed.body["data"][0]["receipt"];
    assert_eq!(receipt["timezone"], "Pacific/Kiritimati", "{}", printed.body);
    // The receipt names its facility, as it was called when the sale was paid.
    assert_eq!(receipt["facility_id"], island.as_str());
    assert_eq!(receipt["facility_name"], "Island studio");
    let island_id = uuid::Uuid::parse_str(&island).unwrap();
    let found = gymapi::facilities::find(&app.db, &[c.gym.id], island_id).await.unwrap();
    gymapi::facilities::rename(&app.db, found, "Atoll").await.unwrap();
    let id = printed.body["data"][0]["order_id"].as_str().unwrap();
    let order = app.device("GET", &format!("/orders/{id}"), &k, None, &[]).await.body;
    assert_eq!(order["receipts"][0]["receipt"], *receipt, "a rename after payment leaves the receipt as printed");
}

/// A second facility of the gym, imported beside its first: the ids of both (the new one, then
/// the first).
async fn island(app: &TestApp, key: &str) -> (Value, Value) {
    let island = json!({"rows": [{"legacy_id": "ISL", "name": "Island studio"}]});
    assert_eq!(app.post(key, "/import/facilities", island).await.status, 200);
    let listed = app.get(key, "/facilities").await.body;
    let listed = listed["data"].as_array().unwrap();
    let (isl, main): (Vec<&Value>, Vec<&Value>) = listed.iter().partition(|f| f["legacy_id"] == "ISL");
    (isl[0]["id"].clone(), main[0]["id"].clone())
}

/// `PATCH /devices/{id}` of the device API.
async fn patch_device(app: &TestApp, key: &str, id: String, body: Value) -> crate::common::TestResponse {
    app.device("PATCH", &format!("/devices/{id}"), key, Some(body), &[]).await
}

/// The front desk moves a device through the device API: a door then decides for its new
/// facility's members, a terminal takes its new facility's payments, never its old one's, even in
/// a poll that began before the move; bad changes are 422 naming the field, others' devices 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_moved_through_the_api_serves_its_new_facility() {
    let app = TestApp::spawn().await;
    let c = crate::counter::counter(&app, "Moving").await;
    let k = c.key().to_string();
    let (island, main) = island(&app, &k).await;
    let path = |id: &str| format!("/devices/{id}");
    let patch = |id: String, body: Value| patch_device(&app, &k, id, body);

    // A door moved to the island lets in the island's members, and only them.
    let door = crate::counter::register(&app, &k, "door", "Door").await;
    let islander = member_in(&app, &c.gym, "Isla", island.as_str()).await;
    let access = format!("/doors/{door}/access");
    let ask = || app.device("POST", &access, &k, Some(json!({"member_id": islander["id"]})), &[]);
    assert_eq!(ask().await.body["reason"], "wrong_facility");
    let moved = patch(door.clone(), json!({"facility_id": island})).await;
    assert_eq!((moved.status, &moved.body["facility_id"]), (200, &island), "{}", moved.body);
    assert_ne!(ask().await.body["reason"], "wrong_facility");

    // The terminal waits at the main facility, is moved to the island, and a sale at the main
    // facility arrives (another terminal stays there): the waiting poll takes nothing of it.
    let terminal = c.terminal.clone();
    let stays = crate::counter::register(&app, &k, "card_terminal", "Stays").await;
    let poll = format!("/terminals/{terminal}/jobs?wait=2");
    let waiting = app.device("GET", &poll, &k, None, &[]);
    let meanwhile = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(patch(terminal.clone(), json!({"facility_id": island})).await.status, 200);
        let at_main = json!({"facility_id": main, "lines": [{"product_id": c.products["bar"], "quantity": 1}]});
        let order = app.device("POST", "/orders", &k, Some(at_main), &[]).await;
        assert_eq!(order.status, 201, "{}", order.body);
        order.body
    };
    let (waited, at_main) = tokio::join!(waiting, meanwhile);
    assert_eq!(waited.body["data"], json!([]), "a moved terminal took its old facility's payment");
    assert_eq!(c.take_payment(&app, &terminal).await, json!([]));
    let order = app.device("GET", &format!("/orders/{}", at_main["id"].as_str().unwrap()), &k, None, &[]).await;
    assert_eq!(order.body["payments"][0]["state"], "pending", "{}", order.body);
    assert_eq!(c.take_payment(&app, &stays).await[0]["order_id"], at_main["id"]);

    // Renamed only: the facility stays. Bad changes name their field; others' devices are 404.
    let renamed = patch(terminal.clone(), json!({"name": "  Island terminal "})).await;
    assert_eq!((renamed.body["name"].as_str(), &renamed.body["facility_id"]), (Some("Island terminal"), &island));
    let other = app.gym("Elsewhere").await;
    let theirs = app.get(&other.live_key, "/facilities").await.body["data"][0]["id"].clone();
    for (body, field) in [
        (json!({"facility_id": theirs}), "facility_id"),
        (json!({"facility_id": Uuid::now_v7()}), "facility_id"),
        (json!({"name": "   "}), "name"),
        (json!({"name": "x".repeat(101)}), "name"),
        (json!({"kind": "door"}), "kind"),
    ] {
        let r = patch(terminal.clone(), body.clone()).await;
        assert_eq!(r.status, 422, "{body}: {}", r.body);
        assert!(r.body["errors"][field].is_array(), "{body}: {}", r.body);
    }
    let body = Some(json!({"name": "Mine now"}));
    assert_eq!(app.device("PATCH", &path(&terminal), &other.live_key, body.clone(), &[]).await.status, 404);
    let test_key = app.test_key(&c.gym).await;
    assert_eq!(app.device("PATCH", &path(&terminal), &test_key, body, &[]).await.status, 404);
    let kept = app.device("GET", &path(&terminal), &k, None, &[]).await.body;
    assert_eq!((kept["name"].as_str(), &kept["facility_id"]), (Some("Island terminal"), &island));
}

/// History names where it happened: a check-in and a sale imported with `facility_legacy_id`
/// keep that facility (an archived one too); a name never imported is 422 on its row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_history_keeps_the_facility_it_happened_at() {
    let app = TestApp::spawn().await;
    let gym = app.gym("History").await;
    let k = &gym.live_key;
    let facilities = json!({"rows": [{"legacy_id": "OLD", "name": "Closed studio"}]});
    assert_eq!(app.post(k, "/import/facilities", facilities).await.status, 200);
    let old = app.get(k, "/facilities").await.body["data"][0]["id"].as_str().unwrap().to_string();
    let main = gymapi::accounts::first_facility(&app.db, gym.id).await.unwrap().unwrap().id.to_string();
    let operator = gymapi::accounts::Actor::Operator;
    let store = gymapi::limits::MemoryStore::default();
    let archived = old.parse().unwrap();
    gymapi::accounts::archive_facility(&app.db, &store, &operator, gym.id, archived, None).await.unwrap();

    let members = json!({"rows": [{"legacy_id": "M", "first_name": "Old", "last_name": "Timer"}]});
    assert_eq!(app.post(k, "/import/members", members).await.status, 200);
    let visit = |legacy: &str, place: Option<&str>| json!({"legacy_id": legacy, "member_legacy_id": "M", "occurred_at": "2024-03-01T08:00:00Z", "facility_legacy_id": place});
    let visits = json!({"rows": [visit("A1", Some("OLD")), visit("A2", None)]});
    assert_eq!(app.post(k, "/import/attendance", visits).await.status, 200);
    let entries = app.get(k, "/attendance?per_page=10").await.body;
    let at = |legacy: &str| {
        let all = entries["data"].as_array().unwrap();
        all.iter().find(|e| e["legacy_id"] == legacy).map(|e| e["facility_id"].as_str().unwrap().to_string()).unwrap()
    };
    assert_eq!((at("A1"), at("A2")), (old.clone(), main), "named, else the member's home");

    let sale = json!({"rows": [{"legacy_id": "S", "description": "Shake", "total": {"amount": 300, "currency": "EUR"}, "payment_status": "paid", "purchased_at": "2024-03-01T09:00:00Z", "facility_legacy_id": "OLD"}]});
    assert_eq!(app.post(k, "/import/purchases", sale).await.status, 200);
    assert_eq!(app.get(k, "/purchases").await.body["data"][0]["facility_id"], old.as_str());
    let unknown =
        json!({"rows": [{"legacy_id": "A3", "occurred_at": "2024-03-02T08:00:00Z", "facility_legacy_id": "NOPE"}]});
    let refused = app.post(k, "/import/access_logs", unknown).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body["errors"]["rows.0.facility_legacy_id"].is_array(), "{}", refused.body);
}

/// Two archives racing, each of the other's only open sibling: one goes through, the other is
/// refused as the gym's last open facility, many times over. The gym never ends without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_archives_racing_leave_the_gym_an_open_facility() {
    let app = std::sync::Arc::new(TestApp::spawn().await);
    let store = std::sync::Arc::new(gymapi::limits::MemoryStore::default());
    for i in 0..12 {
        let gym = app.gym(&format!("Pair {i}")).await;
        let first = gymapi::accounts::first_facility(&app.db, gym.id).await.unwrap().unwrap().id;
        let new = gymapi::facilities::NewFacility { name: "Second".into(), ..Default::default() };
        let second = gymapi::facilities::create(&app.db, gym.id, new).await.unwrap().id;
        let archive = |id: Uuid| {
            let (app, store) = (app.clone(), store.clone());
            tokio::spawn(async move {
                let operator = gymapi::accounts::Actor::Operator;
                gymapi::accounts::archive_facility(&app.db, store.as_ref(), &operator, gym.id, id, None).await
            })
        };
        let (a, b) = (archive(first), archive(second));
        let outcomes = [a.await.unwrap(), b.await.unwrap()];
        assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1, "try {i}: {outcomes:?}");
        let open = gymapi::accounts::first_facility(&app.db, gym.id).await.unwrap();
        assert!(open.is_some(), "try {i}: the gym was left without an open facility");
    }
}

/// A terminal moved while it holds a payment, and a printer moved while it holds a receipt, still
/// report them: the charge is the sale's payment, the receipt printed, at the sale's facility.
#[tokio::test]
async fn a_device_moved_while_it_holds_a_job_still_reports_it() {
    let app = TestApp::spawn().await;
    let c = crate::counter::counter(&app, "Moved holding").await;
    let k = c.key().to_string();
    let (island, _) = island(&app, &k).await;
    let move_to_island = |id: String| {
        let r = patch_device(&app, &k, id, json!({"facility_id": island}));
        async move {
            let r = r.await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
    };

    let order = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
    assert_eq!(order.status, 201, "{}", order.body);
    let sale = order.body["id"].as_str().unwrap().to_string();
    let jobs = c.take_payment(&app, &c.terminal).await;
    let job = jobs[0]["id"].as_str().unwrap().to_string();
    move_to_island(c.terminal.clone()).await;
    let paid = c.report_payment(&app, &c.terminal, &job, crate::counter::approved()).await;
    assert_eq!((paid.status, paid.body["state"].as_str()), (200, Some("approved")), "{}", paid.body);
    assert_eq!(app.get(&k, &format!("/purchases/{sale}")).await.body["payment_status"], "paid");

    let receipts = c.take_receipt(&app).await;
    let receipt = receipts[0]["id"].as_str().unwrap().to_string();
    move_to_island(c.printer.clone()).await;
    let path = format!("/printers/{}/jobs/{receipt}/report", c.printer);
    let printed = app.device("POST", &path, &k, Some(json!({"outcome": "printed"})), &[]).await;
    assert_eq!((printed.status, printed.body["state"].as_str()), (200, Some("printed")), "{}", printed.body);
}
