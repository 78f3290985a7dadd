//! Members: create, read, update, list, search and walk.

use std::collections::HashSet;

use chrono::Timelike;
use entity::ids::GymId;
use serde_json::{Value, json};

use crate::common::TestApp;

#[tokio::test]
async fn create_fills_defaults_and_places_the_member_in_the_first_facility() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Create").await;
    let r = app.post(&gym.live_key, "/members", json!({"first_name": "Ada", "last_name": "Lovelace"})).await;
    assert_eq!(r.status, 201);
    let m = &r.body;
    assert_eq!(m["object"], "member");
    assert_eq!(m["status"], "active");
    assert_eq!(m["visits_count"], 0);
    assert_eq!(m["email"], Value::Null);
    let first = gymapi::accounts::first_facility(&app.db, gym.id).await.unwrap().unwrap();
    assert_eq!(m["facility_id"], first.id.to_string());
    let id = m["id"].as_str().unwrap();
    let fetched = app.get(&gym.live_key, &format!("/members/{id}")).await;
    assert_eq!(fetched.status, 200);
    assert_eq!(&fetched.body, m);
}

#[tokio::test]
async fn every_input_field_round_trips() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Fields").await;
    let input = json!({
        "first_name": "Grace", "last_name": "Hopper", "email": "grace@example.com", "phone": "+1 555 0100",
        "gender": "female", "date_of_birth": "1906-12-09", "city": "New York", "country": "US", "status": "inactive"
    });
    let r = app.post(&gym.live_key, "/members", input.clone()).await;
    assert_eq!(r.status, 201);
    for (k, v) in input.as_object().unwrap() {
        assert_eq!(&r.body[k], v, "{k}");
    }
}

#[tokio::test]
async fn email_is_unique_per_gym_whatever_its_case() {
    let app = TestApp::spawn().await;
    let a = app.gym("A").await;
    let b = app.gym("B").await;
    assert_eq!(
        app.post(&a.live_key, "/members", json!({"first_name": "A", "last_name": "A", "email": "Same@Example.com"}))
            .await
            .status,
        201
    );
    let dup = app
        .post(&a.live_key, "/members", json!({"first_name": "B", "last_name": "B", "email": "same@example.COM"}))
        .await;
    assert_eq!(dup.status, 422);
    assert_eq!(dup.body["errors"]["email"], json!(["The email has already been taken."]));
    // Another gym may use it.
    assert_eq!(
        app.post(&b.live_key, "/members", json!({"first_name": "C", "last_name": "C", "email": "same@example.com"}))
            .await
            .status,
        201
    );
    // Changing another member to a taken address is refused too.
    let other = app.member(&a.live_key, "D", "D").await;
    let r = app
        .patch(
            &a.live_key,
            &format!("/members/{}", other["id"].as_str().unwrap()),
            json!({"email": "SAME@example.com"}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(app.get(&a.live_key, "/members").await.body["meta"]["total"], 2);
}

/// A new member whose email and card are taken and whose facility is another gym's hears of all
/// three in one 422, and nothing is written.
#[tokio::test]
async fn every_rule_a_new_member_breaks_is_named_at_once() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.gym("A").await, app.gym("B").await);
    let taken = json!({"first_name": "First", "last_name": "Holder", "email": "held@example.com", "access_card": "C1"});
    assert_eq!(app.post(&a.live_key, "/members", taken).await.status, 201);
    let elsewhere = app.member(&b.live_key, "Else", "Where").await["facility_id"].clone();
    let body = json!({"first_name": "Second", "last_name": "Try", "email": "HELD@example.com", "access_card": "C1",
                      "facility_id": elsewhere});
    for key in [None, Some("all-at-once")] {
        let headers: Vec<(&str, &str)> = key.map(|k| ("Idempotency-Key", k)).into_iter().collect();
        let r = app.request("POST", "/members", Some(&a.live_key), Some(body.clone()), &headers).await;
        assert_eq!(r.status, 422, "{}", r.body);
        assert_eq!(r.body["errors"]["email"], json!(["The email has already been taken."]));
        assert_eq!(r.body["errors"]["access_card"], json!(["The access_card has already been taken."]));
        assert_eq!(r.body["errors"]["facility_id"], json!(["The selected facility_id is not a facility of this gym."]));
    }
    assert_eq!(app.get(&a.live_key, "/members").await.body["meta"]["total"], 1);
}

