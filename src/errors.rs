//! One error type for the whole API: each variant maps to one status and one JSON body of
//! openapi.yaml (`Error` or `ValidationError`). Internal causes are logged, never sent.

use std::{borrow::Cow, collections::BTreeMap};

use poem::{
    IntoResponse, Response,
    error::ResponseError,
    http::{HeaderValue, StatusCode, header},
};
use serde_json::json;

/// The 401 message (openapi.yaml, response `Unauthorized`).
pub const UNAUTHORIZED_MESSAGE: &str = "Invalid or missing API key.";
/// The 403 message of a plan without API access (openapi.yaml, response `Forbidden`).
pub const NO_API_ACCESS_MESSAGE: &str = "This gym does not have API access enabled.";
/// The 403 message of a plan without device features (openapi-devices.yaml, response `Forbidden`).
pub const NO_DEVICE_ACCESS_MESSAGE: &str = "This gym does not have device features enabled.";

/// Field → problems, as sent in a 422 body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldErrors(pub BTreeMap<String, Vec<String>>);

impl FieldErrors {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.entry(field.into()).or_default().push(message.into());
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds every problem of `other`.
    pub fn merge(&mut self, other: FieldErrors) {
        for (field, messages) in other.0 {
            self.0.entry(field).or_default().extend(messages);
        }
    }

    /// poem-openapi's own parse failures, by the parameter or body they name.
    pub fn from_parse(err: &poem::Error) -> Self {
        let mut errors = Self::new();
        if let Some(e) = err.downcast_ref::<poem_openapi::error::ParseParamError>() {
            errors.add(e.name.to_string(), format!("The {} parameter is invalid: {}", e.name, e.reason));
        } else if let Some(e) = err.downcast_ref::<poem_openapi::error::ParseRequestPayloadError>() {
            errors.add("body", format!("The request body is invalid: {}", e.reason));
        } else {
            errors.add("request", err.to_string());
        }
        errors
    }

    /// `Ok(())` when there is nothing to report, else the 422 error.
    pub fn into_result(self) -> Result<(), ApiError> {
        if self.is_empty() { Ok(()) } else { Err(ApiError::Validation(self)) }
    }

    /// Laravel's summary: the first problem, and how many more there are.
    pub fn summary(&self) -> String {
        let total: usize = self.0.values().map(Vec::len).sum();
        let first = self.0.values().flatten().next().cloned().unwrap_or_else(|| "The given data was invalid.".into());
        match total {
            0 | 1 => first,
            2 => format!("{first} (and 1 more error)"),
            n => format!("{first} (and {} more errors)", n - 1),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("unauthorized")]
    Unauthorized,
    #[error("payment required")]
    PaymentRequired,
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed { method: String, path: String, allow: Vec<String> },
    #[error("idempotency conflict")]
    IdempotencyConflict,
    /// The record is not in a state that allows the request (409 `state_conflict`).
    #[error("state conflict: {0}")]
    StateConflict(String),
    /// A card charge reported on a payment the terminal no longer held: recorded as money to give
    /// back, and the terminal told to refund it (409 `refund_required`, device API only).
    #[error("refund required: {0}")]
    RefundRequired(String),
    #[error("validation failed")]
    Validation(FieldErrors),
    #[error("rate limited")]
    RateLimited { retry_after_secs: u64 },
    #[error("service unavailable: {0}")]
    ServiceUnavailable(String),
    /// A body larger than the route takes (413 `payload_too_large`).
    #[error("payload too large: {0}")]
    PayloadTooLarge(String),
    /// A body that did not arrive in time (408 `request_timeout`).
    #[error("request timeout")]
    RequestTimeout,
    /// A request head larger than the server takes (431 `request_header_fields_too_large`).
    #[error("request header fields too large: {0}")]
    HeadersTooLarge(String),
    #[error("internal error: {0:#}")]
    Internal(anyhow::Error),
}

impl ApiError {
    /// A 404 for a record kind and the id the client sent.
    pub fn not_found(kind: &str, id: &str) -> Self {
        let id: String = id.chars().take(100).collect();
        Self::NotFound(format!("No {kind} with id {id}."))
    }

    /// A 422 for one field.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        let mut errors = FieldErrors::new();
        errors.add(field, message);
        Self::Validation(errors)
    }

    pub fn internal(err: impl Into<anyhow::Error>) -> Self {
        Self::Internal(err.into())
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::PaymentRequired => "payment_required",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::IdempotencyConflict => "idempotency_conflict",
            Self::StateConflict(_) => "state_conflict",
            Self::RefundRequired(_) => "refund_required",
            Self::Validation(_) => "validation_failed",
            Self::RateLimited { .. } => "rate_limited",
            Self::ServiceUnavailable(_) => "service_unavailable",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::RequestTimeout => "request_timeout",
            Self::HeadersTooLarge(_) => "request_header_fields_too_large",
            Self::Internal(_) => "internal_error",
        }
    }

    fn message(&self) -> Cow<'_, str> {
        match self {
            Self::Unauthorized => Cow::Borrowed(UNAUTHORIZED_MESSAGE),
            Self::PaymentRequired => Cow::Borrowed("payment_required"),
            Self::Forbidden(m)
            | Self::NotFound(m)
            | Self::ServiceUnavailable(m)
            | Self::StateConflict(m)
            | Self::RefundRequired(m)
            | Self::PayloadTooLarge(m)
            | Self::HeadersTooLarge(m) => Cow::Borrowed(m),
            Self::RequestTimeout => {
                Cow::Borrowed("The request's body did not arrive in time; send it again without pausing.")
            }
            Self::MethodNotAllowed { method, path, .. } => Cow::Owned(format!("{method} is not allowed on {path}.")),
            Self::IdempotencyConflict => Cow::Borrowed("A request with this Idempotency-Key is still in progress."),
            Self::Validation(errors) => Cow::Owned(errors.summary()),
            Self::RateLimited { retry_after_secs } => {
                Cow::Owned(format!("Too many requests. Retry after {retry_after_secs} seconds."))
            }
            Self::Internal(_) => Cow::Borrowed(INTERNAL_MESSAGE),
        }
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(err: sea_orm::DbErr) -> Self {
        Self::Internal(err.into())
    }
}

