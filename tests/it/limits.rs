//! Rate limits and idempotent replays, on whichever store the suite runs with (in process, or
//! Redis with `TEST_REDIS_URL`).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    time::{Duration, Instant},
};

use gymapi::{accounts, context::Environment};
use serde_json::json;

use crate::common::TestApp;

#[tokio::test]
async fn the_121st_request_in_a_minute_is_refused_with_retry_after() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Limit").await;
    let mut statuses = Vec::new();
    for i in 0..125 {
        let r = app.get(&gym.live_key, "/members?per_page=1").await;
        assert_eq!(r.header("x-ratelimit-limit"), Some("120"));
        assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=120;w=60"));
        // The reset runs to the oldest request of the window: the first one, made moments ago.
        let reset: u64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
        assert!((50..=60).contains(&reset), "X-RateLimit-Reset {reset}");
        let remaining = r.header("x-ratelimit-remaining").unwrap().to_string();
        assert_eq!(r.header("ratelimit"), Some(format!("\"default\";r={remaining};t={reset}").as_str()));
        if i < 120 {
            assert_eq!(remaining, (119 - i).to_string());
        } else {
            assert_eq!(r.body["error"]["type"], "rate_limited");
            let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
            assert!((1..=60).contains(&retry), "Retry-After {retry}");
            assert_eq!(retry, reset, "a refusal's reset is its Retry-After");
            assert_eq!(remaining, "0");
        }
        statuses.push(r.status);
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 120);
    assert!(statuses[120..].iter().all(|s| *s == 429));
    // Another key of the same gym has its own allowance; a 429 never touches the database.
    let other =
        accounts::create_key(&app.db, &accounts::Actor::Operator, gym.id, gymapi::context::Environment::Live, "2")
            .await
            .unwrap();
    assert_eq!(app.get(&other.key, "/members").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 16)]
async fn concurrent_requests_get_exactly_the_limit() {
    let app = Arc::new(TestApp::spawn().await);
    let gym = app.gym("Burst").await;
    let key = Arc::new(gym.live_key);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (app, key) = (app.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            let mut codes = Vec::new();
            for _ in 0..(200 / 16 + 1) {
                codes.push(app.get(&key, "/members?per_page=1").await.status);
            }
            codes
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.extend(t.await.unwrap());
    }
    assert!(codes.len() >= 200);
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 120, "{codes:?}");
    assert!(codes.iter().all(|c| *c == 200 || *c == 429));
}

/// Two instances on one Redis share each key's limit exactly; in process, each instance counts alone.
#[tokio::test]
async fn instances_share_the_limit_through_redis() {
    let first = TestApp::spawn().await;
    let gym = first.gym("Shared").await;
    let second = first.another_instance().await;
    let mut ok = 0;
    for i in 0..130 {
        let base = if i % 2 == 0 { &first.address } else { &second };
        let r = first
            .client
            .get(format!("{base}/api/v1/members?per_page=1"))
            .bearer_auth(&gym.live_key)
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            ok += 1;
        }
    }
    if first.redis_url.is_some() {
        assert_eq!(ok, 120, "two instances on one Redis allow exactly the limit");
    } else {
        assert_eq!(ok, 130, "the embedded default counts per process: 65 requests each are all allowed");
    }
}

