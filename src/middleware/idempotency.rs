//! Keyed writes (`Idempotency-Key`): run at most once, the first response kept and replayed.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use entity::states::Environment;
use poem::{
    Endpoint, IntoResponse, Request, Response,
    error::ResponseError,
    http::{StatusCode, header},
};
use sea_orm::ConnectionTrait;
use sha2::{Digest, Sha256};

use crate::{
    context::RequestContext,
    db::{Outcome, Unit},
    errors::{ApiError, to_json_error},
    limits::{
        IdempotencyState, StoredResponse,
        records::{self, Kept, RecordKey},
    },
    logs::Repeated,
    records::now,
    state::AppState,
};

pub(super) const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header that says whether a keyed write's answer is a replay of its first.
pub(super) const REPLAYED: &str = "idempotency-replayed";

/// What makes two requests "the same" for an `Idempotency-Key`: method, path, query and body.
pub(super) fn request_fingerprint(method: &str, path: &str, query: Option<&str>, body: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [method.as_bytes(), b"\n", path.as_bytes(), b"?", query.unwrap_or_default().as_bytes(), b"\n"] {
        h.update(part);
    }
    h.update(body);
    hex::encode(h.finalize())
}

/// What identifies a keyed write: where the store keeps its key (`scope`), where the database
/// keeps its record, and what makes a repeat "the same request".
pub(super) struct Keyed {
    pub scope: String,
    pub record: RecordKey,
    pub fingerprint: String,
}

/// Whether a response is kept under its key: everything below 500 but a 422 (a refused request,
/// which wrote nothing, so the corrected one may reuse the key).
fn kept(status: StatusCode) -> bool {
    !status.is_server_error() && status != StatusCode::UNPROCESSABLE_ENTITY
}

/// Runs a keyed write at most once. The store (Redis, or the process's memory) answers a repeat
/// fast: the first response replayed byte for byte with `Idempotency-Replayed`, a 409 while the
/// first still runs, a 422 for another request under the same key. A new key runs its handler in
/// a [`Unit`]: the handler's writes and the response's record are committed together, so a
/// repeat the store cannot answer (flushed, unreachable, restarted) finds the record in the
/// database, and a handler run again for it is rolled back. A response that is not kept (a 422, a
/// 5xx) commits nothing and frees the key.
pub(super) async fn idempotent<E: Endpoint>(
    next: Arc<E>,
    req: Request,
    state: &AppState,
    keyed: &Keyed,
    begun: Option<IdempotencyState>,
) -> Response {
    // The admission failed open: its answer did not come in time, but it may have reached the
    // store and begun the key for this very request, so asking again could find the key running
    // and refuse the request for itself. The database alone keeps this key.
    let Some(begun) = begun else {
        static UNAVAILABLE: Repeated = Repeated::new();
        if let Some(times) = UNAVAILABLE.due() {
            tracing::warn!(
                store = state.store.name(),
                times,
                "idempotency store unavailable; the database alone keeps these keys"
            );
        }
        return run(next, req, Settle { state, keyed, locked: false }).await;
    };
    let begun = match begun {
        // A test key's repeat that the store answers is checked against the database, which a
        // sandbox's reset empties: a key sent before the reset is new after it.
        found @ (IdempotencyState::Mismatch | IdempotencyState::Replay(_)) if in_sandbox(&req) => {
            match records::find(&state.db, &keyed.record, now()).await {
                Ok(None) => match renew(state, keyed).await {
                    Some(begun) => begun,
                    None => return run(next, req, Settle { state, keyed, locked: false }).await,
                },
                Ok(Some(_)) | Err(_) => found,
            }
        }
        other => other,
    };
    match begun {
        IdempotencyState::Mismatch => mismatch(),
        IdempotencyState::Running => ApiError::IdempotencyConflict.as_response(),
        IdempotencyState::Replay(stored) => replay(stored),
        IdempotencyState::Started => run(next, req, Settle { state, keyed, locked: true }).await,
    }
}

/// Whether the request acts on a sandbox (a test key's).
fn in_sandbox(req: &Request) -> bool {
    req.extensions().get::<RequestContext>().is_some_and(|ctx| ctx.tenant.environment == Environment::Test)
}

/// Begins again a key whose record in the store outlived the sandbox's reset: the store's record
/// is dropped and the key begun for this request; `None` when the store cannot (the database
/// alone keeps the key then).
async fn renew(state: &AppState, keyed: &Keyed) -> Option<IdempotencyState> {
    let store = &state.store;
    store.idempotency_abort(&keyed.scope).await.ok()?;
    store.idempotency_begin(&keyed.scope, &keyed.fingerprint, state.config.idempotency_lock).await.ok()
}

/// Runs the handler with a unit (its handle: `RequestContext::db`) and settles it.
async fn run<E: Endpoint>(next: Arc<E>, mut req: Request, settle: Settle<'_>) -> Response {
    let unit = Unit::new();
    if let Some(ctx) = req.extensions_mut().get_mut::<RequestContext>() {
        ctx.unit = Some(unit.clone());
    }
    let response = call(next, req).await;
    if kept(response.status()) { settle.keep(&unit, response).await } else { settle.refused(&unit, response).await }
}

async fn call<E: Endpoint>(next: Arc<E>, req: Request) -> Response {
    match next.call(req).await {
        Ok(r) => r.into_response(),
        Err(e) => to_json_error(e),
    }
}