/// Keyed writes arriving together are committed together on SQLite, and each is still answered
/// for itself: of three writers racing for each email, one gets its 201 and the others a 422,
/// whether the race is lost at the handler's check or at the commit, and exactly the winners exist.
#[tokio::test]
async fn keyed_writes_racing_for_emails_each_get_their_own_answer() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Racing").await;
    let sends = (0..36).map(|i| {
        let (app, key) = (&app, &gym.live_key);
        async move {
            let body = json!({"first_name": "Racer", "last_name": format!("R{i}"),
                              "email": format!("racer-{}@example.com", i % 12)});
            let idempotency = format!("race-{i}");
            let r = app.request("POST", "/members", Some(key), Some(body), &[("Idempotency-Key", &idempotency)]).await;
            (i % 12, r.status, r.body)
        }
    });
    let answers = futures_util::future::join_all(sends).await;
    let mut winners = HashSet::new();
    for (email, status, body) in &answers {
        match status {
            201 => assert!(winners.insert(*email), "a second 201 for racer-{email}: {body}"),
            422 => assert_eq!(body["errors"]["email"], json!(["The email has already been taken."]), "{body}"),
            _ => panic!("racer-{email}: {status} {body}"),
        }
    }
    assert_eq!(winners.len(), 12, "{answers:?}");
    let listed = app.get(&gym.live_key, "/members?search=racer&per_page=100").await.body;
    let ids: HashSet<&str> = listed["data"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
    let won: HashSet<&str> = answers.iter().filter(|a| a.1 == 201).filter_map(|a| a.2["id"].as_str()).collect();
    assert_eq!(ids, won);
}

/// An access card opens the gym's doors for one member: unique in the gym, case included, free
/// again once cleared; writers racing for one card end in one 201 and 422s, never a 500.
#[tokio::test]
async fn access_card_is_unique_per_gym_case_included() {
    let app = TestApp::spawn().await;
    let (a, b) = (app.gym("A").await, app.gym("B").await);
    let with_card = |name: &str, card: &str| json!({"first_name": name, "last_name": "Card", "access_card": card});
    let first = app.post(&a.live_key, "/members", with_card("First", "04AB")).await;
    assert_eq!((first.status, first.body["access_card"].clone()), (201, json!("04AB")));
    let dup = app.post(&a.live_key, "/members", with_card("Dup", "04AB")).await;
    assert_eq!(dup.status, 422);
    assert_eq!(dup.body["errors"]["access_card"], json!(["The access_card has already been taken."]));
    assert_eq!(app.post(&a.live_key, "/members", with_card("Lower", "04ab")).await.status, 201);
    assert_eq!(app.post(&b.live_key, "/members", with_card("Elsewhere", "04AB")).await.status, 201);
    assert_eq!(app.post(&a.live_key, "/members", with_card("Empty", "")).await.status, 422);

    let other = app.member(&a.live_key, "Other", "Card").await;
    let other_path = format!("/members/{}", other["id"].as_str().unwrap());
    let r = app.patch(&a.live_key, &other_path, json!({"access_card": "04AB"})).await;
    assert_eq!(r.body["errors"]["access_card"], json!(["The access_card has already been taken."]));
    let first_path = format!("/members/{}", first.body["id"].as_str().unwrap());
    let cleared = app.patch(&a.live_key, &first_path, json!({"access_card": null})).await;
    assert_eq!((cleared.status, cleared.body["access_card"].clone()), (200, json!(null)));
    let moved = app.patch(&a.live_key, &other_path, json!({"access_card": "04AB"})).await;
    assert_eq!((moved.status, moved.body["access_card"].clone()), (200, json!("04AB")));

    let racers = (0..6).map(|i| app.post(&a.live_key, "/members", with_card(&format!("Racer{i}"), "RACE")));
    let mut statuses: Vec<u16> = futures_util::future::join_all(racers).await.iter().map(|r| r.status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 422, 422, 422, 422, 422]);
}

#[tokio::test]
async fn patch_and_put_change_only_the_given_fields_and_null_clears() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Update").await;
    let created = app
        .post(
            &gym.live_key,
            "/members",
            json!({"first_name": "Alan", "last_name": "Turing", "city": "London", "phone": "123"}),
        )
        .await
        .body;
    let id = created["id"].as_str().unwrap();
    for method in ["PATCH", "PUT"] {
        let r = app
            .request(method, &format!("/members/{id}"), Some(&gym.live_key), Some(json!({"city": "Manchester"})), &[])
            .await;
        assert_eq!(r.status, 200, "{method}");
        assert_eq!(r.body["city"], "Manchester");
        assert_eq!(r.body["phone"], "123", "{method} must not touch other fields");
        assert_eq!(r.body["first_name"], "Alan");
    }
    let r = app.patch(&gym.live_key, &format!("/members/{id}"), json!({"phone": null, "status": "inactive"})).await;
    assert_eq!((r.body["phone"].clone(), r.body["status"].clone()), (Value::Null, json!("inactive")));
    assert!(r.body["updated_at"].as_str().unwrap() >= created["updated_at"].as_str().unwrap());
    assert_eq!(r.body["created_at"], created["created_at"]);
    // Required fields cannot be cleared, unknown fields are refused, and nothing changes then.
    let bad = app
        .patch(&gym.live_key, &format!("/members/{id}"), json!({"first_name": null, "city": "Paris", "nickname": "x"}))
        .await;
    assert_eq!(bad.status, 422);
    assert!(bad.body["errors"]["first_name"].is_array() && bad.body["errors"]["nickname"].is_array());
    assert_eq!(app.get(&gym.live_key, &format!("/members/{id}")).await.body["city"], "Manchester");
    // An empty change is a no-op that answers the record.
    assert_eq!(app.patch(&gym.live_key, &format!("/members/{id}"), json!({})).await.status, 200);
    // Unknown ids.
    assert_eq!(
        app.patch(&gym.live_key, "/members/0192f7c4-3b7e-7cc1-a8e3-5b8f4d1e2a90", json!({"city": "X"})).await.status,
        404
    );
}

