//! `/healthz` (the process runs), `/readyz` (its database and store answer) and `/metrics` (what
//! operators scrape).

use poem::{Response, error::ResponseError as _, handler, http::StatusCode, web::Data};
use serde_json::json;

use crate::{errors::json_response, metrics::OutcomeLabel, state::AppState};

#[handler]
pub fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({ "status": "ok" }))
}

/// Ready when the database and the limits store (Redis, when configured) answer.
#[handler]
pub async fn readyz(state: Data<&AppState>) -> Response {
    let database = state.db.ping().await.is_ok();
    let store = state.store.ping().await.is_ok();
    let ready = database && store;
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({ "status": if ready { "ready" } else { "unavailable" }, "database": database, "store": { "kind": state.store.name(), "ok": store } });
    json_response(status, &body)
}

/// The process's metrics in Prometheus's text format, with the gauges read now: the oldest due
/// webhook delivery, the database pool's connections. Behind `GYMAPI_METRICS_TOKEN` when it is set.
#[handler]
pub async fn metrics(state: Data<&AppState>, req: &poem::Request) -> Response {
    // Off unless a token is configured: the API's own port is public, and what the metrics tell
    // (operations, refusals, the outbox's age) is for the operator alone.
    let Some(token) = &state.config.metrics_token else {
        return crate::errors::ApiError::NotFound("Metrics are off: the operator sets GYMAPI_METRICS_TOKEN.".into())
            .as_response();
    };
    use sha2::{Digest, Sha256};
    let given = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let given = given.strip_prefix("Bearer ").unwrap_or_default();
    if Sha256::digest(given.as_bytes()) != Sha256::digest(token.as_bytes()) {
        return crate::errors::ApiError::Unauthorized.as_response();
    }
    let m = &state.metrics;
    match crate::webhooks::oldest_pending_age(state.db.orm()).await {
        Ok(age) => {
            m.outbox_oldest_pending.set(age);
        }
        Err(e) => tracing::warn!(error = %e, "metrics: the outbox's age could not be read"),
    }
    let (up, opened) = state.store.health();
    m.store_up.set(i64::from(up));
    m.breaker_opened.inner().store(opened, std::sync::atomic::Ordering::Relaxed);
    let (size, idle) = crate::db::pool_use(state.db.orm());
    m.db_connections.get_or_create(&OutcomeLabel { outcome: "open" }).set(i64::from(size));
    m.db_connections.get_or_create(&OutcomeLabel { outcome: "idle" }).set(i64::try_from(idle).unwrap_or(i64::MAX));
    Response::builder().content_type("text/plain; version=0.0.4; charset=utf-8").body(m.render())
}
