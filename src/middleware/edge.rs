//! The outermost layer of every route: the request id, JSON for every error, one log line.

use std::{sync::Arc, time::Instant};

use poem::{Endpoint, IntoResponse, Request, Response, http::HeaderValue};
use tracing::Instrument as _;

use crate::errors::to_json_error;

/// Outermost layer: the request id, JSON for every error, one log line per request. Logs carry the
/// method, the path without its query, the status and the time; never a key or a body.
pub async fn edge<E: Endpoint>(next: Arc<E>, req: Request) -> poem::Result<Response> {
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 200 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = Instant::now();
    let span = tracing::info_span!("request", request_id = %request_id);
    let mut response = async {
        match next.call(req).await {
            Ok(r) => r.into_response(),
            Err(e) => to_json_error(e),
        }
    }
    .instrument(span.clone())
    .await;
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    span.in_scope(|| {
        tracing::info!(
            method = %method,
            path = %path,
            status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
            "request"
        )
    });
    Ok(response)
}