#[tokio::test]
async fn facility_must_belong_to_the_gym() {
    let app = TestApp::spawn().await;
    let a = app.gym("A").await;
    let b = app.gym("B").await;
    let b_facility = gymapi::accounts::first_facility(&app.db, b.id).await.unwrap().unwrap();
    let r = app
        .post(&a.live_key, "/members", json!({"first_name": "X", "last_name": "Y", "facility_id": b_facility.id}))
        .await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["facility_id"].is_array());
    let r = app
        .post(&a.live_key, "/members", json!({"first_name": "X", "last_name": "Y", "facility_id": "not-a-uuid"}))
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn list_is_newest_first_and_filters_by_status_and_search() {
    let app = TestApp::spawn().await;
    let gym = app.gym("List").await;
    let ada = app
        .post(
            &gym.live_key,
            "/members",
            json!({"first_name": "Ada", "last_name": "Lovelace", "email": "ada@example.com"}),
        )
        .await
        .body;
    let grace = app
        .post(&gym.live_key, "/members", json!({"first_name": "Grace", "last_name": "Hopper", "status": "inactive"}))
        .await
        .body;
    let odd = app.post(&gym.live_key, "/members", json!({"first_name": "100%", "last_name": "Real_Name"})).await.body;
    let list = app.get(&gym.live_key, "/members").await.body;
    let ids: Vec<&Value> = list["data"].as_array().unwrap().iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, vec![&odd["id"], &grace["id"], &ada["id"]]);
    assert_eq!(list["meta"]["per_page"], 25);

    let ids_for = |body: &Value| body["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids_for(&app.get(&gym.live_key, "/members?status=inactive").await.body), vec![grace["id"].clone()]);
    for term in ["ada", "ADA", "lovelace", "ada%20love", "Ada%20Lovelace", "ada%40example", "LACE"] {
        let r = app.get(&gym.live_key, &format!("/members?search={term}")).await.body;
        assert_eq!(ids_for(&r), vec![ada["id"].clone()], "search {term}");
    }
    // Wildcards in the term are literal.
    assert_eq!(ids_for(&app.get(&gym.live_key, "/members?search=100%25").await.body), vec![odd["id"].clone()]);
    assert_eq!(ids_for(&app.get(&gym.live_key, "/members?search=e_a").await.body), Vec::<Value>::new());
    assert_eq!(ids_for(&app.get(&gym.live_key, "/members?search=l_n").await.body), vec![odd["id"].clone()]);
    // Filters combine and stay in every link.
    let r = app.get(&gym.live_key, "/members?status=active&search=a&per_page=1").await.body;
    assert_eq!(r["meta"]["total"], 2);
    for link in ["first", "last", "next"] {
        let url = r["links"][link].as_str().unwrap();
        assert!(
            url.contains("status=active")
                && url.contains("search=a")
                && url.contains("per_page=1")
                && url.contains("as_of="),
            "{link}: {url}"
        );
    }
    assert_eq!(r["links"]["prev"], Value::Null);

    // A search walk counts and lists only the members created before it started (`as_of`).
    let next = r["links"]["next"].as_str().unwrap().to_string();
    app.post(&gym.live_key, "/members", json!({"first_name": "Alan", "last_name": "Turing"})).await;
    assert_eq!(app.get(&gym.live_key, "/members?status=active&search=a").await.body["meta"]["total"], 3);
    let path = next.split("/api/v1").nth(1).unwrap();
    let second = app.get(&gym.live_key, path).await.body;
    assert_eq!(second["meta"]["total"], 2, "{second}");
    assert_eq!(ids_for(&second), vec![ada["id"].clone()]);
}

