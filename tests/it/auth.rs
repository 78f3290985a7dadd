//! Keys, tenants, sandboxes and account conditions (openapi.yaml "Authentication";
//! docs/architecture.md).

use entity::states::{Role, SubscriptionStatus};
use std::time::Duration;

use gymapi::{
    accounts::{self, Actor, GymUpdate, KeyStatus},
    context::Environment,
};
use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
use serde_json::json;

use crate::common::{TestApp, captured_logs, on_postgres};

fn unauthorized() -> serde_json::Value {
    json!({ "error": { "type": "unauthorized", "message": "Invalid or missing API key." } })
}

#[tokio::test]
async fn missing_malformed_and_unknown_keys_get_the_exact_401() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Keys").await;
    let unknown = gymapi::auth::generate_key(Environment::Live);
    let truncated = &gym.live_key[..gym.live_key.len() - 1];
    let wrong_env = gym.live_key.replacen("svc_live_", "svc_test_", 1);
    for key in [None, Some(""), Some("nonsense"), Some(truncated), Some(unknown.as_str()), Some(wrong_env.as_str())] {
        let r = app.request("GET", "/members", key, None, &[]).await;
        assert_eq!(r.status, 401, "key {key:?}");
        assert_eq!(r.body, unauthorized());
    }
    // Other schemes and header spellings.
    let basic = app
        .raw(reqwest::Method::GET, "/api/v1/members")
        .header("Authorization", format!("Basic {}", gym.live_key))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);
}

#[tokio::test]
async fn both_header_forms_are_accepted() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Headers").await;
    let bearer = app.request("GET", "/members", Some(&gym.live_key), None, &[]).await;
    assert_eq!(bearer.status, 200);
    let header = app.request("GET", "/members", None, None, &[("X-Api-Key", &gym.live_key)]).await;
    assert_eq!(header.status, 200);
    let lower = app
        .raw(reqwest::Method::GET, "/api/v1/members")
        .header("authorization", format!("bearer {}", gym.live_key))
        .send()
        .await
        .unwrap();
    assert_eq!(lower.status(), 200);
}

/// Which header is the key when a request carries both: a Bearer token, if there is one, even an
/// invalid one; an empty Bearer or another scheme leaves `X-Api-Key` to be read.
#[tokio::test]
async fn a_bearer_token_takes_precedence_and_an_empty_one_is_absent() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Precedence").await;
    let send = |authorization: &str| {
        app.raw(reqwest::Method::GET, "/api/v1/members")
            .header("authorization", authorization)
            .header("x-api-key", &gym.live_key)
            .send()
    };
    for (authorization, status) in
        [("Bearer ", 200), ("Bearer", 200), ("Basic abc", 200), ("Bearer svc_live_nope", 401)]
    {
        assert_eq!(send(authorization).await.unwrap().status(), status, "Authorization: {authorization}");
    }
}

#[tokio::test]
async fn unknown_paths_answer_401_before_404() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Order").await;
    assert_eq!(app.request("GET", "/no-such-thing", None, None, &[]).await.status, 401);
    let r = app.get(&gym.live_key, "/no-such-thing").await;
    assert_eq!((r.status, r.error_type()), (404, "not_found"));
}

#[tokio::test]
async fn revoked_key_stops_on_the_next_request() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Revoke").await;
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200);
    accounts::revoke_key(&app.db, &*app.store, &Actor::Operator, gym.live_key_id).await.unwrap();
    let r = app.get(&gym.live_key, "/members").await;
    assert_eq!((r.status, r.body.clone()), (401, unauthorized()));
}

