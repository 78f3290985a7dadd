//! Webhooks end to end: a real receiver on loopback, the dispatcher of the app (or of a separate
//! `gymapi worker` process), signatures checked by an implementation of the Standard Webhooks
//! scheme written here from its text (CI also checks them with the `standardwebhooks` package).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use gymapi::{accounts::Actor, webhooks};
use hmac::{Hmac, Mac};
use poem::{
    EndpointExt, Route, handler,
    http::StatusCode,
    listener::{Acceptor, Listener, TcpListener},
    web::Data,
};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::common::{Gym, TestApp};

#[derive(Clone, Debug)]
pub struct Received {
    headers: HashMap<String, String>,
    pub body: String,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or_default()
    }
}

#[derive(Default)]
struct Inbox {
    received: Vec<Received>,
    /// Statuses to answer, in order; 200 once they run out.
    script: Vec<u16>,
}

/// A webhook receiver on a free loopback port.
pub struct Receiver {
    pub url: String,
    inbox: Arc<Mutex<Inbox>>,
}

#[handler]
fn receive(req: &poem::Request, body: String, inbox: Data<&Arc<Mutex<Inbox>>>) -> poem::Response {
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let mut inbox = inbox.lock().unwrap();
    inbox.received.push(Received { headers, body });
    let status = if inbox.script.is_empty() { 200 } else { inbox.script.remove(0) };
    poem::Response::builder().status(StatusCode::from_u16(status).unwrap()).body(format!("answered {status}"))
}

impl Receiver {
    pub async fn start(script: &[u16]) -> Self {
        let inbox = Arc::new(Mutex::new(Inbox { received: Vec::new(), script: script.to_vec() }));
        let acceptor = TcpListener::bind("127.0.0.1:0").into_acceptor().await.unwrap();
        let addr = *acceptor.local_addr()[0].as_socket_addr().unwrap();
        let app = Route::new().at("/hook", poem::post(receive)).data(inbox.clone());
        tokio::spawn(poem::Server::new_with_acceptor(acceptor).run(app));
        Self { url: format!("http://{addr}/hook"), inbox }
    }

    pub fn received(&self) -> Vec<Received> {
        self.inbox.lock().unwrap().received.clone()
    }