/// A search's total is counted once and kept, but every write that changes what the search
/// matches shows in the next total, on this server and on another one on the same database.
#[tokio::test]
async fn a_search_total_follows_every_write_that_changes_it() {
    let app = TestApp::spawn().await;
    let other = app.another_instance().await;
    let gym = app.gym("Counted").await;
    let k = &gym.live_key;
    let totals = |path: &'static str| {
        let app = &app;
        let other = &other;
        async move {
            let mut seen = Vec::new();
            for base in [&app.address, other, &app.address] {
                let r = app.client.get(format!("{base}/api/v1{path}")).bearer_auth(k).send().await.unwrap();
                assert_eq!(r.status(), 200, "{path}");
                let body: Value = r.json().await.unwrap();
                seen.push(body["meta"]["total"].as_i64().unwrap());
            }
            assert!(seen.iter().all(|t| *t == seen[0]), "{path}: the two servers disagree: {seen:?}");
            seen[0]
        }
    };
    let ada = app.member(k, "Ada", "Lovelace").await;
    let grace = app.member(k, "Grace", "Hopper").await;
    assert_eq!(totals("/members?search=ada").await, 1);
    assert_eq!(totals("/members?search=lovelace").await, 1);
    assert_eq!(totals("/members?status=active&search=ada").await, 1);

    // A name that now matches.
    let grace_id = grace["id"].as_str().unwrap();
    assert_eq!(app.patch(k, &format!("/members/{grace_id}"), json!({"first_name": "Adaline"})).await.status, 200);
    assert_eq!(totals("/members?search=ada").await, 2);
    assert_eq!(totals("/members?status=active&search=ada").await, 2);
    // A status the filter no longer takes.
    assert_eq!(app.patch(k, &format!("/members/{grace_id}"), json!({"status": "inactive"})).await.status, 200);
    assert_eq!(totals("/members?status=active&search=ada").await, 1);
    assert_eq!(totals("/members?search=ada").await, 2);
    // A change search does not see, then a name that no longer matches.
    let ada_id = ada["id"].as_str().unwrap();
    assert_eq!(app.patch(k, &format!("/members/{ada_id}"), json!({"phone": "+44 20 7946 0000"})).await.status, 200);
    assert_eq!(totals("/members?search=lovelace").await, 1);
    assert_eq!(app.patch(k, &format!("/members/{ada_id}"), json!({"last_name": "King"})).await.status, 200);
    assert_eq!(totals("/members?search=lovelace").await, 0);
    // An email that matches.
    assert_eq!(app.patch(k, &format!("/members/{ada_id}"), json!({"email": "lovelace@example.com"})).await.status, 200);
    assert_eq!(totals("/members?search=lovelace").await, 1);
    // A new member, and an imported one.
    app.member(k, "Adam", "Smith").await;
    assert_eq!(totals("/members?search=ada").await, 3);
    let rows = json!({"rows": [{"legacy_id": "M-1", "first_name": "Adah", "last_name": "Menken"}]});
    assert_eq!(app.post(k, "/import/members", rows).await.status, 200);
    assert_eq!(totals("/members?search=ada").await, 4);
    assert_eq!(totals("/members?status=active&search=ada").await, 3);
    // A search walk pinned before the newest member still counts only what came before it.
    let first = app.get(k, "/members?search=ada&per_page=1").await.body;
    let next = first["links"]["next"].as_str().unwrap().split("/api/v1").nth(1).unwrap().to_string();
    app.member(k, "Adaeze", "Obi").await;
    assert_eq!(app.get(k, &next).await.body["meta"]["total"], 4);
    assert_eq!(totals("/members?search=ada").await, 5);
}

#[tokio::test]
async fn updated_since_lists_only_recent_changes() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Sync").await;
    let old = app.member(&gym.live_key, "Old", "One").await;
    let _other = app.member(&gym.live_key, "Other", "One").await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let since = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let changed = app
        .patch(&gym.live_key, &format!("/members/{}", old["id"].as_str().unwrap()), json!({"city": "Rome"}))
        .await
        .body;
    let q =
        url::form_urlencoded::Serializer::new(String::new()).append_pair("updated_since", &since.to_rfc3339()).finish();
    let r = app.get(&gym.live_key, &format!("/members?{q}")).await.body;
    assert_eq!(r["meta"]["total"], 1);
    assert_eq!(r["data"][0]["id"], changed["id"]);
}