/// A key is answered from the key cache, so a change made behind gymapi's back (SQL by hand, or on
/// the embedded default the CLI, another process) is not seen at once: Redis keeps a grant up to 60
/// s, the embedded default's process up to a second (`LOCAL_GRANT_TTL`), after which it reads the
/// key again. gymapi's own revoke clears the cache at once.
#[tokio::test]
async fn the_key_cache_serves_a_key_until_gymapi_itself_revokes_it() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Cache").await;
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200);
    entity::api_key::ActiveModel {
        id: Set(gym.live_key_id),
        revoked_at: Set(Some(gymapi::records::now())),
        ..Default::default()
    }
    .update(&app.db)
    .await
    .unwrap();
    if app.redis_url.is_some() {
        assert_eq!(app.get(&gym.live_key, "/members").await.status, 200, "answered from the cached grant");
    } else {
        // Seen once the process's grant has run out (a loose bound: the machine may be slow).
        let deadline = std::time::Instant::now() + gymapi::limits::LOCAL_GRANT_TTL * 5;
        while app.get(&gym.live_key, "/members").await.status == 200 {
            assert!(std::time::Instant::now() < deadline, "a change behind gymapi's back was never seen");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    // Revoking again through gymapi (already revoked in the table) still clears the cache.
    accounts::revoke_key(&app.db, &*app.store, &Actor::Operator, gym.live_key_id).await.unwrap();
    let r = app.get(&gym.live_key, "/members").await;
    assert_eq!((r.status, r.body.clone()), (401, unauthorized()));
}

/// Rolling a key while its first requests are recorded (`last_used_at`, written beside the
/// request) always succeeds: the roll reads the key inside a transaction that holds the write
/// lock, so no other writer can make what it read stale (on SQLite this answered "database is
/// locked" before).
#[tokio::test]
async fn keys_roll_while_they_are_in_use() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Busy roll").await;
    let mut keys = Vec::new();
    for n in 0..24 {
        keys.push(
            accounts::create_key(&app.db, &Actor::Operator, gym.id, Environment::Live, &format!("k{n}")).await.unwrap(),
        );
    }
    for k in &keys {
        let (used, rolled) = tokio::join!(
            app.get(&k.key, "/members"),
            accounts::roll_key(&app.db, &*app.store, &Actor::Operator, k.model.id, Duration::from_secs(60))
        );
        assert_eq!(used.status, 200);
        if let Err(e) = rolled {
            panic!("rolling key {} failed: {e:?}", k.model.name);
        }
    }
}

#[tokio::test]
async fn rolled_key_keeps_working_until_its_grace_ends() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Roll").await;
    let rolled = accounts::roll_key(&app.db, &*app.store, &Actor::Operator, gym.live_key_id, Duration::from_secs(2))
        .await
        .unwrap();
    // Both keys work during the grace period.
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200);
    assert_eq!(app.get(&rolled.new.key, "/members").await.status, 200);
    // A retiring key cannot be rolled again.
    let again =
        accounts::roll_key(&app.db, &*app.store, &Actor::Operator, gym.live_key_id, Duration::from_secs(2)).await;
    assert!(matches!(again, Err(accounts::AccountError::AlreadyRetiring)), "{again:?}");
    let status = KeyStatus::of(&rolled.retiring, gymapi::records::now());
    assert!(status.label(gymapi::records::now()).starts_with("Retires in"), "{status:?}");
    // After the grace period the old key is refused and the new one still works.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = app.get(&gym.live_key, "/members").await;
        if r.status == 401 {
            assert_eq!(r.body, unauthorized());
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the rolled key still works long after its grace period");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(app.get(&rolled.new.key, "/members").await.status, 200);
    let keys = accounts::list_keys(&app.db, &Actor::Operator, gym.id).await.unwrap();
    let labels: Vec<String> =
        keys.iter().map(|k| KeyStatus::of(k, gymapi::records::now()).label(gymapi::records::now())).collect();
    assert!(labels.contains(&"Expired".to_string()) && labels.contains(&"Active".to_string()), "{labels:?}");
}

