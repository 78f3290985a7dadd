//! Running the service: bind, accept connections up to a cap, serve each with hyper under the
//! configured limits, shut down gracefully. A request hyper cannot parse is answered in JSON too
//! (`malformed`).
//!
//! The limits every connection is held to (docs/configuration.md): at most `max_connections`
//! open at once (one more is answered 503 and closed, never left waiting); a request's head must
//! arrive within `header_timeout` of the connection starting to wait for it, which also closes a
//! connection that sends nothing, or stays idle between requests, for that long; its body within `body_timeout` (the edge,
//! `middleware::edge`). Malformed header lines are dropped rather than refused by hyper, so that the
//! edge answers such a request in JSON like any other.

use std::{convert::Infallible, future::Future, sync::Arc, time::Duration};

use anyhow::Context as _;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use poem::{
    Addr, Endpoint, Request,
    http::uri::Scheme,
    web::{LocalAddr, RemoteAddr},
};
use tokio::{io::AsyncWriteExt, net::TcpListener, sync::Semaphore};

use crate::{app::app, state::AppState};

mod malformed;

/// How long requests in flight may take to finish once the server shuts down.
const DRAIN: Duration = Duration::from_secs(30);

/// The most header lines hyper reads, and the most bytes it buffers for a request's head: above
/// what the edge allows (`middleware::edge::MAX_HEADERS`, `MAX_HEAD_BYTES`), so that the edge,
/// not hyper, refuses a head too large, in JSON.
const HYPER_MAX_HEADERS: usize = 1_000;
const HYPER_MAX_BUF: usize = 2 * 1024 * 1024;

/// Serves until SIGINT or SIGTERM; requests in flight get up to 30 s to finish, and waiting long
/// polls answer at once.
pub async fn serve(state: AppState) -> anyhow::Result<()> {
    let bind = state.config.bind;
    let listener = TcpListener::bind(bind).await.with_context(|| format!("cannot serve on {bind}"))?;
    tracing::info!(%bind, "gymapi listening");
    run(listener, state, shutdown_signal()).await;
    Ok(())
}

/// Serves `state` on `listener` until `stop` completes, then lets requests in flight finish (30 s
/// at most) while waiting long polls answer at once. Tests serve through this too.
pub async fn run(listener: TcpListener, state: AppState, stop: impl Future<Output = ()>) {
    let endpoint = Arc::new(app(state.clone()));
    let config = state.config.clone();
    let files = crate::config::open_files_limit();
    if let Some(n) = files.filter(|n| config.max_connections + crate::config::RESERVED_FILES > *n) {
        tracing::warn!(
            max_connections = config.max_connections,
            open_files = n,
            "GYMAPI_MAX_CONNECTIONS is close to the process's open-file limit (ulimit -n)"
        );
    }
    // HTTP/1 only: hyper's HTTP/2 has no timeout for a connection that opens no stream, so one
    // byte of a preface held a place of the cap for good. A connection that opens with HTTP/2's
    // preface in cleartext is closed at once; HTTP/2 to the clients is the TLS proxy's in front.
    let mut http = auto::Builder::new(TokioExecutor::new()).http1_only();
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .ignore_invalid_headers(true)
        .max_headers(HYPER_MAX_HEADERS)
        .max_buf_size(HYPER_MAX_BUF);
    let http = Arc::new(http);
    let permits = Arc::new(Semaphore::new(config.max_connections));
    let graceful = GracefulShutdown::new();
    let local = listener.local_addr().ok();
    tokio::pin!(stop);
    loop {
        let (socket, peer) = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: wait a moment instead of spinning on it.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tokio::spawn(refuse(socket));
            continue;
        };
        let (endpoint, http) = (endpoint.clone(), http.clone());
        let addrs = (local.map_or(Addr::Custom("tcp", "".into()), Addr::SocketAddr), Addr::SocketAddr(peer));
        let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let endpoint = endpoint.clone();
            let (local, remote) = (LocalAddr(addrs.0.clone()), RemoteAddr(addrs.1.clone()));
            async move {
                let req = Request::from((req, local, remote, Scheme::HTTP));
                Ok::<_, Infallible>(hyper::Response::<_>::from(endpoint.get_response(req).await))
            }
        });
        let (watcher, header_timeout, stopping) = (graceful.watcher(), config.header_timeout, state.shutdown.clone());
        tokio::spawn(async move {
            // The first byte is awaited under the header timeout too (a connection that never
            // sends would stay open otherwise), and not past the start of a shutdown.
            let mut first = [0u8; 1];
            let sent = tokio::select! {
                peeked = tokio::time::timeout(header_timeout, socket.peek(&mut first)) => {
                    matches!(peeked, Ok(Ok(n)) if n > 0)
                }
                () = stopping.wait() => false,
            };
            if sent {
                let connection =
                    http.serve_connection(TokioIo::new(malformed::Answering::new(socket)), service).into_owned();
                if let Err(e) = watcher.watch(connection).await {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            }
            drop(permit);
        });
    }
    tracing::info!("shutting down: finishing requests in flight");
    state.shutdown.begin();
    if tokio::time::timeout(DRAIN, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight after {DRAIN:?}; stopping anyway");
    }
}

/// Answers a connection over the cap: a 503 in JSON, then closes it.
async fn refuse(mut socket: tokio::net::TcpStream) {
    let id = uuid::Uuid::now_v7();
    let message = "The server has as many connections open as it allows; retry in a moment.";
    let body = String::from_utf8_lossy(&crate::errors::error_body("service_unavailable", message)).into_owned();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nx-request-id: {id}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        socket.write_all(response.as_bytes()).await?;
        socket.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), write).await;
}

/// Until SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
