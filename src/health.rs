//! `/healthz` (the process runs) and `/readyz` (its database and store answer).

use poem::{Response, handler, http::StatusCode, web::Data};
use serde_json::json;

use crate::{errors::json_response, state::AppState};

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