/// The log slides: a request leaves the window on its own, one window after it was counted, and a
/// refusal waits for the oldest request still in it. On the store the suite runs with (a Redis
/// stream, or the in-process log).
#[tokio::test]
async fn each_request_leaves_the_window_on_its_own() {
    use gymapi::limits::RatePolicy;
    let app = TestApp::spawn().await;
    let store = &app.store;
    let policy = RatePolicy { limit: 3, window: Duration::from_secs(2) };
    let started = Instant::now();
    assert_eq!(store.hit("slide", policy).await.unwrap().remaining, 2);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(store.hit("slide", policy).await.unwrap().remaining, 1);
    assert_eq!(store.hit("slide", policy).await.unwrap().remaining, 0);
    let refused = store.hit("slide", policy).await.unwrap();
    assert!(!refused.allowed, "a fourth request in the window is refused");
    assert_eq!(refused.retry_after_secs(), 1, "the first request leaves about 1 s from now");
    assert!(store.hit("slide-other", policy).await.unwrap().allowed, "buckets are apart");

    // The first request has left; the two after it have not.
    tokio::time::sleep(Duration::from_millis(2_200).saturating_sub(started.elapsed())).await;
    let again = store.hit("slide", policy).await.unwrap();
    assert!(again.allowed, "the first request left the window ({})", store.name());
    assert_eq!(again.remaining, 0, "the second and third are still in it");
    let refused = store.hit("slide", policy).await.unwrap();
    assert!(!refused.allowed);
    assert!((1..=2).contains(&refused.retry_after_secs()), "{}", refused.retry_after_secs());
}

fn keyed(key: &str) -> [(&'static str, String); 1] {
    [("Idempotency-Key", key.to_string())]
}

#[tokio::test]
async fn a_keyed_write_replays_byte_for_byte_and_runs_once() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Replay").await;
    let body = json!({"first_name": "Once", "last_name": "Only"});
    let send = || {
        app.raw(reqwest::Method::POST, "/api/v1/members")
            .bearer_auth(&gym.live_key)
            .header("Idempotency-Key", "create-once-7f3a")
            .json(&body)
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 201);
    assert_eq!(first.headers()["idempotency-replayed"], "false");
    let first_body = first.bytes().await.unwrap();
    let again = send().await.unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    assert!(again.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    assert_eq!(again.bytes().await.unwrap(), first_body, "the replay is the first response, byte for byte");
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 1);
    // Through the oracle too: a replay is a documented response.
    let r = app
        .request(
            "POST",
            "/members",
            Some(&gym.live_key),
            Some(body.clone()),
            &[("Idempotency-Key", "create-once-7f3a")],
        )
        .await;
    assert_eq!(r.header("idempotency-replayed"), Some("true"));
}