/// A date-time filter is read in every form clients send for one instant: RFC 3339 with `Z` or
/// `+00:00`, with or without fractions, and the colonless offset openapi-generator's Python client
/// sends (`2026-11-01T00:00:00.000000+0000`), its `+` encoded or not. Each lists the same member;
/// a date that is not one is still 422.
#[tokio::test]
async fn date_time_filters_take_the_forms_generated_clients_send() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Spellings").await;
    let _old = app.member(&gym.live_key, "Old", "One").await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let since = chrono::Utc::now().with_nanosecond(0).unwrap();
    let changed = app.member(&gym.live_key, "New", "One").await;
    let at = since.format("%Y-%m-%dT%H:%M:%S").to_string();
    for (spelling, raw) in [
        (format!("{at}Z"), false),
        (format!("{at}+00:00"), false),
        (format!("{at}.000000Z"), false),
        (format!("{at}.000000+0000"), false),
        (format!("{at}+0000"), false),
        (format!("{at}.000000+0000"), true),
        (format!("{at}+00:00"), true),
        (format!("{}-0100", (since - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%S")), false),
    ] {
        let q = if raw {
            format!("updated_since={spelling}")
        } else {
            url::form_urlencoded::Serializer::new(String::new()).append_pair("updated_since", &spelling).finish()
        };
        let r = app.get(&gym.live_key, &format!("/members?{q}")).await;
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        assert_eq!(r.body["meta"]["total"], 1, "{q}");
        assert_eq!(r.body["data"][0]["id"], changed["id"], "{q}");
        let pinned = app.get(&gym.live_key, &format!("/members?{}", q.replacen("updated_since", "as_of", 1))).await;
        assert_eq!(pinned.status, 200, "{q}");
    }
    for wrong in ["2026-13-01T00:00:00+0000", "2026-11-01T00:00:00+000", "yesterday"] {
        let q = url::form_urlencoded::Serializer::new(String::new()).append_pair("updated_since", wrong).finish();
        let r = app.get(&gym.live_key, &format!("/members?{q}")).await;
        assert_eq!(r.status, 422, "{wrong}");
        assert!(r.body["errors"]["updated_since"].is_array(), "{}", r.body);
    }
}

#[tokio::test]
async fn pages_past_the_end_are_empty_with_correct_meta() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Pages").await;
    for i in 0..5 {
        app.member(&gym.live_key, &format!("M{i}"), "X").await;
    }
    let r = app.get(&gym.live_key, "/members?per_page=2&page=9").await.body;
    assert_eq!(r["data"], json!([]));
    let as_of = r["meta"]["as_of"].as_str().unwrap().to_string();
    assert_eq!(
        r["meta"],
        json!({"current_page": 9, "last_page": 3, "per_page": 2, "total": 5, "from": null, "to": null, "next_page": null, "as_of": as_of})
    );
    let first = app.get(&gym.live_key, "/members?per_page=2").await.body;
    assert_eq!(first["meta"]["next_page"], 2);
    assert_eq!(r["links"]["next"], Value::Null);
    assert!(r["links"]["prev"].as_str().unwrap().contains("page=3"));
    let last = app.get(&gym.live_key, "/members?per_page=2&page=3").await.body;
    assert_eq!((last["meta"]["from"].clone(), last["meta"]["to"].clone()), (json!(5), json!(5)));
    let empty = app.get(&app.gym("Empty").await.live_key, "/members").await.body;
    assert_eq!(empty["meta"]["last_page"], 1);
}

fn ids_of(page: &Value) -> Vec<String> {
    page["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()).collect()
}

/// Following `links.next` visits every member exactly once, in order, even while members are
/// being created during the walk.
#[tokio::test]
async fn walking_links_next_sees_each_member_exactly_once() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Walk").await;
    let n = 1000;
    let mut created = Vec::with_capacity(n);
    for i in 0..n {
        created.push(app.member(&gym.live_key, &format!("W{i}"), "Walker").await["id"].as_str().unwrap().to_string());
    }
    let mut seen = Vec::new();
    let mut next = Some("/api/v1/members?per_page=7".to_string());
    let mut pages = 0;
    while let Some(url) = next {
        // No public URL is configured: links are relative to the host.
        let path = url.strip_prefix("/api/v1").unwrap_or_else(|| panic!("not relative: {url}")).to_string();
        let page = app.get(&gym.live_key, &path).await.body;
        for m in page["data"].as_array().unwrap() {
            seen.push(m["id"].as_str().unwrap().to_string());
        }
        assert_eq!(page["meta"]["total"], n, "the total of a pinned walk does not move");
        // Someone keeps adding members while the walk goes on.
        if pages % 20 == 0 {
            app.member(&gym.live_key, "Late", "Comer").await;
        }
        pages += 1;
        next = page["links"]["next"].as_str().map(str::to_string);
    }
    assert_eq!(pages, n.div_ceil(7));
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), n, "a member was seen twice or missed");
    created.reverse();
    assert_eq!(seen, created, "newest first, every member once");

    // The same walk without a URL: `page = meta.next_page`, `as_of = meta.as_of`.
    let first = app.get(&gym.live_key, "/members?per_page=50").await.body;
    let as_of = first["meta"]["as_of"].as_str().unwrap().to_string();
    let mut walked: Vec<String> = ids_of(&first);
    let mut page = first["meta"]["next_page"].as_i64();
    while let Some(p) = page {
        let q = url::form_urlencoded::Serializer::new(String::new()).append_pair("as_of", &as_of).finish();
        let body = app.get(&gym.live_key, &format!("/members?per_page=50&page={p}&{q}")).await.body;
        assert_eq!(body["meta"]["as_of"], as_of.as_str(), "the walk keeps its moment");
        walked.extend(ids_of(&body));
        page = body["meta"]["next_page"].as_i64();
    }
    let late = walked.len() - n;
    assert_eq!(walked[late..], created[..], "every member once, the late comers before them");

    // Pages past the middle are read from the oldest end and turned round: the same records, in
    // the same order, on either side of the middle. The late comers come first (newest).
    let shallow = app.get(&gym.live_key, "/members?per_page=100&page=10").await.body;
    let deep = app.get(&gym.live_key, "/members?per_page=100&page=11").await.body;
    let late = deep["meta"]["total"].as_u64().unwrap() as usize - n;
    let ids = |p: &serde_json::Value| -> Vec<String> {
        p["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()).collect()
    };
    assert!(late > 0);
    assert_eq!(ids(&shallow), created[900 - late..1000 - late]);
    assert_eq!(ids(&deep), created[1000 - late..], "page 11 holds the oldest members, oldest last");
}