    /// Waits until `n` requests arrived (or fails after 20 s).
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(Instant::now() < deadline, "{} of {n} deliveries arrived: {got:?}", got.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn spawn_app(dispatch: bool) -> TestApp {
    TestApp::spawn_with(|c| {
        c.webhook_allow_private = true;
        c.webhook_retry_schedule = vec![Duration::from_secs(1); 3];
        c.webhook_dispatch = dispatch;
        c.rate_limit_per_minute = 10_000;
    })
    .await
}

pub async fn endpoint(app: &TestApp, gym: &Gym, url: &str, events: &[&str]) -> webhooks::NewEndpoint {
    let events: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    webhooks::create_endpoint(&app.db, &Actor::Operator, gym.id, false, url, &events, true).await.unwrap()
}

/// The Standard Webhooks check, from the specification's text.
fn verify(secret: &str, r: &Received) -> bool {
    let key = B64.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let signed = format!("{}.{}.{}", r.header("webhook-id"), r.header("webhook-timestamp"), r.body);
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(signed.as_bytes());
    let expected = format!("v1,{}", B64.encode(mac.finalize().into_bytes()));
    r.header("webhook-signature").split(' ').any(|s| s == expected)
}

async fn deliveries(app: &TestApp, key: &str, query: &str) -> Vec<Value> {
    let r = app.get(key, &format!("/webhook-deliveries{query}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

/// Waits until the delivery reaches `status`.
async fn delivery_in(app: &TestApp, key: &str, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = app.get(key, &format!("/webhook-deliveries/{id}")).await;
        assert_eq!(r.status, 200);
        if r.body["status"] == status {
            return r.body;
        }
        assert!(Instant::now() < deadline, "still {}: {}", r.body["status"], r.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_arrive_signed_with_the_record_as_the_api_returns_it() {
    let app = spawn_app(true).await;
    let gym = app.gym("Hooks").await;
    let receiver = Receiver::start(&[]).await;
    let ep = endpoint(&app, &gym, &receiver.url, &[]).await;
    assert!(ep.secret.starts_with("whsec_"));
    let k = &gym.live_key;

    // Keyed: on SQLite its writes, the event's among them, go with the commit.
    let created = app
        .request(
            "POST",
            "/members",
            Some(k),
            Some(json!({"first_name": "Ada", "last_name": "Lovelace"})),
            &[("Idempotency-Key", "ada")],
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let member = created.body;
    let id = member["id"].as_str().unwrap();
    let r = app.patch(k, &format!("/members/{id}"), json!({"city": "London"})).await;
    assert_eq!(r.status, 200);
    let batch = json!({"rows": [{"legacy_id": "M-1", "first_name": "Imported", "last_name": "Member"}]});
    assert_eq!(app.post(k, "/import/members", batch.clone()).await.status, 200);
    // A dry run writes nothing and sends nothing.
    assert_eq!(app.post(k, "/import/members?dry_run=true", batch).await.status, 200);

    let got = receiver.wait_for(3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 3, "one event per change");
    let types: Vec<Value> = got.iter().map(|r| r.json()["type"].clone()).collect();
    assert_eq!(types, [json!("member.created"), json!("member.updated"), json!("import.completed")]);
    for r in &got {
        assert!(verify(&ep.secret, r), "signature of {r:?}");
        assert_eq!(r.header("content-type"), "application/json");
        let event = r.json();
        assert_eq!(event["object"], "event");
        assert_eq!(event["id"].as_str().unwrap(), r.header("webhook-id"));
        let sent_at: i64 = r.header("webhook-timestamp").parse().unwrap();
        assert!((chrono::Utc::now().timestamp() - sent_at).abs() < 60);
        crate::common::oracle().check_schema("WebhookEvent", &event);
        // One time form in envelopes and records alike: UTC, microseconds, `Z`.
        for t in [&event["created_at"], &event["data"]["created_at"]].into_iter().filter(|t| !t.is_null()) {
            let t = t.as_str().unwrap();
            let parsed = chrono::DateTime::parse_from_rfc3339(t).map(|p| p.to_utc());
            assert_eq!(parsed.map(gymapi::records::rfc3339).as_deref(), Ok(t), "{event}");
        }
    }
    crate::common::oracle().check_schema("MemberEvent", &got[0].json());
    crate::common::oracle().check_schema("ImportCompletedEvent", &got[2].json());
    assert_eq!(got[0].json()["data"], member, "the member as POST /members answered it");
    assert_eq!(got[1].json()["data"]["city"], "London");
    assert_eq!(got[2].json()["data"]["created"], 1);

    let list = deliveries(&app, k, "?event_type=member.updated").await;
    assert_eq!(list.len(), 1);
    let d = delivery_in(&app, k, list[0]["id"].as_str().unwrap(), "delivered").await;
    assert_eq!(d["endpoint_id"], json!(ep.model.id));
    assert_eq!(d["attempts"][0]["response_status"], 200);
    assert_eq!(d["attempts"][0]["response_excerpt"], "answered 200");
    assert_eq!(d["next_attempt_at"], Value::Null);
    assert_eq!(deliveries(&app, k, "?status=delivered").await.len(), 3);
    assert_eq!(deliveries(&app, k, &format!("?endpoint_id={}", ep.model.id)).await.len(), 3);
}

/// The dispatcher looks for deliveries on its own once an hour here: each event reaches the
/// receiver only because the write that queued it woke the dispatcher once committed. Each write
/// waits for the one before it to arrive, so no wake-up serves two.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_that_queues_an_event_wakes_the_dispatcher() {
    let app = TestApp::spawn_with(|c| {
        c.webhook_allow_private = true;
        c.webhook_poll = Duration::from_secs(3600);
        c.rate_limit_per_minute = 10_000;
    })
    .await;
    let gym = app.gym("Woken").await;
    let receiver = Receiver::start(&[]).await;
    endpoint(&app, &gym, &receiver.url, &[]).await;
    let k = &gym.live_key;
    let member =
        |n: u32| json!({"first_name": "Woken", "last_name": format!("{n}"), "email": format!("w{n}@example.com")});

    let keyed = app.request("POST", "/members", Some(k), Some(member(1)), &[("Idempotency-Key", "w1")]).await;
    assert_eq!(keyed.status, 201, "{}", keyed.body);
    receiver.wait_for(1).await;
    let id = keyed.body["id"].as_str().unwrap();
    let patch = json!({"city": "Oslo"});
    let r = app.request("PATCH", &format!("/members/{id}"), Some(k), Some(patch), &[("Idempotency-Key", "w2")]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    receiver.wait_for(2).await;
    assert_eq!(app.post(k, "/members", member(3)).await.status, 201);
    receiver.wait_for(3).await;
    // A door's decisions, asked with a key (its writes go with the key's record) and without.
    let door = app.device("POST", "/devices", k, Some(json!({"kind": "door", "name": "Front"})), &[]).await;
    let path = format!("/doors/{}/access", door.body["id"].as_str().unwrap());
    let keyed = app.device("POST", &path, k, Some(json!({"member_id": id})), &[("Idempotency-Key", "w4")]).await;
    assert_eq!(keyed.status, 200, "{}", keyed.body);
    receiver.wait_for(4).await;
    assert_eq!(app.device("POST", &path, k, Some(json!({"member_id": id})), &[]).await.status, 200);
    let got = receiver.wait_for(5).await;
    let types: Vec<Value> = got.iter().map(|r| r.json()["type"].clone()).collect();
    let (created, updated, entered) = (json!("member.created"), json!("member.updated"), json!("attendance.created"));
    assert_eq!(types, [created.clone(), updated, created, entered.clone(), entered]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_receiver_failing_twice_gets_the_event_on_the_third_attempt() {
    let app = spawn_app(true).await;
    let gym = app.gym("Flaky").await;
    let receiver = Receiver::start(&[500, 503]).await;
    let ep = endpoint(&app, &gym, &receiver.url, &["member.created"]).await;
    app.member(&gym.live_key, "Grace", "Hopper").await;
    let got = receiver.wait_for(3).await;
    let ids: Vec<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "one event, three attempts: {ids:?}");
    assert!(got.iter().all(|r| verify(&ep.secret, r)));
    let list = deliveries(&app, &gym.live_key, "").await;
    let d = delivery_in(&app, &gym.live_key, list[0]["id"].as_str().unwrap(), "delivered").await;
    let statuses: Vec<&Value> = d["attempts"].as_array().unwrap().iter().map(|a| &a["response_status"]).collect();
    assert_eq!(statuses, [&json!(500), &json!(503), &json!(200)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_fails_after_its_schedule_and_redeliver_sends_it_again() {
    let app = spawn_app(true).await;
    let gym = app.gym("Redeliver").await;
    let receiver = Receiver::start(&[500, 500, 500, 500]).await;
    endpoint(&app, &gym, &receiver.url, &[]).await;
    app.member(&gym.live_key, "Katherine", "Johnson").await;
    let list = deliveries(&app, &gym.live_key, "").await;
    let id = list[0]["id"].as_str().unwrap();
    // The first attempt and the three retries of the schedule, then `failed`.
    let d = delivery_in(&app, &gym.live_key, id, "failed").await;
    assert_eq!(d["attempts"].as_array().unwrap().len(), 4);
    assert_eq!(receiver.received().len(), 4);

    let r = app.request("POST", &format!("/webhook-deliveries/{id}/redeliver"), Some(&gym.live_key), None, &[]).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["status"], "pending");
    let d = delivery_in(&app, &gym.live_key, id, "delivered").await;
    assert_eq!(d["attempts"].as_array().unwrap().len(), 5);
    let got = receiver.received();
    assert_eq!(got.len(), 5);
    assert_eq!(got[4].header("webhook-id"), got[0].header("webhook-id"), "the same event");
    assert_eq!(got[4].body, got[0].body);

    // A delivered one can be sent again too; another gym's is not there.
    let r = app.request("POST", &format!("/webhook-deliveries/{id}/redeliver"), Some(&gym.live_key), None, &[]).await;
    assert_eq!(r.status, 202);
    receiver.wait_for(6).await;
    let other = app.gym("Other").await;
    assert_eq!(app.get(&other.live_key, &format!("/webhook-deliveries/{id}")).await.status, 404);
    let r = app.request("POST", &format!("/webhook-deliveries/{id}/redeliver"), Some(&other.live_key), None, &[]).await;
    assert_eq!(r.status, 404);
    assert!(deliveries(&app, &other.live_key, "").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gone_disables_the_endpoint() {
    let app = spawn_app(true).await;
    let gym = app.gym("Gone").await;
    let receiver = Receiver::start(&[410]).await;
    let ep = endpoint(&app, &gym, &receiver.url, &[]).await;
    app.member(&gym.live_key, "A", "B").await;
    let list = deliveries(&app, &gym.live_key, "").await;
    let d = delivery_in(&app, &gym.live_key, list[0]["id"].as_str().unwrap(), "failed").await;
    assert_eq!(d["attempts"].as_array().unwrap().len(), 1, "no retry after 410");
    let endpoints = webhooks::list_endpoints(&app.db, &Actor::Operator, gym.id).await.unwrap();
    assert!(!endpoints[0].enabled);
    assert_eq!(endpoints[0].disabled_reason.as_deref(), Some("The endpoint answered 410 Gone."));
    app.member(&gym.live_key, "C", "D").await;
    assert_eq!(deliveries(&app, &gym.live_key, "").await.len(), 1, "a disabled endpoint gets nothing new");
    webhooks::set_enabled(&app.db, &Actor::Operator, ep.model.id, true).await.unwrap();
    app.member(&gym.live_key, "E", "F").await;
    receiver.wait_for(2).await;
}

/// A new member's event goes to the gym's enabled endpoints that listen to its type, and nowhere
/// else, keyed or not (on PostgreSQL the endpoints are chosen by the write's own statement); each
/// delivery's id is a UUIDv7 of (about) the event's time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_is_queued_for_the_listening_enabled_endpoints_only() {
    let app = spawn_app(false).await;
    let gym = app.gym("Listeners").await;
    let other = app.gym("Elsewhere").await;
    let all = endpoint(&app, &gym, "https://all.example.com/hook", &[]).await;
    endpoint(&app, &gym, "https://updates.example.com/hook", &["member.updated"]).await;
    let off = endpoint(&app, &gym, "https://off.example.com/hook", &["member.created"]).await;
    webhooks::set_enabled(&app.db, &Actor::Operator, off.model.id, false).await.unwrap();
    let named = endpoint(&app, &gym, "https://named.example.com/hook", &["purchase.created", "member.created"]).await;
    endpoint(&app, &other, "https://other.example.com/hook", &[]).await;
    let k = &gym.live_key;

    let body = json!({"first_name": "Ada", "last_name": "Listened"});
    let keyed = app.request("POST", "/members", Some(k), Some(body), &[("Idempotency-Key", "listen")]).await;
    assert_eq!(keyed.status, 201, "{}", keyed.body);
    app.member(k, "Grace", "Unkeyed").await;
    let list = deliveries(&app, k, "").await;
    let mut to: Vec<String> = list.iter().map(|d| d["endpoint_id"].as_str().unwrap().to_string()).collect();
    to.sort();
    let mut want = [all.model.id, all.model.id, named.model.id, named.model.id].map(|id| id.to_string()).to_vec();
    want.sort();
    assert_eq!(to, want, "{list:?}");
    for d in &list {
        let id = uuid::Uuid::parse_str(d["id"].as_str().unwrap()).unwrap();
        assert_eq!(id.get_version_num(), 7, "{d}");
        let event = uuid::Uuid::parse_str(d["event_id"].as_str().unwrap()).unwrap();
        let ms = |u: uuid::Uuid| {
            let (secs, nanos) = u.get_timestamp().unwrap().to_unix();
            i128::from(secs) * 1000 + i128::from(nanos / 1_000_000)
        };
        assert!((0..1000).contains(&(ms(id) - ms(event))), "a delivery has its event's time: {d}");
    }
    let ids: std::collections::HashSet<&str> = list.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 4, "each delivery its own id");
    assert!(deliveries(&app, &other.live_key, "").await.is_empty(), "another gym's endpoint gets nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rotated_secret_signs_beside_the_new_one_and_ping_reaches_one_endpoint() {
    let app = spawn_app(true).await;
    let gym = app.gym("Rotate").await;
    let receiver = Receiver::start(&[]).await;
    let other = Receiver::start(&[]).await;
    let ep = endpoint(&app, &gym, &receiver.url, &[]).await;
    endpoint(&app, &gym, &other.url, &[]).await;
    let rotated = webhooks::rotate_secret(&app.db, &Actor::Operator, ep.model.id).await.unwrap();
    assert_ne!(rotated.secret, ep.secret);
    let delivery = webhooks::ping(&app.db, &Actor::Operator, ep.model.id).await.unwrap();
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].json()["type"], "ping");
    crate::common::oracle().check_schema("PingEvent", &got[0].json());
    crate::common::oracle().check_schema("WebhookEvent", &got[0].json());
    assert_eq!(got[0].header("webhook-signature").split(' ').count(), 2);
    assert!(verify(&ep.secret, &got[0]) && verify(&rotated.secret, &got[0]));
    delivery_in(&app, &gym.live_key, &delivery.to_string(), "delivered").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(other.received().is_empty(), "a ping goes to its endpoint only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sandbox_has_its_own_endpoints_and_deliveries() {
    let app = spawn_app(true).await;
    let gym = app.gym("Sandboxed hooks").await;
    let test_key = app.test_key(&gym).await;
    let live = Receiver::start(&[]).await;
    let sandbox = Receiver::start(&[]).await;
    endpoint(&app, &gym, &live.url, &[]).await;
    webhooks::create_endpoint(&app.db, &Actor::Operator, gym.id, true, &sandbox.url, &[], true).await.unwrap();
    app.member(&test_key, "Test", "Only").await;
    let got = sandbox.wait_for(1).await;
    assert_eq!(got[0].json()["data"]["first_name"], "Test");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(live.received().is_empty());
    assert_eq!(deliveries(&app, &test_key, "").await.len(), 1);
    assert!(deliveries(&app, &gym.live_key, "").await.is_empty());
}

/// Outside development, a name that resolves to a private address is refused at send time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn private_addresses_are_refused_at_send_time() {
    let app = TestApp::spawn_with(|c| c.webhook_retry_schedule = vec![Duration::from_secs(1)]).await;
    let gym = app.gym("Private").await;
    let err = webhooks::create_endpoint(&app.db, &Actor::Operator, gym.id, false, "http://example.com/", &[], false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("https"), "{err}");
    // `localhost` is a name: it passes when saved, and its address is checked at every attempt.
    webhooks::create_endpoint(&app.db, &Actor::Operator, gym.id, false, "https://localhost:9/hook", &[], false)
        .await
        .unwrap();
    app.member(&gym.live_key, "A", "B").await;
    let list = deliveries(&app, &gym.live_key, "").await;
    let d = delivery_in(&app, &gym.live_key, list[0]["id"].as_str().unwrap(), "failed").await;
    let error = d["attempts"][0]["error"].as_str().unwrap();
    assert!(error.contains("not public"), "{error}");
}

/// A dispatcher whose environment names an egress proxy (as a server behind a corporate proxy has)
/// still checks every address itself: a name that resolves to a private address is refused, and
/// the proxy never hears of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn proxy_variables_do_not_carry_a_webhook_past_the_address_guard() {
    let app = TestApp::spawn_with(|c| {
        c.webhook_dispatch = false;
        c.webhook_retry_schedule = vec![Duration::from_secs(1)];
        c.rate_limit_per_minute = 10_000;
    })
    .await;
    let gym = app.gym("Proxied").await;
    webhooks::create_endpoint(&app.db, &Actor::Operator, gym.id, false, "https://localhost:9/hook", &[], false)
        .await
        .unwrap();
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let heard = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = heard.clone();
    tokio::spawn(async move {
        while let Ok((connection, _)) = proxy.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(connection);
        }
    });
    let mut w = std::process::Command::new(env!("CARGO_BIN_EXE_gymapi"))
        .arg("worker")
        .env("DATABASE_URL", &app.database_url)
        .env_remove("GYMAPI_WEBHOOK_ALLOW_PRIVATE")
        .env_remove("REDIS_URL")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env("GYMAPI_WEBHOOK_RETRY_SCHEDULE", "1")
        .envs([("HTTPS_PROXY", &proxy_url), ("HTTP_PROXY", &proxy_url), ("ALL_PROXY", &proxy_url)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    app.member(&gym.live_key, "Behind", "Proxy").await;
    let list = deliveries(&app, &gym.live_key, "").await;
    let d = delivery_in(&app, &gym.live_key, list[0]["id"].as_str().unwrap(), "failed").await;
    w.kill().unwrap();
    w.wait().unwrap();
    let error = d["attempts"][0]["error"].as_str().unwrap();
    assert!(error.contains("not public"), "{error}");
    assert_eq!(heard.load(std::sync::atomic::Ordering::SeqCst), 0, "the proxy was asked to connect");
}

/// A proxy that tunnels with `CONNECT`, on a free loopback port: its URL, and the targets it was
/// asked to connect to.
async fn connect_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let heard = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let heard = heard.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && client.read(&mut byte).await.unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
                heard.lock().unwrap().push(line.clone());
                let target = line.split_whitespace().nth(1).unwrap_or_default().to_string();
                let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    (url, asked)
}

/// With a webhook proxy named (`GYMAPI_WEBHOOK_PROXY`), the dispatcher resolves the receiver's
/// name itself and asks the proxy for the address it checked, never for the name: a delivery to
/// `localhost` arrives through a tunnel to `127.0.0.1`, signed, with the name in `Host`; outside
/// development a name resolving to a private address is refused and the proxy hears nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_named_webhook_proxy_is_told_the_checked_address() {
    let (proxy_url, asked) = connect_proxy().await;
    let proxy = url::Url::parse(&proxy_url).unwrap();
    let app = TestApp::spawn_with(|c| {
        c.webhook_allow_private = true;
        c.webhook_retry_schedule = vec![Duration::from_secs(1); 3];
        c.rate_limit_per_minute = 10_000;
        c.webhook_proxy = Some(proxy.clone());
    })
    .await;
    let gym = app.gym("Through a proxy").await;
    let receiver = Receiver::start(&[]).await;
    let port = receiver.url.rsplit(':').next().unwrap().trim_end_matches("/hook").to_string();
    let by_name = format!("http://localhost:{port}/hook");
    let secret = endpoint(&app, &gym, &by_name, &["member.created"]).await.secret;
    let member = app.member(&gym.live_key, "Via", "Proxy").await;
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].json()["data"]["id"], member["id"]);
    assert_eq!(got[0].header("host"), format!("localhost:{port}"));
    assert!(verify(&secret, &got[0]), "the delivery is signed");
    let asked_for = asked.lock().unwrap().clone();
    assert!(asked_for.iter().all(|l| !l.contains("localhost")), "the proxy was told the name: {asked_for:?}");
    assert!(asked_for.contains(&format!("CONNECT 127.0.0.1:{port} HTTP/1.1")), "{asked_for:?}");

    let (proxy_url, asked) = connect_proxy().await;
    let proxy = url::Url::parse(&proxy_url).unwrap();
    let guarded = TestApp::spawn_with(|c| {
        c.webhook_retry_schedule = vec![Duration::from_secs(1)];
        c.webhook_proxy = Some(proxy.clone());
    })
    .await;
    let gym = guarded.gym("Guarded").await;
    webhooks::create_endpoint(&guarded.db, &Actor::Operator, gym.id, false, "https://localhost:9/hook", &[], false)
        .await
        .unwrap();
    guarded.member(&gym.live_key, "A", "B").await;
    let list = deliveries(&guarded, &gym.live_key, "").await;
    let d = delivery_in(&guarded, &gym.live_key, list[0]["id"].as_str().unwrap(), "failed").await;
    let error = d["attempts"][0]["error"].as_str().unwrap();
    assert!(error.contains("not public"), "{error}");
    assert!(asked.lock().unwrap().is_empty(), "the proxy was asked: {:?}", asked.lock().unwrap());
}

fn worker(app: &TestApp) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_gymapi"))
        .arg("worker")
        .env("DATABASE_URL", &app.database_url)
        .env("GYMAPI_WEBHOOK_ALLOW_PRIVATE", "1")
        .env_remove("REDIS_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The change is committed and acknowledged, the server dies before sending: a worker started
/// later sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_committed_before_a_crash_is_delivered_after_restart() {
    let app = spawn_app(false).await;
    let gym = app.gym("Crash").await;
    let receiver = Receiver::start(&[]).await;
    endpoint(&app, &gym, &receiver.url, &[]).await;
    let member = app.member(&gym.live_key, "Survives", "Crash").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(receiver.received().is_empty(), "this server does not send");
    let mut w = worker(&app);
    let got = receiver.wait_for(1).await;
    w.kill().unwrap();
    w.wait().unwrap();
    assert_eq!(got[0].json()["data"]["id"], member["id"]);
}

/// Two dispatchers (separate processes) on one database: every event arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_deliver_each_event_exactly_once() {
    let app = spawn_app(false).await;
    let gym = app.gym("Two workers").await;
    let receiver = Receiver::start(&[]).await;
    endpoint(&app, &gym, &receiver.url, &["member.created"]).await;
    let n = 120;
    for i in 0..n {
        app.member(&gym.live_key, "Many", &format!("Member{i}")).await;
    }
    let (mut a, mut b) = (worker(&app), worker(&app));
    receiver.wait_for(n).await;
    // Give a double send time to show.
    tokio::time::sleep(Duration::from_secs(1)).await;
    a.kill().unwrap();
    b.kill().unwrap();
    a.wait().unwrap();
    b.wait().unwrap();
    let got = receiver.received();
    let mut per_event: HashMap<String, usize> = HashMap::new();
    for r in &got {
        *per_event.entry(r.header("webhook-id").to_string()).or_default() += 1;
    }
    assert_eq!(per_event.len(), n);
    assert!(per_event.values().all(|c| *c == 1), "duplicates: {:?}", per_event.values().filter(|c| **c > 1).count());
    let r = app.get(&gym.live_key, "/webhook-deliveries?status=delivered&per_page=1").await;
    assert_eq!(r.body["meta"]["total"], n);
}