/// A key is kept for its window only: past it the key is new again (a write with it runs), and
/// the sweep removes the expired record from the database.
#[tokio::test]
async fn a_key_past_its_window_runs_again_and_its_record_is_swept() {
    let app = TestApp::spawn_with(|c| c.idempotency_ttl = Duration::from_secs(1)).await;
    let gym = app.gym("Window").await;
    let body = json!({"first_name": "Twice", "last_name": "Apart"});
    let send =
        || app.request("POST", "/members", Some(&gym.live_key), Some(body.clone()), &[("Idempotency-Key", "w-1")]);
    assert_eq!(send().await.status, 201);
    assert_eq!(send().await.header("idempotency-replayed"), Some("true"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let records = || async {
        use sea_orm::{EntityTrait, PaginatorTrait};
        entity::idempotency_record::Entity::find().count(&app.db).await.unwrap()
    };
    assert_eq!(records().await, 1);
    let swept = gymapi::limits::records::sweep(&app.db, gymapi::records::now(), 1000).await.unwrap();
    assert_eq!((swept, records().await), (1, 0));
    let later = send().await;
    assert_eq!((later.status, later.header("idempotency-replayed")), (201, Some("false")));
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 2);
}

#[tokio::test]
async fn reusing_a_key_for_another_request_is_422() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Mismatch").await;
    let [(h, k)] = keyed("reuse-1");
    let first = app
        .request(
            "POST",
            "/members",
            Some(&gym.live_key),
            Some(json!({"first_name": "A", "last_name": "B"})),
            &[(h, &k)],
        )
        .await;
    assert_eq!(first.status, 201);
    let other_body = app
        .request(
            "POST",
            "/members",
            Some(&gym.live_key),
            Some(json!({"first_name": "C", "last_name": "D"})),
            &[(h, &k)],
        )
        .await;
    assert_eq!(other_body.status, 422);
    assert!(other_body.body["errors"]["Idempotency-Key"].is_array());
    let id = first.body["id"].as_str().unwrap();
    let other_path = app
        .request(
            "PATCH",
            &format!("/members/{id}"),
            Some(&gym.live_key),
            Some(json!({"first_name": "A", "last_name": "B"})),
            &[(h, &k)],
        )
        .await;
    assert_eq!(other_path.status, 422);
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 1);
    // A key that is not 1..=255 printable ASCII is refused before anything runs.
    for bad in ["", &"k".repeat(256), "naïve"] {
        let r = app
            .raw(reqwest::Method::POST, "/api/v1/members")
            .bearer_auth(&gym.live_key)
            .header("Idempotency-Key", bad)
            .json(&json!({"first_name": "X", "last_name": "Y"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{bad:?}");
    }
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 16)]
async fn concurrent_identical_keyed_posts_create_one_member() {
    let app = Arc::new(TestApp::spawn().await);
    let gym = app.gym("Race").await;
    let key = Arc::new(gym.live_key.clone());
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (app, key) = (app.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            app.request(
                "POST",
                "/members",
                Some(&key),
                Some(json!({"first_name": "Race", "last_name": "Winner"})),
                &[("Idempotency-Key", "race-42")],
            )
            .await
            .status
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert!(codes.iter().all(|c| *c == 201 || *c == 409), "{codes:?}");
    assert!(codes.contains(&201));
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 1, "{codes:?}");
}

#[tokio::test]
async fn keys_are_scoped_to_the_tenant() {
    let app = TestApp::spawn().await;
    let a = app.gym("A").await;
    let b = app.gym("B").await;
    let test_key = app.test_key(&a).await;
    let body = json!({"first_name": "Same", "last_name": "Key"});
    for key in [&a.live_key, &b.live_key, &test_key] {
        let r = app
            .request("POST", "/members", Some(key), Some(body.clone()), &[("Idempotency-Key", "shared-value")])
            .await;
        assert_eq!(r.status, 201);
        assert_eq!(r.header("idempotency-replayed"), Some("false"), "another tenant's key must not replay");
    }
    for key in [&a.live_key, &b.live_key, &test_key] {
        assert_eq!(app.get(key, "/members").await.body["meta"]["total"], 1);
    }
}

#[tokio::test]
async fn failed_validation_is_not_kept_so_a_corrected_retry_runs() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Retry").await;
    let bad = app
        .request(
            "POST",
            "/members",
            Some(&gym.live_key),
            Some(json!({"first_name": "A"})),
            &[("Idempotency-Key", "fix-me")],
        )
        .await;
    assert_eq!(bad.status, 422);
    let good = app
        .request(
            "POST",
            "/members",
            Some(&gym.live_key),
            Some(json!({"first_name": "A", "last_name": "B"})),
            &[("Idempotency-Key", "fix-me")],
        )
        .await;
    assert_eq!(good.status, 201);
}

/// A 422 the handler raises (here an email another member has) wrote nothing, so it is not kept
/// either: the corrected request runs under the same key, and from then on replays.
#[tokio::test]
async fn a_refusal_by_the_handler_is_not_kept_so_a_corrected_retry_runs() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Taken").await;
    let taken = json!({"first_name": "First", "last_name": "Holder", "email": "taken@example.com"});
    assert_eq!(app.post(&gym.live_key, "/members", taken).await.status, 201);
    let key = [("Idempotency-Key", "taken-then-fixed")];
    let send = |email: &str| {
        let body = json!({"first_name": "Second", "last_name": "Try", "email": email});
        app.request("POST", "/members", Some(&gym.live_key), Some(body), &key)
    };
    let refused = send("taken@example.com").await;
    assert_eq!(refused.status, 422);
    assert!(refused.body["errors"]["email"].is_array(), "{:?}", refused.body);
    let fixed = send("free@example.com").await;
    assert_eq!(fixed.status, 201, "{:?}", fixed.body);
    assert_eq!(fixed.header("idempotency-replayed"), Some("false"));
    let again = send("free@example.com").await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(again.body["id"], fixed.body["id"]);
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 2);
}

