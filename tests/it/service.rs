//! What every response carries, and the operational endpoints.

use crate::common::TestApp;

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Ids").await;
    let own = app.request("GET", "/members", Some(&gym.live_key), None, &[("X-Request-Id", "trace-abc-123")]).await;
    assert_eq!(own.header("x-request-id"), Some("trace-abc-123"));
    let fresh = app.get(&gym.live_key, "/members").await;
    let id = fresh.header("x-request-id").unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    let denied = app.request("GET", "/members", None, None, &[]).await;
    assert!(denied.header("x-request-id").is_some());
    // A header value that is not a safe token is replaced.
    let long = "x".repeat(300);
    let replaced = app.request("GET", "/members", Some(&gym.live_key), None, &[("X-Request-Id", &long)]).await;
    assert_ne!(replaced.header("x-request-id"), Some(long.as_str()));
}

#[tokio::test]
async fn health_and_readiness_are_outside_the_api_and_need_no_key() {
    let app = TestApp::spawn().await;
    let health = app.raw(reqwest::Method::GET, "/healthz").send().await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = app.raw(reqwest::Method::GET, "/readyz").send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["database"], true);
    let unknown = app.raw(reqwest::Method::GET, "/nowhere").send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
}