#[tokio::test]
async fn test_keys_need_a_sandbox_and_see_only_it() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Live and test").await;
    let no_sandbox = accounts::create_key(&app.db, &Actor::Operator, gym.id, Environment::Test, "t").await;
    assert_eq!(no_sandbox.unwrap_err().to_string(), "Provision a sandbox first to create a test key.");

    let test_key = app.test_key(&gym).await;
    let sandbox = accounts::sandbox_of(&app.db, gym.id).await.unwrap().unwrap();
    assert_eq!(sandbox.name, "Live and test (Sandbox)");
    // A second sandbox is refused.
    let second = accounts::provision_sandbox(&app.db, &Actor::Operator, gym.id).await;
    assert!(matches!(second, Err(accounts::AccountError::SandboxExists)));

    // The sandbox starts empty, with one facility of its own.
    let sandbox_stats = app.get(&test_key, "/statistics").await;
    assert_eq!(sandbox_stats.body["members"]["total"], 0);
    assert_eq!(sandbox_stats.body["facilities"], 1);

    let live_member = app.member(&gym.live_key, "Live", "Member").await;
    let test_member = app.member(&test_key, "Test", "Member").await;
    assert_ne!(live_member["facility_id"], test_member["facility_id"]);

    // Each key sees only its own environment, both ways, for reads and writes.
    let live_list = app.get(&gym.live_key, "/members").await;
    assert_eq!(live_list.body["meta"]["total"], 1);
    assert_eq!(live_list.body["data"][0]["id"], live_member["id"]);
    let test_list = app.get(&test_key, "/members").await;
    assert_eq!(test_list.body["meta"]["total"], 1);
    assert_eq!(test_list.body["data"][0]["id"], test_member["id"]);
    let live_id = live_member["id"].as_str().unwrap();
    let test_id = test_member["id"].as_str().unwrap();
    assert_eq!(app.get(&test_key, &format!("/members/{live_id}")).await.status, 404);
    assert_eq!(app.get(&gym.live_key, &format!("/members/{test_id}")).await.status, 404);
    assert_eq!(app.patch(&test_key, &format!("/members/{live_id}"), json!({"city": "X"})).await.status, 404);
    assert_eq!(app.patch(&gym.live_key, &format!("/members/{test_id}"), json!({"city": "X"})).await.status, 404);
    // A live key's facility is not the sandbox's.
    let cross_facility = app
        .post(
            &test_key,
            "/members",
            json!({"first_name": "A", "last_name": "B", "facility_id": live_member["facility_id"]}),
        )
        .await;
    assert_eq!(cross_facility.status, 422);
    assert!(cross_facility.body["errors"]["facility_id"].is_array());
}

#[tokio::test]
async fn a_key_whose_gym_is_a_sandbox_never_works() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Parent").await;
    let sandbox = accounts::provision_sandbox(&app.db, &Actor::Operator, gym.id).await.unwrap();
    // The domain refuses keys for a sandbox; a row made behind its back must still not work.
    assert!(accounts::create_key(&app.db, &Actor::Operator, sandbox.id, Environment::Live, "x").await.is_err());
    for env in [Environment::Live, Environment::Test] {
        let key = gymapi::auth::generate_key(env);
        entity::api_key::ActiveModel {
            id: Set(gymapi::records::new_id()),
            gym_id: Set(sandbox.id),
            name: Set("forged".into()),
            environment: Set(env),
            fingerprint: Set(gymapi::auth::fingerprint(&key)),
            prefix: Set(gymapi::auth::display_prefix(&key)),
            created_at: Set(gymapi::records::now()),
            last_used_at: Set(None),
            expires_at: Set(None),
            revoked_at: Set(None),
            replaced_by_id: Set(None),
            checksummed: Set(true),
        }
        .insert(&app.db)
        .await
        .unwrap();
        let r = app.get(&key, "/members").await;
        assert_eq!((r.status, r.body.clone()), (401, unauthorized()), "{env:?}");
    }
}