/// A TCP proxy in front of Redis that the test can cut: `Forward`, `Blackhole` (connections are
/// accepted and never answered, like a hung Redis), or `Late` (the next answer Redis sends is held
/// for 300 ms, past a 200 ms timeout but not past the next request's, then everything is forwarded
/// again).
struct RedisProxy {
    url: String,
    mode: Arc<AtomicU8>,
}

const FORWARD: u8 = 0;
const BLACKHOLE: u8 = 1;
const LATE: u8 = 2;

/// Copies Redis's answers to the client, holding the first one sent while the mode is `LATE`.
async fn answers(
    from: &mut (impl tokio::io::AsyncRead + Unpin),
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
    mode: &AtomicU8,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut buf = vec![0; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        if mode.compare_exchange(LATE, FORWARD, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

async fn redis_proxy(target: &str) -> RedisProxy {
    let target = url::Url::parse(target).unwrap();
    let upstream = format!("{}:{}", target.host_str().unwrap(), target.port().unwrap_or(6379));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    let mode = Arc::new(AtomicU8::new(FORWARD));
    let m = mode.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut client, _)) = listener.accept().await {
            if m.load(Ordering::SeqCst) == BLACKHOLE {
                held.push(client);
                continue;
            }
            let upstream = upstream.clone();
            let m = m.clone();
            tokio::spawn(async move {
                let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else { return };
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                let cut = async {
                    while m.load(Ordering::SeqCst) != BLACKHOLE {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                tokio::select! {
                    _ = tokio::io::copy(&mut cr, &mut sw) => {},
                    () = answers(&mut sr, &mut cw, &m) => {},
                    _ = cut => {},
                }
            });
        }
    });
    RedisProxy { url, mode }
}

/// An app whose Redis is reached through a [`RedisProxy`], with a 200 ms timeout, and a gym whose
/// key Redis already knows; `None` (the test skipped) without `TEST_REDIS_URL`.
async fn behind_a_proxy(gym: &str) -> Option<(RedisProxy, TestApp, crate::common::Gym)> {
    let Some(redis) = std::env::var("TEST_REDIS_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("skipped: needs TEST_REDIS_URL (the Redis pass of .ci/run runs it)");
        return None;
    };
    let proxy = redis_proxy(&redis).await;
    let app = TestApp::spawn_with(|c| {
        c.redis_url = Some(proxy.url.clone());
        c.redis_timeout = Duration::from_millis(200);
        c.metrics_token = Some("scrape".into());
    })
    .await;
    let gym = app.gym(gym).await;
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200);
    Some((proxy, app, gym))
}

/// Redis hangs mid-run: reads keep working (the limiter fails open), keyed writes go on with the
/// database alone keeping their keys (a repeat replays, nothing is written twice), and nothing
/// waits much longer than the configured timeout.
#[tokio::test]
async fn a_hung_redis_fails_reads_open_and_keyed_writes_stay_exactly_once() {
    let Some((proxy, app, gym)) = behind_a_proxy("Outage").await else { return };

    proxy.mode.store(BLACKHOLE, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let started = Instant::now();
    let read = app.get(&gym.live_key, "/members").await;
    assert_eq!(read.status, 200, "reads keep working while Redis is down");
    assert_eq!(read.header("x-ratelimit-remaining"), Some("120"));
    let keyed = || {
        app.request(
            "POST",
            "/members",
            Some(&gym.live_key),
            Some(json!({"first_name": "Keyed", "last_name": "Write"})),
            &[("Idempotency-Key", "during-outage")],
        )
    };
    let first = keyed().await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.header("idempotency-replayed"), Some("false"));
    let again = keyed().await;
    assert_eq!((again.status, again.header("idempotency-replayed")), (201, Some("true")));
    assert_eq!(again.body, first.body, "the database's record answers the repeat");
    let unkeyed = app.post(&gym.live_key, "/members", json!({"first_name": "Plain", "last_name": "Write"})).await;
    assert_eq!(unkeyed.status, 201, "writes without a key do not need Redis");
    let ready = app.raw(reqwest::Method::GET, "/readyz").send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "five requests took {elapsed:?} with a 200 ms Redis timeout");
    let members = app.get(&gym.live_key, "/members").await.body;
    assert_eq!(members["meta"]["total"], 2, "the keyed write was written once: {members}");
    // Redis is skipped now, not waited for on every request: its breaker is open.
    let metrics = scrape(&app).await;
    assert!(metrics.contains("gymapi_store_up 0"), "{metrics}");
    assert!(metrics.contains("gymapi_store_breaker_opened_total 1"), "{metrics}");

    // Back to normal once Redis answers again.
    proxy.mode.store(FORWARD, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = app
            .request(
                "POST",
                "/members",
                Some(&gym.live_key),
                Some(json!({"first_name": "After", "last_name": "Outage"})),
                &[("Idempotency-Key", "after-outage")],
            )
            .await;
        if r.status == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "keyed writes never recovered: {}", r.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The key used during the outage still replays, from the database.
    let later = keyed().await;
    assert_eq!((later.status, later.header("idempotency-replayed")), (201, Some("true")));
    assert_eq!(later.body, first.body);
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 3);
    assert!(scrape(&app).await.contains("gymapi_store_up 1"), "the breaker closed again");
}

