//! Keyed writes run exactly once whatever happens between the database and the store of kept
//! responses: the server killed right after a keyed write commits, the store (Redis) flushed, the
//! embedded default restarted. Each test runs `gymapi serve` as a process of its own on the test's
//! database (and Redis, on the PostgreSQL pass), with a 1 s lease on a started key.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::common::{Gym, TestApp};

/// `gymapi serve` on a free port, on the database and Redis of `app`.
struct Served {
    child: Child,
    base: String,
}

impl Served {
    async fn start(app: &TestApp, env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gymapi"));
        cmd.env("GYMAPI_WEBHOOK_DISPATCH", "0").env("RUST_LOG", "warn").stderr(Stdio::null());
        Self::start_with(app, cmd, env).await
    }

    /// With `cmd`'s own environment and output, which the test set up.
    async fn start_with(app: &TestApp, mut cmd: Command, env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        cmd.args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .env("DATABASE_URL", &app.database_url)
            .env("GYMAPI_IDEMPOTENCY_LOCK_SECS", "1")
            .env_remove("GYMAPI_TEST_CRASH")
            .stdout(Stdio::null());
        match &app.redis_url {
            Some(url) => cmd.env("REDIS_URL", url).env("GYMAPI_REDIS_PREFIX", &app.redis_prefix),
            None => cmd.env_remove("REDIS_URL"),
        };
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(format!("{base}/healthz")).await.is_err() {
            assert!(Instant::now() < deadline, "gymapi serve did not answer on {base}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { child, base }
    }

    /// A keyed `POST /members`: its status, whether it was replayed, its body; `None` when the
    /// connection broke (the server died).
    async fn create(&self, gym: &Gym, key: &str) -> Option<(u16, bool, Value)> {
        let r = crate::common::http_client()
            .post(format!("{}/api/v1/members", self.base))
            .bearer_auth(&gym.live_key)
            .header("Idempotency-Key", key)
            .json(&json!({"first_name": "Once", "last_name": "Only", "email": "once@example.com"}))
            .send()
            .await
            .ok()?;
        let status = r.status().as_u16();
        let replayed = r.headers().get("idempotency-replayed").is_some_and(|v| v == "true");
        Some((status, replayed, r.json().await.ok()?))
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gym's members named "Once", with their ids.
async fn written(app: &TestApp, gym: &Gym) -> Vec<String> {
    let members = app.get(&gym.live_key, "/members?search=once&per_page=100").await.body;
    members["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()).collect()
}

/// Killed between the commit of a keyed write and the store keeping its response: after the
/// lease, the retry gets the first response, replayed, and the member exists once.
#[tokio::test]
async fn a_write_killed_after_its_commit_replays_after_the_lease() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Crash").await;
    // A lease of 3 s, so that a busy machine still restarts the server within it.
    let lease = Duration::from_secs(3);
    let mut crashing =
        Served::start(&app, &[("GYMAPI_TEST_CRASH", "after-keyed-commit"), ("GYMAPI_IDEMPOTENCY_LOCK_SECS", "3")])
            .await;
    let begun = Instant::now();
    assert!(crashing.create(&gym, "crash-1").await.is_none(), "the server answered instead of dying");
    let died = crashing.child.wait().unwrap();
    assert!(!died.success(), "{died:?}");
    drop(crashing);
    let ids = written(&app, &gym).await;
    assert_eq!(ids.len(), 1, "the write committed before the crash");

    let server = Served::start(&app, &[]).await;
    if app.redis_url.is_some() {
        // Redis still holds the key for the dead request's lease: asked while it surely runs (a
        // machine busy enough to restart the server slower than the lease skips this part).
        let asked = Instant::now();
        let (status, _, body) = server.create(&gym, "crash-1").await.unwrap();
        if asked.duration_since(begun) < lease - Duration::from_millis(500) {
            assert_eq!((status, body["error"]["type"].as_str()), (409, Some("idempotency_conflict")));
        }
    }
    tokio::time::sleep_until((begun + lease + Duration::from_millis(300)).into()).await;
    let (status, replayed, body) = server.create(&gym, "crash-1").await.unwrap();
    assert_eq!((status, replayed), (201, true), "{body}");
    assert_eq!(body["id"].as_str(), Some(ids[0].as_str()));
    assert_eq!(written(&app, &gym).await, ids, "written once");
    server.stop();
}

/// The store forgets every kept response (Redis flushed): a repeat still replays, from the
/// database, and writes nothing.
#[tokio::test]
async fn a_flushed_store_still_replays_from_the_database() {
    let app = TestApp::spawn().await;
    let Some(redis) = app.redis_url.clone() else {
        eprintln!("skipped: needs TEST_REDIS_URL (the restart test covers the embedded default)");
        return;
    };
    let gym = app.gym("Flush").await;
    let server = Served::start(&app, &[]).await;
    let (status, replayed, first) = server.create(&gym, "flush-1").await.unwrap();
    assert_eq!((status, replayed), (201, false), "{first}");

    let client = redis::Client::open(redis).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{}*", app.redis_prefix)).query_async(&mut conn).await.unwrap();
    assert!(keys.iter().any(|k| k.contains("idem:")), "{keys:?}");
    let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.unwrap();

    let (status, replayed, again) = server.create(&gym, "flush-1").await.unwrap();
    assert_eq!((status, replayed), (201, true), "{again}");
    assert_eq!(again, first);
    assert_eq!(written(&app, &gym).await.len(), 1);
    server.stop();
}

/// A keyed write that nothing in the database would refuse a second time (a member without an
/// email or a card), run again after the store forgot its response (the embedded default
/// restarted; Redis's keys deleted): the handler's second member is rolled back, because the first
/// request's record is there at the commit, and the first response is replayed.
#[tokio::test]
async fn a_write_run_again_meets_its_record_at_the_commit() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Twice").await;
    let body = json!({"first_name": "Nameless", "last_name": "Once"});
    let send = async |server: &Served| {
        let r = crate::common::http_client()
            .post(format!("{}/api/v1/members", server.base))
            .bearer_auth(&gym.live_key)
            .header("Idempotency-Key", "twice-1")
            .json(&body)
            .send()
            .await
            .unwrap();
        let replayed = r.headers().get("idempotency-replayed").is_some_and(|v| v == "true");
        (r.status().as_u16(), replayed, r.json::<Value>().await.unwrap())
    };
    let mut server = Served::start(&app, &[]).await;
    let (status, replayed, first) = send(&server).await;
    assert_eq!((status, replayed), (201, false), "{first}");
    match app.redis_url.clone() {
        Some(redis) => {
            let client = redis::Client::open(redis).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let keys: Vec<String> =
                redis::cmd("KEYS").arg(format!("{}*", app.redis_prefix)).query_async(&mut conn).await.unwrap();
            let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.unwrap();
        }
        None => {
            server.stop();
            server = Served::start(&app, &[]).await;
        }
    }
    let (status, replayed, again) = send(&server).await;
    assert_eq!((status, replayed), (201, true), "{again}");
    assert_eq!(again, first);
    let named = app.get(&gym.live_key, "/members?search=nameless&per_page=100").await.body;
    assert_eq!(named["data"].as_array().unwrap().len(), 1, "{named}");
    server.stop();
}

/// The embedded default keeps its kept responses in process: a restart forgets them, the
/// database does not.
#[tokio::test]
async fn a_restarted_server_still_replays() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Restart").await;
    let server = Served::start(&app, &[]).await;
    let (status, replayed, first) = server.create(&gym, "restart-1").await.unwrap();
    assert_eq!((status, replayed), (201, false), "{first}");
    server.stop();

    let server = Served::start(&app, &[]).await;
    let (status, replayed, again) = server.create(&gym, "restart-1").await.unwrap();
    assert_eq!((status, replayed), (201, true), "{again}");
    assert_eq!(again, first);
    assert_eq!(written(&app, &gym).await.len(), 1);
    // Another body under the same key is still refused.
    let other = crate::common::http_client()
        .post(format!("{}/api/v1/members", server.base))
        .bearer_auth(&gym.live_key)
        .header("Idempotency-Key", "restart-1")
        .json(&json!({"first_name": "Someone", "last_name": "Else"}))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 422);
    server.stop();
}

/// SIGTERM while keyed writes stream in: every request the server took is answered (201, never a
/// 5xx), every acknowledged write exists once and nothing else was written (a request still in
/// the kernel's queue when the server stopped accepting is refused or reset, and ran nothing),
/// and the process exits cleanly.
#[tokio::test]
async fn sigterm_during_load_lets_requests_in_flight_finish() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Draining").await;
    let mut server = Served::start(&app, &[("GYMAPI_RATE_LIMIT_PER_MINUTE", "100000")]).await;
    let client = crate::common::http_client();
    let send = |i: usize| {
        let request = client
            .post(format!("{}/api/v1/members", server.base))
            .bearer_auth(&gym.live_key)
            .header("Idempotency-Key", format!("drain-{i}"))
            .json(&json!({"first_name": "Drain", "last_name": format!("No {i}"), "email": format!("drain{i}@example.com")}));
        async move {
            match request.send().await {
                Ok(r) => Ok(r.status().as_u16()),
                Err(e) => Err(e),
            }
        }
    };
    let mut load = tokio::task::JoinSet::new();
    for i in 0..200 {
        load.spawn(send(i));
    }
    // Once answers flow, ask the server to stop.
    let first = load.join_next().await.unwrap().unwrap();
    assert_eq!(first.as_ref().ok(), Some(&201), "{first:?}");
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut answered = 1u64;
    while let Some(outcome) = load.join_next().await {
        match outcome.unwrap() {
            Ok(status) => {
                assert_eq!(status, 201, "a request the server took was not completed");
                answered += 1;
            }
            // Not taken: refused, or reset while it waited in the kernel's queue for a server that
            // had stopped accepting. Such a request ran nothing (the count below holds it).
            Err(e) => assert!(e.is_connect() || e.is_request(), "{e:?}"),
        }
    }
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    // Counted in the database: the key's budget is spent on the shared store.
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    let total = entity::member::Entity::find()
        .filter(entity::member::Column::GymId.eq(gym.id))
        .filter(entity::member::Column::FirstName.eq("Drain"))
        .count(&app.db)
        .await
        .unwrap();
    assert_eq!(total, answered, "every acknowledged write, once");
}