fn mismatch() -> Response {
    ApiError::invalid(
        "Idempotency-Key",
        "This Idempotency-Key was already used for a request with another method, path or body.",
    )
    .as_response()
}

/// A kept response, sent again.
fn replay(stored: StoredResponse) -> Response {
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK))
        .header(REPLAYED, "true");
    if let Some(ct) = &stored.content_type {
        builder = builder.content_type(ct.as_str());
    }
    builder.body(stored.body)
}

/// How a keyed write ends, once its handler has answered.
struct Settle<'a> {
    state: &'a AppState,
    keyed: &'a Keyed,
    /// Whether the store holds the key for this request (it may have been unreachable).
    locked: bool,
}

impl Settle<'_> {
    /// The handler refused (422) or failed (5xx): nothing of it is kept, and the key is free again.
    /// A record in the database still wins: a request with this key ran and was kept before (the
    /// store had forgotten it, and the handler, run again, met what the first one wrote).
    async fn refused(&self, unit: &Unit, response: Response) -> Response {
        unit.rollback();
        match records::find(&self.state.db, &self.keyed.record, now()).await {
            Ok(Some(first)) => self.answer(first).await,
            Ok(None) => {
                self.free().await;
                response
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not look up an idempotency record after a refusal");
                self.free().await;
                response
            }
        }
    }

    /// Commits the handler's writes with the response's record, then keeps the response in the
    /// store for fast replays. A record already there (another request with the key committed
    /// first) rolls the handler's writes back and answers from that record.
    async fn keep(&self, unit: &Unit, response: Response) -> Response {
        let (state, keyed) = (self.state, self.keyed);
        let (parts, body) = response.into_parts();
        let bytes = match body.into_bytes().await {
            Ok(b) => b,
            Err(e) => {
                unit.rollback();
                self.free().await;
                return ApiError::internal(anyhow::anyhow!("cannot buffer the response: {e}")).as_response();
            }
        };
        let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let stored = StoredResponse { status: parts.status.as_u16(), content_type, body: bytes.to_vec() };
        let at = now();
        let expires_at =
            at + chrono::Duration::from_std(state.config.idempotency_ttl).unwrap_or(chrono::Duration::days(1));
        let backend = state.db.get_database_backend();
        let record = records::insert(backend, &keyed.record, &keyed.fingerprint, &stored, at, expires_at);
        let outcome = match unit.commit_with(state.db.orm(), record).await {
            Ok(Outcome::Committed) => {
                crash_point("after-keyed-commit");
                self.remember(&keyed.fingerprint, &stored, expires_at).await;
                return Response::from_parts(parts, poem::Body::from(bytes));
            }
            Ok(Outcome::Taken) => records::find(&state.db, &keyed.record, now()).await,
            // The handler's writes, run with the commit, were refused: its refusal answers.
            Ok(Outcome::Refused(refusal)) => {
                let response = match refusal.downcast::<ApiError>() {
                    Ok(refusal) => refusal.as_response(),
                    Err(other) => {
                        ApiError::internal(anyhow::anyhow!("a deferred write's refusal: {other}")).as_response()
                    }
                };
                return self.refused(unit, response).await;
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(Some(first)) => self.answer(first).await,
            Ok(None) => {
                self.free().await;
                ApiError::IdempotencyConflict.as_response()
            }
            Err(e) => {
                self.free().await;
                ApiError::from(e).as_response()
            }
        }
    }

    /// Answers from the record another request with the key kept: its response again, or 422 when
    /// this request differs. The store learns the record, for the next repeat.
    async fn answer(&self, first: Kept) -> Response {
        self.remember(&first.fingerprint, &first.response, first.expires_at).await;
        if first.fingerprint == self.keyed.fingerprint { replay(first.response) } else { mismatch() }
    }

    /// Keeps a response in the store until `expires_at`, for fast replays (the database has it).
    /// Also when the store did not begin the key for this request: a begin that answered late may
    /// have left it running there, and the response kept ends that.
    async fn remember(&self, fingerprint: &str, stored: &StoredResponse, expires_at: DateTime<Utc>) {
        let ttl = (expires_at - now()).to_std().unwrap_or_default().max(std::time::Duration::from_millis(1));
        let result = self.state.store.idempotency_complete(&self.keyed.scope, fingerprint, stored, ttl).await;
        if let Err(e) = result {
            static UNKEPT: Repeated = Repeated::new();
            if let Some(times) = UNKEPT.due() {
                tracing::warn!(error = %e, times, "could not keep keyed writes' responses in the store; the database has them");
            }
        }
    }

    /// Frees the key in the store, so that a retry runs.
    async fn free(&self) {
        if !self.locked {
            return;
        }
        if let Err(e) = self.state.store.idempotency_abort(&self.keyed.scope).await {
            static UNFREED: Repeated = Repeated::new();
            if let Some(times) = UNFREED.due() {
                tracing::warn!(error = %e, times, "could not free idempotency keys after a refusal or a server error");
            }
        }
    }
}

/// Debug builds only (the test suite's): `GYMAPI_TEST_CRASH=<name>` ends the process at once, as
/// a kill would, at the point of that name: `after-keyed-commit`, between a keyed write's commit
/// and the store keeping its response (the window the database's record closes).
#[cfg(debug_assertions)]
fn crash_point(name: &str) {
    if std::env::var("GYMAPI_TEST_CRASH").is_ok_and(|v| v == name) {
        std::process::abort();
    }
}

#[cfg(not(debug_assertions))]
fn crash_point(_: &str) {}
