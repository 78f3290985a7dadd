//! The gate of an API family (the integration API, the device API): every check a request passes
//! before its handler runs, in the documented order (see `docs/architecture.md`).

use std::sync::Arc;

use bytes::Bytes;
use poem::{Endpoint, IntoResponse, Request, Response, error::ResponseError, http::HeaderValue};
use sha2::{Digest, Sha256};

use super::idempotency::{IDEMPOTENCY_KEY, Keyed, REPLAYED, idempotent, request_fingerprint};
use crate::{
    auth::{self, Admitted},
    config::Config,
    context::RequestContext,
    contract::{Family, MAX_BODY_BYTES, Operation, RouteMatch, Rules},
    errors::{ApiError, NO_API_ACCESS_MESSAGE, NO_DEVICE_ACCESS_MESSAGE, to_json_error},
    limits::{Budget, Decision, IdempotencyAsk, IdempotencyState, Quota, RatePolicy, records::RecordKey},
    logs::Repeated,
    state::AppState,
};

/// The gate of a family's base path, in the documented order (openapi.yaml, "Authentication"): key
/// (401) → subscription (402) → the plan's licence of the family (403) → the family's rate limit
/// (429) → route (404/405) → validation against the family's document (422). Only requests that
/// pass every check reach the generated routes, with their `RequestContext`. A keyed write's key
/// is begun in the store's round trip that admits the request, and freed if a later check refuses.
async fn guarded<E: Endpoint>(
    next: Arc<E>,
    mut req: Request,
    state: &AppState,
    family: Family,
    rules: Option<&dyn Rules>,
    matched: RouteMatch<'_>,
) -> poem::Result<Response> {
    let key = auth::key_from_headers(req.headers());
    let quota = match family {
        Family::Integration => {
            Quota { budget: Budget::Integration, policy: RatePolicy::per_minute(state.config.rate_limit_per_minute) }
        }
        Family::Devices => {
            Quota { budget: Budget::Devices, policy: RatePolicy::per_minute(state.config.device_rate_limit_per_minute) }
        }
    };
    let now = crate::records::now();
    // A keyed write whose body is small (or absent) is read now, so that its key is begun in the
    // round trip that admits it; a larger one, or one of unknown length, only once admitted.
    let keyed_op = match (&key, &matched) {
        (Some(_), RouteMatch::Operation(op)) if op.idempotent && req.headers().contains_key(IDEMPOTENCY_KEY) => {
            Some(*op)
        }
        _ => None,
    };
    let read_first =
        keyed_op.filter(|op| !op.has_body() || declared_length(req.headers()).is_some_and(|n| n <= EARLY_BODY_BYTES));
    let keyed = match (read_first, &key) {
        (Some(op), Some(k)) => Box::pin(prepare_keyed(&mut req, op, k)).await,
        _ => None,
    };
    let ask = keyed.as_ref().map(|k| IdempotencyAsk {
        key: &k.scope,
        fingerprint: &k.fingerprint,
        lock: state.config.idempotency_lock,
    });
    let caller = auth::Caller { key: key.as_deref(), address: client_address(&state.config, &req) };
    let Admitted { tenant, licence, decision, retiring, idempotency } =
        match auth::admit(&state.db, &*state.store, &state.resolutions, caller, quota, ask, now).await {
            Ok(admitted) => admitted,
            // Admission's one 429: the address's unknown keys (the key's own limit is `decision`).
            Err(ApiError::RateLimited { retry_after_secs }) => return Ok(unknown_keys_refused(retry_after_secs)),
            Err(e) => return Ok(e.as_response()),
        };
    let mut begun = keyed.map(|k| (k, idempotency));
    let mut response = match refusal(family, licence, retiring, decision) {
        Some(refused) => refused,
        None => {
            state.last_used.touch(&state.db, tenant.key_id);
            state.usage.record(tenant.owner_gym_id, tenant.key_id);
            if let (Some(op), None, Some(k)) = (keyed_op.filter(|_| read_first.is_none()), &begun, &key) {
                begun = Box::pin(begin_after_admission(&mut req, op, k, state)).await;
            }
            let admitted = AdmittedRequest { tenant, family, matched, rules };
            Box::pin(route(next, req, state, admitted, &mut begun)).await
        }
    };
    // Refused before its handler: a key the store began for this request is free again.
    if let Some((k, Some(IdempotencyState::Started))) = begun {
        if let Err(e) = state.store.idempotency_abort(&k.scope).await {
            static UNFREED: Repeated = Repeated::new();
            if let Some(times) = UNFREED.due() {
                tracing::warn!(error = %e, times, "could not free idempotency keys after a refusal");
            }
        }
    }
    rate_limit_headers(response.headers_mut(), &decision, quota.policy);
    Ok(response)
}