/// The logs of a server as operators run it (its default filter, JSON lines) carry no secret: not
/// an API key (right or wrong, in either header), an Idempotency-Key, a body, a password, a
/// session or a sign-in token, nor a webhook signing secret, through requests, refusals, sign-ins
/// and webhook attempts that fail.
#[tokio::test]
async fn logs_never_carry_a_secret() {
    use gymapi::accounts::{self, Actor};
    let app = TestApp::spawn().await;
    let gym = app.gym("Quiet").await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gymapi"));
    cmd.env_remove("RUST_LOG")
        .env("GYMAPI_LOG_FORMAT", "json")
        .env("GYMAPI_WEBHOOK_ALLOW_PRIVATE", "1")
        .env("GYMAPI_WEBHOOK_RETRY_SCHEDULE", "1")
        .stderr(log.reopen().unwrap());
    let server = Served::start_with(&app, cmd, &[]).await;
    let password = "correct horse battery staple 42";
    accounts::create_user(&app.db, gym.id, "quiet@example.com", entity::states::Role::Owner, &[], password)
        .await
        .unwrap();
    let types = ["member.created".to_string()];
    let hook = gymapi::webhooks::create_endpoint(
        &app.db,
        &Actor::Operator,
        gym.id,
        false,
        "http://127.0.0.1:9/h",
        &types,
        true,
    )
    .await
    .unwrap();
    let client =
        reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let url = |path: &str| format!("{}{path}", server.base);
    let wrong_key = format!("svc_live_{}", "Q".repeat(32));
    let (idempotency_key, email) = ("idem-secret-7f3a", "body-secret-7f3a@example.com");
    for key in [&gym.live_key, &wrong_key] {
        client.get(url("/api/v1/members")).bearer_auth(key).send().await.unwrap();
        client.get(url("/api/v1/members")).header("x-api-key", key.as_str()).send().await.unwrap();
    }
    let created = client
        .post(url("/api/v1/members"))
        .bearer_auth(&gym.live_key)
        .header("Idempotency-Key", idempotency_key)
        .json(&json!({"first_name": "Body", "last_name": "Secret", "email": email}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let page = client.get(url("/settings/sign-in")).send().await.unwrap().text().await.unwrap();
    let at = page.find("name=\"csrf\" value=\"").unwrap() + 19;
    let csrf = page[at..].split('"').next().unwrap().to_string();
    for attempt in ["a wrong password", password] {
        let form = [("email", "quiet@example.com"), ("password", attempt), ("csrf", csrf.as_str())];
        client.post(url("/settings/sign-in")).form(&form).send().await.unwrap();
    }
    let session = client.get(url("/settings/integrations/api")).send().await.unwrap();
    assert_eq!(session.status(), 200, "signed in");
    // Let the webhook's attempts fail against the closed port and be logged.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    server.stop();

    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(logged.contains("\"status\":201"), "the requests were logged: {logged}");
    for secret in
        [gym.live_key.as_str(), &wrong_key, idempotency_key, email, password, "a wrong password", &csrf, &hook.secret]
    {
        assert!(!logged.contains(secret), "the log carries {secret}:\n{logged}");
    }
}
