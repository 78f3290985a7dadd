//! Builds the service: routes, middleware, state. Tests start exactly this on port 0.

use std::{sync::Arc, time::Instant};

use poem::{
    Endpoint, EndpointExt, IntoResponse, Request, Response, Route,
    error::ResponseError,
    get, handler,
    http::{HeaderValue, StatusCode, header},
    middleware::CatchPanic,
    web::Data,
};
use poem_openapi::OpenApiService;
use sea_orm::DatabaseConnection;
use serde_json::json;
use tracing::Instrument as _;

use crate::{
    api::Handlers,
    auth::{self, LastUsed},
    config::Config,
    context::RequestContext,
    contract::{self, Contract, MAX_BODY_BYTES, RouteMatch},
    errors::{ApiError, json_response, to_json_error},
    openapi::Api,
    limits::{IdempotencyState, RatePolicy, Store, StoredResponse},
};
use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Everything a request may need, shared by all of them.
#[derive(Clone)]
pub struct AppState {
    /// sea-orm's connection, with a pool of its own for single statements on PostgreSQL.
    pub db: crate::db::Db,
    pub config: Arc<Config>,
    pub contract: Arc<Contract>,
    pub last_used: Arc<LastUsed>,
    /// Rate limits: Redis when `REDIS_URL` is set, else in process.
    pub store: Arc<dyn Store>,
    /// Wakes this process's webhook dispatcher after a commit that queued deliveries.
    pub webhooks: Arc<tokio::sync::Notify>,
    /// Requests per key per day, counted in memory (see `usage`).
    pub usage: Arc<crate::usage::Usage>,
    /// Keys being resolved from the database, shared by the requests that wait for them.
    pub resolutions: Arc<auth::Resolutions>,
    /// Totals of member searches, kept per version of the gym's members.
    pub search_totals: Arc<crate::api::search_totals::SearchTotals>,
    /// The statistics, kept per gym and per version of what they count.
    pub statistics: Arc<crate::api::statistics::KeptStatistics>,
}

impl AppState {
    /// Connects the store the configuration names (Redis must answer at start-up).
    pub async fn new(db: DatabaseConnection, config: Config) -> anyhow::Result<Self> {
        let store = crate::limits::connect(&config).await?;
        Ok(Self {
            db: crate::db::Db::new(db),
            config: Arc::new(config),
            contract: Contract::embedded()?,
            last_used: Arc::new(LastUsed::default()),
            store,
            webhooks: Arc::new(tokio::sync::Notify::new()),
            usage: Arc::new(crate::usage::Usage::default()),
            resolutions: Arc::new(auth::Resolutions::default()),
            search_totals: Arc::default(),
            statistics: Arc::default(),
        })
    }

    /// Starts what runs beside the API: the webhook dispatcher (unless the configuration leaves it
    /// to `gymapi worker` processes) and the flusher of key usage counts.
    pub fn start_background(&self) -> anyhow::Result<()> {
        if self.config.webhook_dispatch {
            crate::webhooks::dispatch::spawn(self.db.orm().clone(), &self.config, self.webhooks.clone())?;
        }
        self.usage.clone().spawn_flusher(self.db.orm().clone());
        Ok(())
    }
}

/// Base path of the integration API.
pub const API_BASE: &str = "/api/v1";

/// The poem-openapi service generated from openapi.yaml, with the hand-written handlers.
pub fn openapi_service(state: &AppState) -> OpenApiService<Api<Handlers>, ()> {
    OpenApiService::new(Api(Handlers::new(state.clone())), "gymapi", "1.0.0").server(API_BASE)
}

/// The whole HTTP application.
pub fn app(state: AppState) -> impl Endpoint<Output = Response> {
    let gate_state = state.clone();
    let api = openapi_service(&state).around(move |ep, req| gate(ep, req, gate_state.clone()));
    Route::new()
        .at("/healthz", get(healthz))
        .at("/readyz", get(readyz))
        .nest(API_BASE, api)
        .nest("/settings", crate::settings::routes(state.clone()))
        .data(state)
        // A bug must still answer JSON; the panic itself is printed by the panic hook.
        .with(CatchPanic::new().with_handler(|_| ApiError::internal(anyhow::anyhow!("handler panicked")).as_response()))
        .around(edge)
}

/// Outermost layer: the request id, JSON for every error, one log line per request. Logs carry the
/// method, the path without its query, the status and the time; never a key or a body.
async fn edge<E: Endpoint>(next: Arc<E>, req: Request) -> poem::Result<Response> {
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

/// The gate of `/api/v1`, in the order of DESIGN.md §5: key (401) → subscription (402) → plan (403)
/// → rate limit (429) → route (404/405) → validation against openapi.yaml (422). Only requests that
/// pass every check reach the generated routes, with their `RequestContext`.
async fn gate<E: Endpoint>(next: Arc<E>, req: Request, state: AppState) -> poem::Result<Response> {
    let key = auth::key_from_headers(req.headers());
    let policy = RatePolicy::per_minute(state.config.rate_limit_per_minute);
    let now = crate::records::now();
    let (tenant, decision) =
        match auth::admit(&state.db, &*state.store, &state.resolutions, key.as_deref(), policy, now).await {
            Ok(admitted) => admitted,
            Err(e) => return Ok(e.as_response()),
        };
    state.last_used.touch(&state.db, tenant.key_id);
    state.usage.record(tenant.owner_gym_id, tenant.key_id);
    let mut response = if decision.allowed {
        Box::pin(route(next, req, &state, tenant)).await
    } else {
        ApiError::RateLimited { retry_after_secs: decision.retry_after_secs }.as_response()
    };
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(decision.remaining));
    Ok(response)
}