/// The 429 of a client address past its unknown keys (`auth::UNKNOWN_KEYS`), before any key is
/// known: the limit's headers describe the address's budget of unknown keys (`"unknown-keys"`).
fn unknown_keys_refused(retry_after_secs: u64) -> Response {
    let mut response = ApiError::RateLimited { retry_after_secs }.as_response();
    let budget = auth::UNKNOWN_KEYS;
    let decision = Decision { allowed: false, limit: budget.free, remaining: 0, reset_secs: retry_after_secs };
    let policy = RatePolicy { limit: budget.free, window: budget.window };
    named_limit_headers(response.headers_mut(), "unknown-keys", &decision, policy);
    response
}

/// The limit's headers: the de facto `X-RateLimit-*` and the IETF fields
/// (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy: "default";q=120;w=60` and
/// `RateLimit: "default";r=57;t=12`.
fn rate_limit_headers(headers: &mut poem::http::HeaderMap, decision: &Decision, policy: RatePolicy) {
    named_limit_headers(headers, "default", decision, policy);
}

/// [`rate_limit_headers`] of the policy called `name`.
fn named_limit_headers(headers: &mut poem::http::HeaderMap, name: &str, decision: &Decision, policy: RatePolicy) {
    headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(decision.remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from(decision.reset_secs));
    let policy = format!("\"{name}\";q={};w={}", policy.limit, policy.window_secs());
    let now = format!("\"{name}\";r={};t={}", decision.remaining, decision.reset_secs);
    for (name, value) in [("ratelimit-policy", policy), ("ratelimit", now)] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
}

/// Marks the response with its operation (for the edge's counts), whatever answered it.
/// The request's route is found once, here, for the counts, the keyed write and the handler.
/// The family's gate; `rules` are its writes' rules beyond the schema, asked when the schema
/// refuses a body so that the 422 names every problem.
pub async fn gate<E: Endpoint>(
    next: Arc<E>,
    req: Request,
    state: AppState,
    family: Family,
    rules: Option<Arc<dyn Rules>>,
) -> poem::Result<Response> {
    let matched = state.contract(family).route(req.method(), req.uri().path());
    let operation = match &matched {
        RouteMatch::Operation(op) => op.id.clone(),
        _ => "unmatched".to_string(),
    };
    let mut response = guarded(next, req, &state, family, rules.as_deref(), matched).await?;
    response.extensions_mut().insert(crate::metrics::Operation(operation));
    Ok(response)
}

/// The refusals after admission, in their order: a rolled key on the device API (401), the plan's
/// licence of the family (403), the rate limit (429).
fn refusal(family: Family, licence: auth::Licence, retiring: bool, decision: Decision) -> Option<Response> {
    // A rolled key stops its devices at once: the companion app signs in with the new key.
    if retiring && family == Family::Devices {
        return Some(ApiError::Unauthorized.as_response());
    }
    let unlicensed = match family {
        Family::Integration => (!licence.api).then_some(NO_API_ACCESS_MESSAGE),
        Family::Devices => (!licence.devices).then_some(NO_DEVICE_ACCESS_MESSAGE),
    };
    if let Some(message) = unlicensed {
        return Some(ApiError::Forbidden(message.into()).as_response());
    }
    (!decision.allowed).then(|| ApiError::RateLimited { retry_after_secs: decision.retry_after_secs() }.as_response())
}

/// A keyed write as known before its handler: the operation is marked idempotent and the request
/// carries `Idempotency-Key`. Its body is read (the fingerprint needs it), before admission when it
/// is small, and kept for the route, which reads it as if it had not been.
struct Prepared {
    /// Where the store keeps the key: the API key's fingerprint and the key's digest.
    scope: String,
    key_digest: String,
    fingerprint: String,
}

