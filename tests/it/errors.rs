//! Every failure answers JSON in the documented shapes (openapi.yaml, "Errors"), never plain text,
//! never a 500.

use serde_json::json;

use crate::common::TestApp;

#[tokio::test]
async fn framework_failures_answer_in_our_json_shapes() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Errors").await;
    let k = &gym.live_key;

    let r = app.request("DELETE", "/members", Some(k), None, &[]).await;
    assert_eq!((r.status, r.error_type()), (405, "method_not_allowed"));
    assert_eq!(r.header("allow"), Some("GET, POST"));
    let r = app.request("POST", "/statistics", Some(k), Some(json!({})), &[]).await;
    assert_eq!(r.status, 405, "read-only resources refuse writes");
    let r = app.get(k, "/members/0192f7c4-3b7e-7cc1-a8e3-5b8f4d1e2a90/extra").await;
    assert_eq!((r.status, r.error_type()), (404, "not_found"));
    let r = app.get(k, "/members/not-a-uuid").await;
    assert_eq!((r.status, r.error_type()), (404, "not_found"));
}

#[tokio::test]
async fn bad_query_parameters_are_422_naming_each_one() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Query").await;
    let r = app.get(&gym.live_key, "/members?page=0&per_page=101&status=gone&updated_since=yesterday").await;
    assert_eq!(r.status, 422);
    for field in ["page", "per_page", "status", "updated_since"] {
        assert!(r.body["errors"][field].is_array(), "{field} not named in {}", r.body);
    }
    let r = app.get(&gym.live_key, "/members?per_page=abc").await;
    assert_eq!(r.body["errors"]["per_page"], json!(["The per_page parameter must be an integer."]));
    let r = app.get(&gym.live_key, "/members?per_page=1&per_page=2").await;
    assert_eq!(r.status, 422);
    let r = app.get(&gym.live_key, "/attendance?from=31.12.2026").await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["from"].is_array());
    let r = app.get(&gym.live_key, "/purchases?member_id=123&payment_status=maybe").await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["member_id"].is_array() && r.body["errors"]["payment_status"].is_array());
    // Unknown parameters are ignored.
    assert_eq!(app.get(&gym.live_key, "/members?colour=blue").await.status, 200);
}

#[tokio::test]
async fn bad_bodies_are_422_with_every_problem_at_once() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Bodies").await;
    let k = &gym.live_key;
    let r = app.post(k, "/members", json!({"first_name": 5, "email": "nope", "status": "gone", "date_of_birth": "1990-02-31", "colour": "blue"})).await;
    assert_eq!(r.status, 422);
    let errors = r.body["errors"].as_object().unwrap();
    for field in ["first_name", "last_name", "email", "status", "date_of_birth", "colour"] {
        assert!(errors.contains_key(field), "{field} not named in {}", r.body);
    }
    assert_eq!(r.body["errors"]["last_name"], json!(["The last_name field is required."]));
    assert!(r.body["message"].as_str().unwrap().contains("more errors"));

    for (body, ct) in [
        ("{\"first_name\":", "application/json"),
        ("[1,2]", "application/json"),
        ("first_name=a", "application/x-www-form-urlencoded"),
        ("", "application/json"),
    ] {
        let resp = app
            .raw(reqwest::Method::POST, "/api/v1/members")
            .bearer_auth(k)
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(status, 422, "{body:?}: {v}");
        assert!(v["errors"].as_object().is_some_and(|e| !e.is_empty()), "{body:?}: {v}");
    }
    // Nothing was written by any of them.
    assert_eq!(app.get(k, "/members").await.body["meta"]["total"], 0);
}

#[tokio::test]
async fn nested_fields_are_named_with_dots() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Nested").await;
    let rows: Vec<serde_json::Value> =
        (0..5).map(|i| json!({"legacy_id": format!("M{i}"), "first_name": "A", "last_name": "B"})).collect();
    let mut rows = rows;
    rows[3]["email"] = json!("not-an-address");
    let r = app.post(&gym.live_key, "/import/members", json!({ "rows": rows })).await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["rows.3.email"].is_array(), "{}", r.body);
    let too_many: Vec<serde_json::Value> =
        (0..501).map(|i| json!({"legacy_id": format!("M{i}"), "first_name": "A", "last_name": "B"})).collect();
    let r = app.post(&gym.live_key, "/import/members", json!({ "rows": too_many })).await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["rows"].is_array(), "{}", r.body);
}

#[tokio::test]
async fn extreme_page_numbers_answer_an_empty_page() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Extremes").await;
    app.member(&gym.live_key, "Only", "One").await;
    for path in ["/members", "/memberships", "/membership-subscriptions", "/attendance", "/products", "/purchases"] {
        let r = app.get(&gym.live_key, &format!("{path}?page=9223372036854775807&per_page=100")).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body["data"], json!([]));
        assert_eq!(r.body["links"]["next"], serde_json::Value::Null);
    }
    let r = app.get(&gym.live_key, "/members?page=9223372036854775808").await;
    assert_eq!(r.status, 422, "beyond a 64-bit integer is a bad parameter");
}