/// Every page of a long list holds the records its position says, whichever end it is read from
/// and however it is found (directly, or by its ids first past 1,000 skipped records on
/// PostgreSQL): the pages together are the whole list once, newest first, ties (a batch's shared
/// creation time) broken by id.
#[tokio::test]
async fn every_page_of_a_long_list_holds_its_own_records() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Long").await;
    let n = 2_600;
    for start in (0..n).step_by(500) {
        let rows: Vec<Value> = (start..(start + 500).min(n))
            .map(|i| json!({"legacy_id": format!("L{i}"), "first_name": format!("L{i}"), "last_name": "Long"}))
            .collect();
        let r = app.post(&gym.live_key, "/import/members", json!({ "rows": rows })).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    let first = app.get(&gym.live_key, "/members?per_page=100").await.body;
    let as_of = first["links"]["next"].as_str().unwrap().split("as_of=").nth(1).unwrap().split('&').next().unwrap();
    let mut seen: Vec<(String, String)> = Vec::new();
    for page in 1..=26 {
        let r = app.get(&gym.live_key, &format!("/members?per_page=100&page={page}&as_of={as_of}")).await.body;
        let data = r["data"].as_array().unwrap();
        assert_eq!(data.len(), 100, "page {page}");
        assert_eq!(r["meta"]["from"], (page - 1) * 100 + 1);
        seen.extend(data.iter().map(|m| (m["created_at"].as_str().unwrap().into(), m["id"].as_str().unwrap().into())));
    }
    let unique: HashSet<&String> = seen.iter().map(|(_, id)| id).collect();
    assert_eq!(unique.len(), n, "a member was listed twice or missed");
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap();
    for (i, pair) in seen.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        assert!((parse(&a.0), &a.1) > (parse(&b.0), &b.1), "records {i} and {} are out of order", i + 1);
    }
}

/// The totals from the gym's counters equal a real count, through creates, status changes and
/// concurrent writes (`updated_since` far in the past forces the counting path).
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn counted_totals_stay_exact() {
    let app = std::sync::Arc::new(TestApp::spawn().await);
    let gym = app.gym("Counters").await;
    let other = app.gym("Other").await;
    app.member(&other.live_key, "Noise", "Elsewhere").await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (app, key) = (app.clone(), gym.live_key.clone());
        tasks.push(tokio::spawn(async move {
            let status = if i % 4 == 0 { "inactive" } else { "active" };
            app.post(&key, "/members", json!({"first_name": format!("C{i}"), "last_name": "X", "status": status}))
                .await
                .body
        }));
    }
    let mut created = Vec::new();
    for t in tasks {
        created.push(t.await.unwrap());
    }
    for m in created.iter().take(3) {
        let r = app
            .patch(&gym.live_key, &format!("/members/{}", m["id"].as_str().unwrap()), json!({"status": "inactive"}))
            .await;
        assert_eq!(r.status, 200);
    }
    // A duplicate email fails inside the transaction: the counters must not move.
    app.post(&gym.live_key, "/members", json!({"first_name": "D", "last_name": "D", "email": "dup@example.com"})).await;
    assert_eq!(
        app.post(&gym.live_key, "/members", json!({"first_name": "E", "last_name": "E", "email": "dup@example.com"}))
            .await
            .status,
        422
    );
    // 15 active and 5 inactive created; two actives made inactive (the first was inactive already); one more active.
    for (filter, expected) in [("", 21), ("status=active", 14), ("status=inactive", 7)] {
        let counted = app.get(&gym.live_key, &format!("/members?{filter}")).await.body["meta"]["total"].clone();
        let sep = if filter.is_empty() { "" } else { "&" };
        let real = app
            .get(&gym.live_key, &format!("/members?{filter}{sep}updated_since=2000-01-01T00:00:00Z"))
            .await
            .body["meta"]["total"]
            .clone();
        assert_eq!((counted.clone(), real), (json!(expected), json!(expected)), "filter {filter:?}");
    }
    let stats = app.get(&gym.live_key, "/statistics").await.body;
    assert_eq!(stats["members"], json!({"total": 21, "active": 14, "inactive": 7}));
}

#[tokio::test]
async fn search_folds_case_beyond_ascii_on_every_backend() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Unicode").await;
    let m = app
        .post(
            &gym.live_key,
            "/members",
            json!({"first_name": "JÜRGEN", "last_name": "ÖZDEMİR", "email": "J@Example.com"}),
        )
        .await
        .body;
    for term in ["jürgen", "JÜRGEN", "Jürgen%20Öz", "j%40example"] {
        let r = app.get(&gym.live_key, &format!("/members?search={term}")).await.body;
        assert_eq!(r["meta"]["total"], 1, "search {term}");
        assert_eq!(r["data"][0]["id"], m["id"]);
    }
    // A term never spans the name and the email.
    assert_eq!(app.get(&gym.live_key, "/members?search=zdemi%CC%87r%20j").await.body["meta"]["total"], 0);
    // Renaming updates what search finds.
    app.patch(&gym.live_key, &format!("/members/{}", m["id"].as_str().unwrap()), json!({"first_name": "Hans"})).await;
    assert_eq!(app.get(&gym.live_key, "/members?search=j%C3%BCrgen").await.body["meta"]["total"], 0);
    assert_eq!(app.get(&gym.live_key, "/members?search=hans").await.body["meta"]["total"], 1);
}

