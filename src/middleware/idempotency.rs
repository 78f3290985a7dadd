//! Keyed writes (`Idempotency-Key`): run at most once, the first response kept and replayed.

use std::sync::Arc;

use poem::{
    Endpoint, IntoResponse, Request, Response,
    error::ResponseError,
    http::{StatusCode, header},
};
use sha2::{Digest, Sha256};

use crate::{
    errors::{ApiError, to_json_error},
    limits::{IdempotencyState, StoredResponse},
    state::AppState,
};

pub(super) const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// What makes two requests "the same" for an `Idempotency-Key`: method, path, query and body.
pub(super) fn request_fingerprint(method: &str, path: &str, query: Option<&str>, body: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [method.as_bytes(), b"\n", path.as_bytes(), b"?", query.unwrap_or_default().as_bytes(), b"\n"] {
        h.update(part);
    }
    h.update(body);
    hex::encode(h.finalize())
}

/// Runs a keyed write at most once: the first completed response is kept for the idempotency
/// window and sent again, byte for byte, to every repeat, with `Idempotency-Replayed`. A 422 (a
/// refused request, which wrote nothing) and a 5xx are not kept: the key is free again.
pub(super) async fn idempotent<E: Endpoint>(
    next: Arc<E>,
    req: Request,
    state: &AppState,
    scope: &str,
    fingerprint: &str,
) -> Response {
    let store = &state.store;
    match store.idempotency_begin(scope, fingerprint).await {
        Err(e) => {
            tracing::error!(error = %e, store = store.name(), "idempotency store unavailable; keyed write refused");
            ApiError::ServiceUnavailable("The idempotency store is unavailable, so this write was not run. Retry later with the same Idempotency-Key.".into()).as_response()
        }
        Ok(IdempotencyState::Mismatch) => ApiError::invalid(
            "Idempotency-Key",
            "This Idempotency-Key was already used for a request with another method, path or body.",
        )
        .as_response(),
        Ok(IdempotencyState::Running) => ApiError::IdempotencyConflict.as_response(),
        Ok(IdempotencyState::Replay(stored)) => {
            let mut builder = Response::builder()
                .status(StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK))
                .header("idempotency-replayed", "true");
            if let Some(ct) = &stored.content_type {
                builder = builder.content_type(ct.as_str());
            }
            builder.body(stored.body)
        }
        Ok(IdempotencyState::Started) => {
            let response = match next.call(req).await {
                Ok(r) => r.into_response(),
                Err(e) => to_json_error(e),
            };
            let status = response.status();
            if status.is_server_error() || status == StatusCode::UNPROCESSABLE_ENTITY {
                if let Err(e) = store.idempotency_abort(scope).await {
                    tracing::warn!(error = %e, "could not free an idempotency key after a refusal or a server error");
                }
                return response;
            }
            let (parts, body) = response.into_parts();
            let bytes = match body.into_bytes().await {
                Ok(b) => b,
                Err(e) => return ApiError::internal(anyhow::anyhow!("cannot buffer the response: {e}")).as_response(),
            };
            let content_type =
                parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
            let stored = StoredResponse { status: status.as_u16(), content_type, body: bytes.to_vec() };
            if let Err(e) = store.idempotency_complete(scope, fingerprint, &stored, state.config.idempotency_ttl).await
            {
                // The write happened; a retry within IDEMPOTENCY_LOCK still answers 409, later ones run again.
                tracing::error!(error = %e, "could not keep the response of a keyed write");
            }
            Response::from_parts(parts, poem::Body::from(bytes))
        }
    }
}