/// PostgreSQL cannot store U+0000; no backend accepts it, and the client learns which field.
#[tokio::test]
async fn nul_characters_are_422_on_every_backend() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Nul").await;
    let r = app.post(&gym.live_key, "/members", json!({"first_name": "A\u{0}B", "last_name": "C"})).await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["first_name"].is_array(), "{}", r.body);
    let member = app.member(&gym.live_key, "Clean", "Name").await;
    let r = app
        .patch(&gym.live_key, &format!("/members/{}", member["id"].as_str().unwrap()), json!({"city": "\u{0}"}))
        .await;
    assert_eq!(r.status, 422);
    let r = app.get(&gym.live_key, "/members?search=a%00b").await;
    assert_eq!(r.status, 422);
    assert!(r.body["errors"]["search"].is_array());
    let rows = json!({"rows": [{"legacy_id": "1", "first_name": "x", "last_name": "y", "city": "a\u{0}"}]});
    let r = app.post(&gym.live_key, "/import/members", rows).await;
    assert!(r.body["errors"]["rows.0.city"].is_array(), "{}", r.body);
}

/// Every parameter of every list refuses a bad value with a 422 that names it.
#[tokio::test]
async fn every_bad_list_parameter_is_named() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 10_000).await;
    let gym = app.gym("Params").await;
    let common = [
        ("page", "0"),
        ("page", "x"),
        ("per_page", "0"),
        ("per_page", "101"),
        ("as_of", "yesterday"),
        ("updated_since", "2026-13-01T00:00:00Z"),
    ];
    let lists: [(&str, &[(&str, &str)]); 7] = [
        ("/members", &[("status", "paused"), ("search", "")]),
        ("/memberships", &[]),
        ("/membership-subscriptions", &[]),
        ("/attendance", &[("member_id", "42"), ("status", "maybe"), ("from", "2026-02-30"), ("to", "noon")]),
        (
            "/access-logs",
            &[("member_id", "42"), ("status", "maybe"), ("from", "1.1.2026"), ("to", "2026-01-01T25:00:00Z")],
        ),
        ("/products", &[("status", "sold_out")]),
        ("/purchases", &[("member_id", "x"), ("payment_status", "maybe")]),
    ];
    let long_search = "s".repeat(201);
    for (path, own) in lists {
        for (name, value) in common
            .iter()
            .chain(own.iter())
            .chain(if path == "/members" { vec![("search", long_search.as_str())] } else { vec![] }.iter())
        {
            let q = url::form_urlencoded::Serializer::new(String::new()).append_pair(name, value).finish();
            let r = app.get(&gym.live_key, &format!("{path}?{q}")).await;
            assert_eq!(r.status, 422, "{path}?{q}: {}", r.body);
            assert!(r.body["errors"][*name].is_array(), "{path}?{q} does not name {name}: {}", r.body);
        }
    }
}

/// `from` and `to` take the days the calendar has: a 31st of a 30-day month and 29 February of a
/// common year are refused in words, a leap day is taken.
#[tokio::test]
async fn a_day_the_calendar_lacks_is_named_in_words() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Calendar").await;
    for (name, value) in [("from", "2026-11-31"), ("to", "2026-02-29"), ("to", "2026-04-31T10:00:00Z")] {
        let r = app.get(&gym.live_key, &format!("/attendance?{name}={value}")).await;
        assert_eq!(r.status, 422, "{name}={value}: {}", r.body);
        let said = format!("The {name} parameter must be a date (YYYY-MM-DD) or an RFC 3339 date-time.");
        assert_eq!(r.body["errors"][name], serde_json::json!([said]), "{name}={value}");
    }
    for value in ["2028-02-29", "2000-02-29", "2026-12-31T23:59:59.5%2B01:00"] {
        let r = app.get(&gym.live_key, &format!("/access-logs?from={value}")).await;
        assert_eq!(r.status, 200, "from={value}: {}", r.body);
    }
}

/// A body sent to an operation that takes none is refused, naming `body`, not silently ignored.
#[tokio::test]
async fn a_body_where_none_is_taken_is_a_422() {
    let app = TestApp::spawn().await;
    let gym = app.gym("No body").await;
    let r = app.request("GET", "/members", Some(&gym.live_key), Some(serde_json::json!({"search": "x"})), &[]).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["errors"]["body"], serde_json::json!(["This operation takes no request body."]));
    let r = app.request("GET", "/members", Some(&gym.live_key), None, &[("content-length", "0")]).await;
    assert_eq!(r.status, 200, "an empty body is no body: {}", r.body);
}
