//! The gate of an API family (the integration API, the device API): every check a request passes
//! before its handler runs, in the documented order (see `docs/architecture.md`).

use std::sync::Arc;

use bytes::Bytes;
use poem::{Endpoint, IntoResponse, Request, Response, error::ResponseError, http::HeaderValue};
use sha2::{Digest, Sha256};

use super::idempotency::{IDEMPOTENCY_KEY, Keyed, idempotent, request_fingerprint};
use crate::{
    auth::{self, Admitted},
    config::Config,
    context::RequestContext,
    contract::{Family, MAX_BODY_BYTES, RouteMatch},
    errors::{ApiError, NO_API_ACCESS_MESSAGE, NO_DEVICE_ACCESS_MESSAGE, to_json_error},
    limits::{Budget, RatePolicy, records::RecordKey},
    state::AppState,
};

/// The gate of a family's base path, in the documented order (openapi.yaml, "Authentication"): key
/// (401) → subscription (402) → the plan's licence of the family (403) → the family's rate limit
/// (429) → route (404/405) → validation against the family's document (422). Only requests that
/// pass every check reach the generated routes, with their `RequestContext`.
pub async fn gate<E: Endpoint>(next: Arc<E>, req: Request, state: AppState, family: Family) -> poem::Result<Response> {
    let key = auth::key_from_headers(req.headers());
    let budget = match family {
        Family::Integration => (Budget::Integration, RatePolicy::per_minute(state.config.rate_limit_per_minute)),
        Family::Devices => (Budget::Devices, RatePolicy::per_minute(state.config.device_rate_limit_per_minute)),
    };
    let now = crate::records::now();
    let Admitted { tenant, licence, decision, retiring } =
        match auth::admit(&state.db, &*state.store, &state.resolutions, key.as_deref(), budget, now).await {
            Ok(admitted) => admitted,
            Err(e) => return Ok(e.as_response()),
        };
    // A rolled key stops its devices at once: the companion app signs in with the new key.
    if retiring && family == Family::Devices {
        return Ok(ApiError::Unauthorized.as_response());
    }
    let unlicensed = match family {
        Family::Integration => (!licence.api).then_some(NO_API_ACCESS_MESSAGE),
        Family::Devices => (!licence.devices).then_some(NO_DEVICE_ACCESS_MESSAGE),
    };
    if let Some(message) = unlicensed {
        return Ok(ApiError::Forbidden(message.into()).as_response());
    }
    state.last_used.touch(&state.db, tenant.key_id);
    state.usage.record(tenant.owner_gym_id, tenant.key_id);
    let mut response = if decision.allowed {
        Box::pin(route(next, req, &state, tenant, family)).await
    } else {
        ApiError::RateLimited { retry_after_secs: decision.retry_after_secs }.as_response()
    };
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(decision.remaining));
    Ok(response)
}

/// Finds the operation of the family's document, validates the request against it, and calls it.
async fn route<E: Endpoint>(
    next: Arc<E>,
    mut req: Request,
    state: &AppState,
    tenant: crate::context::Tenant,
    family: Family,
) -> Response {
    let path = req.uri().path().to_string();
    if path == "/openapi.yaml" && req.method() == poem::http::Method::GET {
        return Response::builder().content_type("application/yaml").body(family.document());
    }
    let base = family.base();
    match state.contract(family).route(req.method(), &path) {
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
        RouteMatch::Operation(op) => {
            let mut errors = op.validate_params(req.uri().query(), req.headers());
            let mut body = Bytes::new();
            if op.has_body() {
                let content_type = req.content_type().map(str::to_string);
                // Boxed: reading the body takes a large future, which the rest of the request
                // (a long poll's wait included) would otherwise carry (see docs/performance.md).
                body = match Box::pin(req.take_body().into_bytes_limit(MAX_BODY_BYTES)).await {
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
                let base_url = base_url(&state.config, &req, base);
                let key_digest = hex::encode(Sha256::digest(key.as_bytes()));
                let keyed = Keyed {
                    scope: format!("{}:{key_digest}", tenant.gym_id),
                    record: RecordKey { gym_id: tenant.gym_id, key_digest },
                    fingerprint: request_fingerprint(req.method().as_str(), &path, req.uri().query(), &body),
                };
                req.extensions_mut().insert(RequestContext { tenant, base_url, path });
                return Box::pin(idempotent(next, req, state, &keyed)).await;
            }
        }
    }
    let base_url = base_url(&state.config, &req, base);
    req.extensions_mut().insert(RequestContext { tenant, base_url, path });
    match next.call(req).await {
        Ok(r) => r.into_response(),
        Err(e) => to_json_error(e),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Absolute base of the family's API (`base`) for list links: `GYMAPI_PUBLIC_URL`, else what the
/// client addressed.
fn base_url(config: &Config, req: &Request, base: &str) -> String {
    if let Some(u) = &config.public_url {
        return format!("{u}{base}");
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
    format!("{proto}://{host}{base}")
}
