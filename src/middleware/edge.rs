//! The outermost layer of every route: the request id, the limits of a request's head and body,
//! JSON for every error, one log line.

use std::{
    io,
    pin::Pin,
    sync::{Arc, OnceLock},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use bytes::Bytes;
use futures_util::Stream;
use poem::{
    Body, Endpoint, IntoResponse, Request, Response,
    error::ResponseError as _,
    http::{HeaderValue, Version, header},
};
use tracing::Instrument as _;

use crate::{
    contract::API_BASE,
    errors::{ApiError, ErrorKind, to_json_error},
    metrics::{Metrics, Operation},
};

/// The most header lines a request may carry, and the most bytes its head (target and headers)
/// may take; more answers 431.
pub const MAX_HEADERS: usize = 100;
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

/// The largest body a route outside the API takes (the settings pages' forms, the health checks);
/// more answers 413. The API's own limit (`contract::MAX_BODY_BYTES`, a 422 naming `body`) is
/// applied where its bodies are read.
pub const SMALL_BODY_BYTES: usize = 16 * 1024;

/// What the edge holds every request to, and where it counts them.
#[derive(Clone)]
pub struct EdgeLimits {
    /// How long a request's body may take to arrive, from the moment its head was read.
    pub body_timeout: Duration,
    pub metrics: Arc<Metrics>,
}

/// Outermost layer: the request id, the head's and the body's limits, JSON for every error, one
/// log line per request. Logs carry the method, the path without its query, the status and the
/// time; never a key or a body.
pub async fn edge<E: Endpoint>(next: Arc<E>, mut req: Request, limits: Arc<EdgeLimits>) -> poem::Result<Response> {
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
        if let Err(refusal) = check_head(&req) {
            return refusal.as_response();
        }
        let fault = match guard_body(&mut req, &limits) {
            Ok(fault) => fault,
            Err(refusal) => return refusal.as_response(),
        };
        let response = match next.call(req).await {
            Ok(r) => r.into_response(),
            Err(e) => to_json_error(e),
        };
        match fault.and_then(|f| f.get().copied()) {
            Some(fault) => fault.error().as_response(),
            None => response,
        }
    }
    .instrument(span.clone())
    .await;
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    count(&limits.metrics, &path, &response, started.elapsed().as_secs_f64());
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

/// Counts an answered request by its operation (the gate names it) or its route outside the API.
fn count(metrics: &Metrics, path: &str, response: &Response, seconds: f64) {
    let outside = match path {
        "/healthz" | "/readyz" | "/metrics" => &path[1..],
        p if p.starts_with("/settings") => "settings",
        _ => "unmatched",
    };
    let operation = response.extensions().get::<Operation>().map_or(outside, |o| o.0.as_str());
    metrics.observe(operation, response.status().as_u16(), seconds);
    if response.headers().get(super::idempotency::REPLAYED).is_some_and(|v| v == "true") {
        metrics.replays.inc();
    }
    if response.extensions().get::<ErrorKind>().is_some_and(|k| k.0 == "idempotency_conflict") {
        metrics.idempotency_conflicts.inc();
    }
}

/// 431 for a head with too many header lines or too many bytes.
fn check_head(req: &Request) -> Result<(), ApiError> {
    let headers = req.headers();
    if headers.len() > MAX_HEADERS {
        return Err(ApiError::HeadersTooLarge(format!("A request may carry at most {MAX_HEADERS} header lines.")));
    }
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    let bytes = target + headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum::<usize>();
    if bytes > MAX_HEAD_BYTES {
        let kib = MAX_HEAD_BYTES / 1024;
        return Err(ApiError::HeadersTooLarge(format!("A request's target and headers may take at most {kib} KiB.")));
    }
    Ok(())
}

/// Why a body was cut off while the route read it.
#[derive(Clone, Copy, Debug)]
enum BodyFault {
    TooLarge(usize),
    TimedOut,
}

impl BodyFault {
    fn error(self) -> ApiError {
        match self {
            Self::TooLarge(limit) => too_large(limit),
            Self::TimedOut => ApiError::RequestTimeout,
        }
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::PayloadTooLarge(format!("The request body must not be larger than {} KiB.", limit / 1024))
}

/// Holds the body to the route's limits: refused at once when its declared length is too large,
/// otherwise read through [`Guarded`], which cuts it off at the limit or the deadline and records
/// why (the edge then answers 413 or 408, whatever the route made of the cut).
fn guard_body(req: &mut Request, limits: &EdgeLimits) -> Result<Option<Arc<OnceLock<BodyFault>>>, ApiError> {
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
    let http1 = matches!(req.version(), Version::HTTP_09 | Version::HTTP_10 | Version::HTTP_11);
    if http1 && !chunked && declared.unwrap_or(0) == 0 {
        return Ok(None);
    }
    // The API reads at most its own limit and answers a larger body itself.
    let limit = if req.uri().path().starts_with(API_BASE) { None } else { Some(SMALL_BODY_BYTES) };
    if let (Some(limit), Some(declared)) = (limit, declared) {
        if declared > limit as u64 {
            return Err(too_large(limit));
        }
    }
    let fault = Arc::new(OnceLock::new());
    let guarded = Guarded {
        inner: Box::pin(req.take_body().into_bytes_stream()),
        deadline: Box::pin(tokio::time::sleep(limits.body_timeout)),
        left: limit.unwrap_or(usize::MAX),
        limit: limit.unwrap_or(usize::MAX),
        fault: fault.clone(),
    };
    req.set_body(Body::from_bytes_stream(guarded));
    Ok(Some(fault))
}

/// A body read under a size limit and a deadline.
struct Guarded {
    inner: Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    left: usize,
    limit: usize,
    fault: Arc<OnceLock<BodyFault>>,
}

impl Guarded {
    fn cut(&self, fault: BodyFault) -> Poll<Option<io::Result<Bytes>>> {
        let _ = self.fault.set(fault);
        Poll::Ready(Some(Err(io::Error::other(format!("{fault:?}")))))
    }
}

impl Stream for Guarded {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.fault.get().is_some() {
            return Poll::Ready(None);
        }
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) if chunk.len() > this.left => this.cut(BodyFault::TooLarge(this.limit)),
            Poll::Ready(Some(Ok(chunk))) => {
                this.left -= chunk.len();
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Pending if this.deadline.as_mut().poll(cx).is_ready() => this.cut(BodyFault::TimedOut),
            other => other,
        }
    }
}