/// Finds the operation of openapi.yaml, validates the request against it, and calls it.
async fn route<E: Endpoint>(
    next: Arc<E>,
    mut req: Request,
    state: &AppState,
    tenant: crate::context::Tenant,
) -> Response {
    let path = req.uri().path().to_string();
    if path == "/openapi.yaml" && req.method() == poem::http::Method::GET {
        return Response::builder().content_type("application/yaml").body(contract::DOCUMENT);
    }
    match state.contract.route(req.method(), &path) {
        RouteMatch::NotFound => {
            return ApiError::NotFound(format!("No such path: {}{}.", API_BASE, truncate(&path, 200))).as_response();
        }
        RouteMatch::MethodNotAllowed(allow) => {
            let err = ApiError::MethodNotAllowed {
                method: req.method().to_string(),
                path: format!("{API_BASE}{}", truncate(&path, 200)),
                allow,
            };
            return err.as_response();
        }
        RouteMatch::Operation(op) => {
            let mut errors = op.validate_params(req.uri().query(), req.headers());
            let mut body = Bytes::new();
            if op.has_body() {
                let content_type = req.content_type().map(str::to_string);
                body = match req.take_body().into_bytes_limit(MAX_BODY_BYTES).await {
                    Ok(b) => b,
                    Err(_) => {
                        let limit = MAX_BODY_BYTES / 1024 / 1024;
                        errors.add("body", format!("The request body must not be larger than {limit} MiB."));
                        return ApiError::Validation(errors).as_response();
                    }
                };
                match op.validate_body(content_type.as_deref(), &body) {
                    // The handler builds its body from this tree instead of parsing it again.
                    Ok(parsed) => {
                        req.extensions_mut().insert(crate::types::body::Parsed::new(parsed));
                    }
                    Err(body_errors) => {
                        for (field, messages) in body_errors.0 {
                            for m in messages {
                                errors.add(field.clone(), m);
                            }
                        }
                    }
                }
                req.set_body(body.clone());
            }
            if !errors.is_empty() {
                return ApiError::Validation(errors).as_response();
            }
            let idempotency_key = req.headers().get(IDEMPOTENCY_KEY).and_then(|v| v.to_str().ok()).map(str::to_string);
            if let (true, Some(key)) = (op.idempotent, idempotency_key) {
                let base_url = base_url(&state.config, &req);
                let scope = format!("{}:{}", tenant.gym_id, hex::encode(Sha256::digest(key.as_bytes())));
                let fingerprint = request_fingerprint(req.method().as_str(), &path, req.uri().query(), &body);
                req.extensions_mut().insert(RequestContext { tenant, base_url, path });
                return Box::pin(idempotent(next, req, state, &scope, &fingerprint)).await;
            }
        }
    }
    let base_url = base_url(&state.config, &req);
    req.extensions_mut().insert(RequestContext { tenant, base_url, path });
    match next.call(req).await {
        Ok(r) => r.into_response(),
        Err(e) => to_json_error(e),
    }
}

const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// What makes two requests "the same" for an `Idempotency-Key`: method, path, query and body.
fn request_fingerprint(method: &str, path: &str, query: Option<&str>, body: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [method.as_bytes(), b"\n", path.as_bytes(), b"?", query.unwrap_or_default().as_bytes(), b"\n"] {
        h.update(part);
    }
    h.update(body);
    hex::encode(h.finalize())
}

/// Runs a keyed write at most once: the first completed response (below 500) is kept for the
/// idempotency window and sent again, byte for byte, to every repeat, with `Idempotency-Replayed`.
async fn idempotent<E: Endpoint>(
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
            if status.is_server_error() {
                if let Err(e) = store.idempotency_abort(scope).await {
                    tracing::warn!(error = %e, "could not free an idempotency key after a server error");
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

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Absolute base of the API for list links: `GYMAPI_PUBLIC_URL`, else what the client addressed.
fn base_url(config: &Config, req: &Request) -> String {
    if let Some(u) = &config.public_url {
        return format!("{u}{API_BASE}");
    }
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.split(',').next().unwrap_or_default().trim().to_string())
    };
    let proto = header("x-forwarded-proto").filter(|p| p == "https" || p == "http").unwrap_or_else(|| "http".into());
    let host = header("x-forwarded-host")
        .or_else(|| header("host"))
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)))
        .unwrap_or_else(|| config.bind.to_string());
    format!("{proto}://{host}{API_BASE}")
}

#[handler]
fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({ "status": "ok" }))
}

/// Ready when the database and the limits store (Redis, when configured) answer.
#[handler]
async fn readyz(state: Data<&AppState>) -> Response {
    let database = state.db.ping().await.is_ok();
    let store = state.store.ping().await.is_ok();
    let ready = database && store;
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({ "status": if ready { "ready" } else { "unavailable" }, "database": database, "store": { "kind": state.store.name(), "ok": store } });
    json_response(status, &body)
}