#[tokio::test]
async fn search_terms_with_quotes_and_backslashes_match_literally() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Quotes").await;
    let other = app.gym("Other quotes").await;
    let obrien =
        app.post(&gym.live_key, "/members", json!({"first_name": "Siobhán", "last_name": "O'Brien"})).await.body;
    let slash =
        app.post(&gym.live_key, "/members", json!({"first_name": "Back\\slash", "last_name": "Path"})).await.body;
    app.post(&other.live_key, "/members", json!({"first_name": "Other", "last_name": "O'Brien"})).await;
    // Each term runs seven times: past the fifth run PostgreSQL may plan a prepared statement anew.
    for (term, want) in [("o%27brien", &obrien), ("%27", &obrien), ("k%5Cs", &slash), ("%5C", &slash)] {
        for _ in 0..7 {
            let r = app.get(&gym.live_key, &format!("/members?search={term}")).await;
            assert_eq!(r.status, 200, "search {term}");
            assert_eq!(r.body["meta"]["total"], 1, "search {term}");
            assert_eq!(r.body["data"][0]["id"], want["id"], "search {term}");
        }
    }
    for term in ["x%27%20OR%20%271%27%3D%271", "%27%3B%20DELETE%20FROM%20members%3B%20--", "%5C%27", "%27%27"] {
        let r = app.get(&gym.live_key, &format!("/members?search={term}")).await;
        assert_eq!((r.status, &r.body["meta"]["total"]), (200, &json!(0)), "search {term}");
    }
    assert_eq!(app.get(&gym.live_key, "/members").await.body["meta"]["total"], 2);
    assert_eq!(app.get(&other.live_key, "/members").await.body["meta"]["total"], 1);
}

/// Spaces are characters of the term like any other: none is trimmed, and a term of spaces alone
/// finds the members whose name or email contains it, not every member.
#[tokio::test]
async fn search_terms_keep_their_spaces() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Spaces").await;
    let ada = app.post(&gym.live_key, "/members", json!({"first_name": "Ada", "last_name": "Lovelace"})).await.body;
    app.post(&gym.live_key, "/members", json!({"first_name": "Adam", "last_name": "Smith"})).await;
    let r = app.get(&gym.live_key, "/members?search=ada%20").await;
    assert_eq!(r.body["meta"]["total"], 1, "{}", r.body);
    assert_eq!(r.body["data"][0]["id"], ada["id"]);
    assert_eq!(app.get(&gym.live_key, "/members?search=ada").await.body["meta"]["total"], 2);
    let r = app.get(&gym.live_key, "/members?search=%20%20%20").await;
    assert_eq!((r.status, &r.body["meta"]["total"]), (200, &json!(0)), "{}", r.body);
    assert_eq!(r.body["links"]["first"].as_str().map(|l| l.contains("search=+++")), Some(true), "{}", r.body);
}

/// The members' version, which every writer of members bumps (see `gymapi::members::count`), read
/// from the database.
async fn members_version(app: &TestApp, gym_id: GymId) -> i64 {
    use sea_orm::{ConnectionTrait, Statement};
    let backend = app.db.get_database_backend();
    let sql = gymapi::db::placeholders(
        backend,
        "SELECT CAST(COALESCE(SUM(value), 0) AS BIGINT) AS v FROM gym_counters WHERE gym_id = ? AND name = ?",
    );
    let row = app
        .db
        .query_one(Statement::from_sql_and_values(backend, sql, [gym_id.into(), "members:version".into()]))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64>("", "v").unwrap()
}

/// Each way members are written (create, PUT, PATCH, import, the demo's seed) moves the version
/// that kept search totals and statistics follow; a change no search or status filter sees may not.
#[tokio::test]
async fn every_member_writer_moves_the_members_version() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Versioned").await;
    let k = &gym.live_key;
    let mut last = members_version(&app, gym.id).await;
    let mut moved = |now: i64, what: &str| {
        assert!(now > last, "{what} left the members' version at {now}");
        last = now;
    };
    let ada = app.member(k, "Ada", "Lovelace").await;
    moved(members_version(&app, gym.id).await, "POST /members");
    let path = format!("/members/{}", ada["id"].as_str().unwrap());
    let put = app.request("PUT", &path, Some(k), Some(json!({"last_name": "King"})), &[]).await;
    assert_eq!(put.status, 200);
    moved(members_version(&app, gym.id).await, "PUT /members/{id}");
    assert_eq!(app.patch(k, &path, json!({"status": "inactive"})).await.status, 200);
    moved(members_version(&app, gym.id).await, "PATCH /members/{id}");
    let rows = json!({"rows": [{"legacy_id": "M-1", "first_name": "Adah", "last_name": "Menken"}]});
    assert_eq!(app.post(k, "/import/members", rows).await.status, 200);
    moved(members_version(&app, gym.id).await, "POST /import/members");

    let demo = gymapi::demo::ensure(&app.db, &*app.store).await.unwrap();
    assert!(members_version(&app, demo.gym_id).await > 0, "the demo's seed left its gym's members' version at 0");
}

/// A status outside its set in the database (written behind the service's back) is an error the
/// client sees as one, never read as some default status.
#[tokio::test]
async fn a_stored_status_outside_its_set_is_an_error_not_a_default() {
    use sea_orm::{ConnectionTrait, Statement};
    let app = TestApp::spawn().await;
    let gym = app.gym("Frozen").await;
    let ada = app.member(&gym.live_key, "Ada", "Lovelace").await;
    let id = ada["id"].as_str().unwrap();
    let backend = app.db.get_database_backend();
    let sql = gymapi::db::placeholders(backend, "UPDATE members SET status = 'frozen' WHERE id = ?");
    let uuid = uuid::Uuid::parse_str(id).unwrap();
    app.db.execute(Statement::from_sql_and_values(backend, sql, [uuid.into()])).await.unwrap();
    let r = app
        .raw(reqwest::Method::GET, &format!("/api/v1/members/{id}"))
        .bearer_auth(&gym.live_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "internal_error", "{body}");
}