impl ResponseError for ApiError {
    fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::PaymentRequired => StatusCode::PAYMENT_REQUIRED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::IdempotencyConflict | Self::StateConflict(_) | Self::RefundRequired(_) => StatusCode::CONFLICT,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::ServiceUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::Internal(_) if unavailable(self) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn as_response(&self) -> Response {
        if let Self::Internal(err) = self {
            if unavailable(self) {
                tracing::warn!(error = format!("{err:#}"), "database unavailable");
                let mut response = error_response(StatusCode::SERVICE_UNAVAILABLE, "service_unavailable", DB_DOWN);
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(1));
                return response;
            }
            tracing::error!(error = format!("{err:#}"), "internal error");
        }
        let mut response = match self {
            Self::Validation(errors) => json_response(
                self.status(),
                &json!({
                    "type": "validation_failed",
                    "message": errors.summary(),
                    "errors": errors.0,
                    "error": { "type": "validation_failed", "message": errors.summary() },
                }),
            ),
            _ => error_response(self.status(), self.kind(), &self.message()),
        };
        match self {
            Self::RateLimited { retry_after_secs } => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            Self::MethodNotAllowed { allow, .. } => {
                if let Ok(v) = HeaderValue::from_str(&allow.join(", ")) {
                    response.headers_mut().insert(header::ALLOW, v);
                }
            }
            _ => {}
        }
        response
    }
}

/// What a client is told when the database cannot be reached.
const DB_DOWN: &str = "The database is unavailable; retry in a moment.";

/// Whether an internal error is the database being out of reach (a connection lost, refused or not
/// to be had in time, a server shutting down) or asking for the transaction again (a serialization
/// failure or deadlock: on Citus, a shard split under the transaction; the transaction was rolled
/// back) rather than a fault of ours: 503, not 500.
fn unavailable(err: &ApiError) -> bool {
    let ApiError::Internal(err) = err else { return false };
    err.chain().any(|cause| {
        cause.downcast_ref::<sea_orm::DbErr>().is_some_and(|e| db_unavailable(e) || crate::db::must_retry(e))
    })
}

fn db_unavailable(err: &sea_orm::DbErr) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx::Error};
    let sqlx = match err {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => return true,
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => e,
        _ => return false,
    };
    match sqlx {
        Error::Io(_) | Error::PoolTimedOut | Error::PoolClosed | Error::WorkerCrashed | Error::Tls(_) => true,
        // Connection exceptions (08), insufficient resources (53), operator intervention (57: a
        // terminated backend, a server shutting down).
        Error::Database(db) => db.code().is_some_and(|c| ["08", "53", "57"].iter().any(|class| c.starts_with(class))),
        _ => false,
    }
}

/// A JSON response with the given status.
pub fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    json_bytes_response(status, serde_json::to_vec(body).unwrap_or_default())
}

fn json_bytes_response(status: StatusCode, bytes: Vec<u8>) -> Response {
    Response::builder().status(status).content_type("application/json").body(bytes).into_response()
}

/// Any error that reached the edge of the app, as JSON: ours keep their shape; the framework's
/// (unknown path, wrong method, unreadable body) get the matching status and type.
pub fn to_json_error(err: poem::Error) -> Response {
    if let Some(api) = err.downcast_ref::<ApiError>() {
        return api.as_response();
    }
    let status = err.status();
    let (kind, message) = match status {
        StatusCode::NOT_FOUND => ("not_found", "No such path."),
        StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", "Method not allowed on this path."),
        s if s.is_server_error() => {
            tracing::error!(error = %err, "unhandled error");
            ("internal_error", INTERNAL_MESSAGE)
        }
        _ => {
            let mut errors = FieldErrors::new();
            errors.add("request", err.to_string());
            return ApiError::Validation(errors).as_response();
        }
    };
    error_response(status, kind, message)
}

/// The `type` of an error response, kept on the response for the edge's counts.
#[derive(Clone, Debug)]
pub struct ErrorKind(pub &'static str);

/// What a client is told of a failure on our side; the cause goes to the log.
const INTERNAL_MESSAGE: &str = "Something went wrong on our side. Quote the X-Request-Id when reporting it.";

/// `{"error": {"message": ..., "type": ...}}` with the error's type kept on the response.
fn error_response(status: StatusCode, kind: &'static str, message: &str) -> Response {
    let mut response = json_bytes_response(status, error_body(kind, message));
    response.extensions_mut().insert(ErrorKind(kind));
    response
}

/// The bytes of `{"error": {"message": ..., "type": ...}}`, serialised from its two parts (the
/// same bytes as the `json!` map, whose keys come out sorted) without building a map for them. Also
/// what the server writes itself to a connection over its cap.
pub fn error_body(kind: &str, message: &str) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Body<'a> {
        error: Fields<'a>,
    }
    #[derive(serde::Serialize)]
    struct Fields<'a> {
        message: &'a str,
        #[serde(rename = "type")]
        kind: &'a str,
    }
    serde_json::to_vec(&Body { error: Fields { message, kind } }).unwrap_or_default()
}