#[tokio::test]
async fn records_of_another_gym_answer_404_for_reads_and_writes() {
    let app = TestApp::spawn().await;
    let a = app.gym("A").await;
    let b = app.gym("B").await;
    let member = app.member(&a.live_key, "Only", "A").await;
    let id = member["id"].as_str().unwrap();
    let r = app.get(&b.live_key, &format!("/members/{id}")).await;
    assert_eq!((r.status, r.error_type()), (404, "not_found"));
    for method in ["PUT", "PATCH"] {
        let r =
            app.request(method, &format!("/members/{id}"), Some(&b.live_key), Some(json!({"city": "B"})), &[]).await;
        assert_eq!((r.status, r.error_type()), (404, "not_found"), "{method}");
    }
    assert_eq!(app.get(&b.live_key, "/members").await.body["meta"]["total"], 0);
    // Unchanged for its owner.
    assert_eq!(app.get(&a.live_key, &format!("/members/{id}")).await.body["city"], serde_json::Value::Null);
}

#[tokio::test]
async fn unpaid_past_grace_is_402_and_plan_without_api_is_403_in_that_order() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Billing").await;
    let test_key = app.test_key(&gym).await;
    let in_grace = GymUpdate {
        subscription_status: Some(SubscriptionStatus::PastDue),
        grace_ends_at: Some(Some(gymapi::records::now() + chrono::Duration::days(3))),
        ..Default::default()
    };
    accounts::update_gym(&app.db, &*app.store, gym.id, in_grace).await.unwrap();
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200, "within the grace period requests work");

    let past_grace = GymUpdate {
        grace_ends_at: Some(Some(gymapi::records::now() - chrono::Duration::minutes(1))),
        ..Default::default()
    };
    accounts::update_gym(&app.db, &*app.store, gym.id, past_grace).await.unwrap();
    for key in [&gym.live_key, &test_key] {
        let r = app.get(key, "/members").await;
        assert_eq!(r.status, 402);
        assert_eq!(r.body, json!({ "error": { "type": "payment_required", "message": "payment_required" } }));
    }
    // 402 comes before 403.
    accounts::update_gym(&app.db, &*app.store, gym.id, GymUpdate { api_access: Some(false), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 402);

    accounts::update_gym(
        &app.db,
        &*app.store,
        gym.id,
        GymUpdate { subscription_status: Some(SubscriptionStatus::Active), ..Default::default() },
    )
    .await
    .unwrap();
    for key in [&gym.live_key, &test_key] {
        let r = app.get(key, "/members").await;
        assert_eq!(r.status, 403);
        assert_eq!(
            r.body,
            json!({ "error": { "type": "forbidden", "message": "This gym does not have API access enabled." } })
        );
    }
    // Keys created earlier work again once the feature returns.
    accounts::update_gym(&app.db, &*app.store, gym.id, GymUpdate { api_access: Some(true), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200);
    assert_eq!(app.get(&test_key, "/members").await.status, 200);
    // Unpaid without a grace period blocks at once.
    accounts::update_gym(
        &app.db,
        &*app.store,
        gym.id,
        GymUpdate {
            subscription_status: Some(SubscriptionStatus::Unpaid),
            grace_ends_at: Some(None),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 402);
}

#[tokio::test]
async fn invalid_keys_answer_401_even_when_the_gym_is_blocked() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Blocked").await;
    accounts::update_gym(&app.db, &*app.store, gym.id, GymUpdate { api_access: Some(false), ..Default::default() })
        .await
        .unwrap();
    accounts::revoke_key(&app.db, &*app.store, &Actor::Operator, gym.live_key_id).await.unwrap();
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 401);
}

