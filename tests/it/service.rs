//! What every response carries, and the operational endpoints.

use sea_orm::ConnectionTrait;

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

/// Reads keep answering when PostgreSQL closes the server's connections (a restart, an operator, an
/// idle timeout on the way): the dead connection is noticed on its next statement, and the read
/// runs again on a new one instead of failing the request.
#[tokio::test]
async fn reads_survive_the_database_closing_the_servers_connections() {
    let app = TestApp::spawn().await;
    let gym = app.gym("Restarts").await;
    let member = app.member(&gym.live_key, "Ada", "Lovelace").await;
    let path = format!("/members/{}", member["id"].as_str().unwrap());
    assert_eq!(app.get(&gym.live_key, &path).await.status, 200);
    assert_eq!(app.get(&gym.live_key, "/members").await.status, 200);
    if !crate::common::on_postgres() {
        return;
    }
    let terminated = app
        .db
        .query_all(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        ))
        .await
        .unwrap();
    assert!(!terminated.is_empty(), "the server's connections were open");
    let again = app.get(&gym.live_key, &path).await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(again.body["id"], member["id"]);
    let list = app.get(&gym.live_key, "/members").await;
    assert_eq!(list.status, 200, "{:?}", list.body);
    assert_eq!(list.body["meta"]["total"], 1);
}