/// A keyed write whose admission Redis answered after the timeout: the admission may have begun
/// the key there for this very request, so the request goes on with the database alone keeping its
/// key rather than asking Redis again and finding the key running (a 409 for a request nobody else
/// sent); its response then replaces the key's lock, so a repeat replays at once.
#[tokio::test]
async fn a_late_admission_does_not_refuse_its_own_request() {
    let Some((proxy, app, gym)) = behind_a_proxy("Late").await else { return };
    let keyed = || {
        app.request(
            "POST",
            "/members",
            Some(&gym.live_key),
            Some(json!({"first_name": "Late", "last_name": "Answer"})),
            &[("Idempotency-Key", "late-1")],
        )
    };
    proxy.mode.store(LATE, Ordering::SeqCst);
    let first = keyed().await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(proxy.mode.load(Ordering::SeqCst), FORWARD, "an answer was held");
    let again = keyed().await;
    assert_eq!((again.status, again.header("idempotency-replayed")), (201, Some("true")), "{}", again.body);
    assert_eq!(again.body, first.body);
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 1);
}

async fn scrape(app: &TestApp) -> String {
    app.raw(reqwest::Method::GET, "/metrics").bearer_auth("scrape").send().await.unwrap().text().await.unwrap()
}

/// A three-node Redis Cluster on loopback ports of the test's own, stopped when dropped.
struct Cluster {
    nodes: Vec<std::process::Child>,
    url: String,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// `None` where redis-server or redis-cli is missing (a newcomer's machine).
    fn start() -> Option<Self> {
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir().unwrap();
        // Ports whose cluster bus port (+10000) is free too.
        let mut ports = Vec::new();
        while ports.len() < 3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            if port < 55535 && std::net::TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
                ports.push(port);
            }
        }
        let mut nodes = Vec::new();
        for port in &ports {
            let node_dir = dir.path().join(port.to_string());
            std::fs::create_dir(&node_dir).unwrap();
            let args = ["--port", &port.to_string(), "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--save", ""];
            let child = Command::new("redis-server")
                .args(args)
                .args(["--appendonly", "no", "--dir", node_dir.to_str().unwrap()])
                .stdout(Stdio::null())
                .spawn()
                .ok()?;
            nodes.push(child);
        }
        let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let cluster = Self {
            nodes,
            url: addresses.iter().map(|a| format!("redis://{a}")).collect::<Vec<_>>().join(","),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let created = Command::new("redis-cli")
                .args(["--cluster", "create"])
                .args(&addresses)
                .args(["--cluster-replicas", "0", "--cluster-yes"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .ok()?;
            if created.success() {
                break;
            }
            assert!(Instant::now() < deadline, "the cluster could not be created");
            std::thread::sleep(Duration::from_millis(200));
        }
        while !Command::new("redis-cli")
            .args(["-p", &ports[0].to_string(), "cluster", "info"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
        {
            assert!(Instant::now() < deadline, "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(cluster)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

/// `REDIS_URL` listing a Redis Cluster's nodes: the limit, the key cache (a revoke reaches keys on
/// every slot), refusals and keyed replays work across its slots.
#[tokio::test]
async fn a_redis_cluster_keeps_limits_keys_and_replays() {
    let Some(cluster) = Cluster::start() else {
        eprintln!("skipped: needs redis-server and redis-cli");
        return;
    };
    let app = TestApp::spawn_with(|c| {
        c.redis_url = Some(cluster.url.clone());
        c.redis_prefix = format!("gymapi-cluster-{}:", uuid::Uuid::now_v7().simple());
    })
    .await;
    let gyms = [app.gym("Slot one").await, app.gym("Slot two").await, app.gym("Slot three").await];
    for gym in &gyms {
        for remaining in ["119", "118"] {
            let r = app.get(&gym.live_key, "/members").await;
            assert_eq!((r.status, r.header("x-ratelimit-remaining")), (200, Some(remaining)));
        }
        let keyed = || {
            let body = json!({"first_name": "Clustered", "last_name": "Write"});
            app.request("POST", "/members", Some(&gym.live_key), Some(body), &[("Idempotency-Key", "cluster-1")])
        };
        let first = keyed().await;
        let again = keyed().await;
        assert_eq!((first.status, again.status, again.header("idempotency-replayed")), (201, 201, Some("true")));
        assert_eq!(again.body, first.body);
    }
    // A change to a gym drops the grants of all its keys, each on a slot of its own, at once.
    let second = accounts::create_key(&app.db, &accounts::Actor::Operator, gyms[0].id, Environment::Live, "second")
        .await
        .unwrap()
        .key;
    assert_eq!(app.get(&second, "/members").await.status, 200);
    let off = accounts::GymUpdate { api_access: Some(false), ..Default::default() };
    accounts::update_gym(&app.db, &*app.store, gyms[0].id, off).await.unwrap();
    for key in [&gyms[0].live_key, &second] {
        assert_eq!(app.get(key, "/members").await.status, 403);
    }
    // Revoking keys of several gyms drops grants kept on different slots.
    for gym in &gyms {
        accounts::revoke_key(&app.db, &*app.store, &accounts::Actor::Operator, gym.live_key_id).await.unwrap();
        assert_eq!(app.get(&gym.live_key, "/members").await.status, 401);
        assert_eq!(app.get(&gym.live_key, "/members").await.status, 401, "remembered as refused");
    }
    drop(app);
}

/// While Redis hangs, the counter keeps selling without waiting for it: once the breaker is open,
/// an order's wake-up skips Redis like every other call, and what every request meets (the
/// limiter failing open) is logged once an interval with a count, not once a request.
#[tokio::test]
async fn a_hung_redis_is_skipped_by_wake_ups_and_logged_once_an_interval() {
    let Some((proxy, app, _)) = behind_a_proxy("Counter outage").await else { return };
    let c = crate::counter::counter(&app, "Counter outage").await;
    let lines = |what: &str| crate::common::captured_logs().lines().filter(|l| l.contains(what)).count();
    let (skipped, unavailable) = ("a wake-up skipped Redis", "unavailable; requests allowed");
    let before = (lines(skipped), lines(unavailable));
    proxy.mode.store(BLACKHOLE, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..20 {
        let r = c.order(&app, json!([{"product_id": c.products["bar"], "quantity": 1}])).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    assert!(lines(skipped) - before.0 >= 15, "the orders' wake-ups went to a Redis whose breaker was open");
    assert!(lines(unavailable) - before.1 <= 2, "the limiter's failure was logged once a request");
    assert_eq!(c.take_payment(&app, &c.terminal).await.as_array().unwrap().len(), 1, "the payments wait all the same");
    proxy.mode.store(FORWARD, Ordering::SeqCst);
}