#[tokio::test]
async fn permissions_are_enforced_in_one_place() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Staff").await;
    let other = app.gym("Other").await;
    let owner = accounts::create_user(&app.db, gym.id, "owner@example.com", Role::Owner, &[], "correct horse battery")
        .await
        .unwrap();
    let clerk =
        accounts::create_user(&app.db, gym.id, "clerk@example.com", Role::Employee, &[], "correct horse battery")
            .await
            .unwrap();
    let manager = accounts::create_user(
        &app.db,
        gym.id,
        "manager@example.com",
        Role::Employee,
        &[accounts::Permission::SettingsManage],
        "correct horse battery",
    )
    .await
    .unwrap();
    let denied = accounts::create_key(&app.db, &Actor::User(clerk.clone()), gym.id, Environment::Live, "x").await;
    assert!(matches!(denied, Err(accounts::AccountError::PermissionDenied("settings.manage"))), "{denied:?}");
    assert!(accounts::revoke_key(&app.db, &*app.store, &Actor::User(clerk.clone()), gym.live_key_id).await.is_err());
    assert!(accounts::provision_sandbox(&app.db, &Actor::User(clerk), gym.id).await.is_err());
    assert!(accounts::create_key(&app.db, &Actor::User(manager), gym.id, Environment::Live, "ok").await.is_ok());
    assert!(accounts::create_key(&app.db, &Actor::User(owner.clone()), gym.id, Environment::Live, "ok").await.is_ok());
    // Nobody acts on another gym.
    assert!(accounts::revoke_key(&app.db, &*app.store, &Actor::User(owner), other.live_key_id).await.is_err());
    assert_eq!(app.get(&other.live_key, "/members").await.status, 200);
}

#[tokio::test]
async fn last_used_is_recorded_off_the_request_path() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Usage").await;
    let before = accounts::find_key(&app.db, gym.live_key_id).await.unwrap();
    assert!(before.last_used_at.is_none());
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let first = loop {
        if let Some(t) = accounts::find_key(&app.db, gym.live_key_id).await.unwrap().last_used_at {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "last_used_at never written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // More requests within the minute do not write again.
    for _ in 0..3 {
        app.get(&gym.live_key, "/members").await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(accounts::find_key(&app.db, gym.live_key_id).await.unwrap().last_used_at, Some(first));
}

/// Only the fingerprint of a key is stored, and no key appears in the logs.
#[tokio::test]
async fn no_full_key_is_stored_or_logged() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Secrets").await;
    let test_key = app.test_key(&gym).await;
    for key in [&gym.live_key, &test_key] {
        app.get(key, "/members").await;
        app.request("GET", "/members", None, None, &[("X-Api-Key", key)]).await;
        app.post(key, "/members", json!({"first_name": "Log", "last_name": "Me"})).await;
    }
    // A failing request, whose path of errors is the most likely to log too much.
    app.request("GET", "/members", Some(&format!("{}x", gym.live_key)), None, &[]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = captured_logs();
    assert!(logs.contains("request"), "the test must see the request logs");
    for key in [&gym.live_key, &test_key] {
        let random = &key[9..];
        assert!(!logs.contains(random), "a key appears in the logs");
        let stored = accounts::find_key(&app.db, gym.live_key_id).await.unwrap();
        assert_eq!(stored.fingerprint, gymapi::auth::fingerprint(&gym.live_key));
        assert_eq!(stored.prefix, gym.live_key[..13]);
    }
    if on_postgres() {
        // Every text column of the key table, as PostgreSQL renders the rows.
        let rows = app
            .db
            .query_all(sea_orm::Statement::from_string(
                app.db.get_database_backend(),
                "SELECT api_keys::text AS t FROM api_keys",
            ))
            .await
            .unwrap();
        let dump: String = rows.iter().map(|r| r.try_get::<String>("", "t").unwrap()).collect::<Vec<_>>().join("\n");
        assert!(dump.contains(&gymapi::auth::fingerprint(&test_key)));
        for key in [&gym.live_key, &test_key] {
            assert!(!dump.contains(&key[9..]), "a full key is stored");
        }
    } else {
        // Every byte of the SQLite database, its WAL included.
        app.db.execute_unprepared("PRAGMA wal_checkpoint(FULL)").await.unwrap();
        let dir = app.scratch.dir.as_ref().unwrap().path();
        let mut bytes = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
        }
        let haystack = String::from_utf8_lossy(&bytes);
        assert!(haystack.contains(&gymapi::auth::fingerprint(&test_key)), "the test must see the stored fingerprints");
        for key in [&gym.live_key, &test_key] {
            assert!(!haystack.contains(&key[9..]), "a full key is stored");
        }
    }
}
