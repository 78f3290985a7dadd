//! Running the service: bind, serve, shut down gracefully.

use std::time::Duration;

use anyhow::Context as _;
use poem::{Server, listener::TcpListener};

use crate::{app::app, state::AppState};

/// Serves until SIGINT or SIGTERM; requests in flight get up to 30 s to finish, and waiting long
/// polls answer at once.
pub async fn serve(state: AppState) -> anyhow::Result<()> {
    let bind = state.config.bind;
    let listener = TcpListener::bind(bind);
    tracing::info!(%bind, "gymapi listening");
    let shutdown = state.shutdown.clone();
    let signal = async move {
        shutdown_signal().await;
        shutdown.begin();
    };
    Server::new(listener)
        .run_with_graceful_shutdown(app(state), signal, Some(Duration::from_secs(30)))
        .await
        .with_context(|| format!("cannot serve on {bind}"))
}

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
    tracing::info!("shutting down: finishing requests in flight");
}