/// The largest body a keyed write has read before its request is admitted: a larger one waits for
/// the key and the rate limit, so that requests nobody admits hold no more than this each.
const EARLY_BODY_BYTES: u64 = 64 * 1024;

fn declared_length(headers: &poem::http::HeaderMap) -> Option<u64> {
    if headers.contains_key(poem::http::header::TRANSFER_ENCODING) {
        return None;
    }
    headers.get(poem::http::header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// A keyed write with a large body, admitted: its body is read and its key begun in a store round
/// trip of its own. A store that does not answer leaves the key to the database, as an admission
/// that failed open does.
async fn begin_after_admission(
    req: &mut Request,
    op: &Operation,
    api_key: &str,
    state: &AppState,
) -> Option<(Prepared, Option<IdempotencyState>)> {
    let prepared = prepare_keyed(req, op, api_key).await?;
    let begun = state.store.idempotency_begin(&prepared.scope, &prepared.fingerprint, state.config.idempotency_lock);
    let begun = match begun.await {
        Ok(s) => Some(s),
        Err(e) => {
            static UNAVAILABLE: Repeated = Repeated::new();
            if let Some(times) = UNAVAILABLE.due() {
                tracing::warn!(error = %e, times, "idempotency store unavailable; the database keeps the keys");
            }
            None
        }
    };
    Some((prepared, begun))
}

/// What [`route`] knows of a request the gate admitted: whose it is, which API's, which of its
/// operations it names, and that API's rules.
struct AdmittedRequest<'a> {
    tenant: crate::context::Tenant,
    family: Family,
    matched: RouteMatch<'a>,
    rules: Option<&'a dyn Rules>,
}

/// The body read before admission, for [`route`].
#[derive(Clone)]
struct PreRead(Result<Bytes, ()>);

async fn prepare_keyed(req: &mut Request, op: &Operation, api_key: &str) -> Option<Prepared> {
    let idempotency_key = req.headers().get(IDEMPOTENCY_KEY)?.to_str().ok()?.to_string();
    let path = req.uri().path().to_string();
    if !op.idempotent {
        return None;
    }
    let mut body = Bytes::new();
    if op.has_body() {
        let read = req.take_body().into_bytes_limit(MAX_BODY_BYTES).await.map_err(|_| ());
        body = read.clone().unwrap_or_default();
        req.extensions_mut().insert(PreRead(read.clone()));
        if read.is_err() {
            return None;
        }
    }
    let key_digest = hex::encode(Sha256::digest(idempotency_key.as_bytes()));
    Some(Prepared {
        scope: format!("{}:{key_digest}", auth::fingerprint(api_key)),
        fingerprint: request_fingerprint(req.method().as_str(), &path, req.uri().query(), &body),
        key_digest,
    })
}

/// Finds the operation of the family's document, validates the request against it, and calls it;
/// a keyed write through [`idempotent`], with the key the store began (`begun`, taken here).
async fn route<E: Endpoint>(
    next: Arc<E>,
    mut req: Request,
    state: &AppState,
    admitted: AdmittedRequest<'_>,
    begun: &mut Option<(Prepared, Option<IdempotencyState>)>,
) -> Response {
    let AdmittedRequest { tenant, family, matched, rules } = admitted;
    let path = req.uri().path().to_string();
    let base = family.base();
    let op = match matched {
        RouteMatch::NotFound => {
            return ApiError::NotFound(format!("No such path: {base}{}.", truncate(&path, 200))).as_response();
        }
        RouteMatch::MethodNotAllowed(allow) => {
            let err = ApiError::MethodNotAllowed {
                method: req.method().to_string(),
                path: format!("{base}{}", truncate(&path, 200)),
                allow,
            };
            return err.as_response();
        }
        RouteMatch::Operation(op) => op,
    };
    if let Some(query) = op.normalized_query(req.uri().query())
        && let Ok(uri) = format!("{}?{query}", req.uri().path()).parse::<poem::http::Uri>()
    {
        *req.uri_mut() = uri;
    }
    let mut errors = op.validate_params(req.uri().query(), req.headers());
    if !op.has_body() && carries_body(req.headers()) {
        errors.add("body", "This operation takes no request body.");
    }
    if op.has_body() {
        let content_type = req.content_type().map(str::to_string);
        let read = match req.extensions_mut().remove::<PreRead>() {
            Some(PreRead(read)) => read,
            // Boxed: reading the body takes a large future, which the rest of the request (a long
            // poll's wait included) would otherwise carry (see docs/performance.md).
            None => Box::pin(req.take_body().into_bytes_limit(MAX_BODY_BYTES)).await.map_err(|_| ()),
        };
        let Ok(body) = read else {
            let limit = MAX_BODY_BYTES / 1024 / 1024;
            errors.add("body", format!("The request body must not be larger than {limit} MiB."));
            return ApiError::Validation(errors).as_response();
        };
        match op.validate_body(content_type.as_deref(), &body) {
            // The handler builds its body from this tree instead of parsing it again.
            Ok(parsed) => {
                req.extensions_mut().insert(crate::types::body::Parsed::new(parsed));
            }
            Err(body_errors) => errors.merge(body_errors),
        }
        if let Some(rules) = rules.filter(|_| !errors.is_empty() && !errors.0.contains_key("body"))
            && let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body)
        {
            let more = rules.check(&op.id, tenant.gym_id, &path, &value, &errors).await;
            errors.merge(more);
        }
        req.set_body(body);
    }
    if !errors.is_empty() {
        return ApiError::Validation(errors).as_response();
    }
    let base_url = base_url(&state.config, &req, base);
    let accept = req.headers().get(poem::http::header::ACCEPT).cloned();
    let gym_id = tenant.gym_id;
    req.extensions_mut().insert(RequestContext { tenant, base_url, path, accept, unit: None });
    let response = match (op.idempotent, begun.take()) {
        (true, Some((prepared, state_of_key))) => {
            let Prepared { scope, key_digest, fingerprint } = prepared;
            let keyed = Keyed { scope, record: RecordKey { gym_id, key_digest }, fingerprint };
            Box::pin(idempotent(next, req, state, &keyed, state_of_key)).await
        }
        _ => match next.call(req).await {
            Ok(r) => r.into_response(),
            Err(e) => to_json_error(e),
        },
    };
    if op.idempotent { not_replayed(response) } else { response }
}