/// A link is built from the configured public URL, or from what a trusted proxy forwards, or is
/// relative: a client's `Host` or `X-Forwarded-Host` never puts its host into an answer.
#[tokio::test]
async fn links_never_take_the_clients_host() {
    let forged =
        [("host", "evil.example.com"), ("x-forwarded-host", "evil.example.com"), ("x-forwarded-proto", "https")];
    let app = TestApp::spawn().await;
    let key = app.gym("Relative").await.live_key;
    assert!(first_link(&app, &key, &forged).await.starts_with("/api/v1/members?"), "relative without a public URL");

    let app = TestApp::spawn_with(|c| c.trusted_proxies = vec!["10.0.0.0/8".parse().unwrap()]).await;
    let key = app.gym("Untrusted").await.live_key;
    assert!(
        first_link(&app, &key, &forged).await.starts_with("/api/v1/members?"),
        "this client is not a trusted proxy"
    );

    let app = TestApp::spawn_with(|c| c.public_url = Some("https://api.example.com".into())).await;
    let key = app.gym("Public").await.live_key;
    assert!(first_link(&app, &key, &forged).await.starts_with("https://api.example.com/api/v1/members?"));

    let app = TestApp::spawn_with(|c| c.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await;
    let key = app.gym("Proxied").await.live_key;
    let r = app
        .request(
            "GET",
            "/members?per_page=1",
            Some(&key),
            None,
            &[("x-forwarded-host", "api.example.com"), ("x-forwarded-proto", "https")],
        )
        .await;
    assert!(
        r.body["links"]["first"].as_str().unwrap().starts_with("https://api.example.com/api/v1/members?"),
        "{}",
        r.body
    );
}

async fn first_link(app: &TestApp, key: &str, headers: &[(&str, &str)]) -> String {
    let r = app.request("GET", "/members?per_page=1", Some(key), None, headers).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["links"]["first"].as_str().unwrap().to_string()
}

/// Problems the schema cannot see (an email or card taken, another gym's facility, a duplicate in
/// a batch) come in the same 422 as the schema's, for every field and row that parsed.
#[tokio::test]
async fn one_422_names_the_schemas_problems_and_the_rules_problems() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Rules").await;
    let k = &gym.live_key;
    let taken = json!({"first_name": "Ada", "last_name": "L", "email": "ada@example.com", "access_card": "C-1"});
    let ada = app.post(k, "/members", taken).await.body;
    let elsewhere = uuid::Uuid::now_v7();
    let r = app
        .post(
            k,
            "/members",
            json!({"first_name": "", "last_name": "X", "email": "ADA@example.com", "access_card": "C-1",
                   "facility_id": elsewhere.to_string()}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    let fields: Vec<&str> = r.body["errors"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(fields, ["access_card", "email", "facility_id", "first_name"], "{}", r.body);
    assert_eq!(r.body["errors"]["email"][0], "The email has already been taken.");

    let grace = app.member(k, "Grace", "Hopper").await;
    let r = app
        .patch(
            k,
            &format!("/members/{}", grace["id"].as_str().unwrap()),
            json!({"status": "gone", "email": "ada@example.com"}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    let fields: Vec<&str> = r.body["errors"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(fields, ["email", "status"], "{}", r.body);
    // A member's own email is not taken by itself.
    let r = app
        .patch(
            k,
            &format!("/members/{}", ada["id"].as_str().unwrap()),
            json!({"status": "gone", "email": "ada@example.com"}),
        )
        .await;
    assert_eq!(r.body["errors"].as_object().unwrap().keys().collect::<Vec<_>>(), ["status"], "{}", r.body);

    // A batch: the schema refuses row 0; rows 1 to 3 parsed, and their rules are checked as rows
    // of the whole batch.
    let rows = json!({"rows": [
        {"legacy_id": "M-0", "first_name": "", "last_name": "Refused"},
        {"legacy_id": "M-1", "first_name": "Taken", "last_name": "Email", "email": "ada@example.com"},
        {"legacy_id": "M-2", "first_name": "Fine", "last_name": "Row"},
        {"legacy_id": "M-2", "first_name": "Twice", "last_name": "Row"},
    ]});
    let r = app.post(k, "/import/members", rows).await;
    assert_eq!(r.status, 422, "{}", r.body);
    let fields: Vec<&str> = r.body["errors"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(fields, ["rows.0.first_name", "rows.1.email", "rows.3.legacy_id"], "{}", r.body);
    assert_eq!(r.body["errors"]["rows.3.legacy_id"][0], "The legacy_id appears more than once in this batch (row 2).");
    assert_eq!(app.get(k, "/members").await.body["meta"]["total"], 2, "a refused batch writes nothing");
}