/// A keyed write's answer says whether it is a replay: `Idempotency-Replayed: true` on one,
/// `false` on every other (the header is always there, as the document promises).
fn not_replayed(mut response: Response) -> Response {
    let headers = response.headers_mut();
    if !headers.contains_key(REPLAYED) {
        headers.insert(REPLAYED, poem::http::HeaderValue::from_static("false"));
    }
    response
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Whether a request says it has a body: a length above zero, or a chunked one.
fn carries_body(headers: &poem::http::HeaderMap) -> bool {
    let length = headers.get(poem::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    length.is_some_and(|l| l.trim() != "0") || headers.contains_key(poem::http::header::TRANSFER_ENCODING)
}

/// The client's address: the connection's peer, or, for a request through a trusted proxy, the
/// nearest address of `X-Forwarded-For` that is not a trusted proxy (the one the proxies saw).
fn client_address(config: &Config, req: &Request) -> Option<std::net::IpAddr> {
    let peer = req.remote_addr().as_socket_addr()?.ip();
    let trusted = |ip: std::net::IpAddr| config.trusted_proxies.iter().any(|n| n.contains(ip));
    if !trusted(peer) {
        return Some(peer);
    }
    let forwarded = req.headers().get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok());
    let hops: Vec<std::net::IpAddr> =
        forwarded.flat_map(|v| v.split(',')).filter_map(|hop| hop.trim().parse().ok()).collect();
    Some(hops.into_iter().rev().find(|ip| !trusted(*ip)).unwrap_or(peer))
}

/// The base of the family's API (`base`) for list links: `GYMAPI_PUBLIC_URL`; else, for a request
/// through a trusted proxy, what the proxy says the client addressed; else none, and the links are
/// relative. A client's own `Host` never makes a link (it could be anything).
fn base_url(config: &Config, req: &Request, base: &str) -> String {
    if let Some(u) = &config.public_url {
        return format!("{u}{base}");
    }
    let trusted = req
        .remote_addr()
        .as_socket_addr()
        .is_some_and(|peer| config.trusted_proxies.iter().any(|n| n.contains(peer.ip())));
    if !trusted {
        return base.to_string();
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
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)));
    match host {
        Some(host) => format!("{proto}://{host}{base}"),
        None => base.to_string(),
    }
}
