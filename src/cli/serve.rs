//! `gymapi serve`, `migrate`, `demo` and `worker`: running the service and what it needs.

use sea_orm::ConnectionTrait as _;

use super::{Failure, bad_input, key_cache, open, print};
use crate::{config::Config, db, demo, state::AppState};

pub(super) async fn migrate(config: &Config, partitions: Option<u32>, distribute: bool) -> Result<(), Failure> {
    let db = open(config).await?;
    eprintln!("migrations applied ({})", db::redact(&config.database_url));
    if distribute {
        if db.get_database_backend() != sea_orm::DbBackend::Postgres {
            return Err(bad_input("--distribute needs PostgreSQL with the Citus extension"));
        }
        let Some(done) = db::distribute(&db).await? else {
            return Err(bad_input(
                "--distribute needs the Citus extension in this database (CREATE EXTENSION citus on the coordinator and every worker, then citus_add_node for each worker)",
            ));
        };
        eprintln!(
            "tables placed on the Citus cluster: {} reference, {} distributed by gym ({} already placed)",
            done.reference.len(),
            done.distributed.len(),
            migration::tenancy::REFERENCE_TABLES.len() + migration::tenancy::TENANT_TABLES.len()
                - done.reference.len()
                - done.distributed.len()
        );
    }
    if let Some(n) = partitions {
        if db.get_database_backend() != sea_orm::DbBackend::Postgres {
            return Err(bad_input("--partitions needs PostgreSQL"));
        }
        if !(2..=256).contains(&n) {
            return Err(bad_input("--partitions takes 2 to 256"));
        }
        db::partition(&db, n).await?;
        eprintln!("tenant tables partitioned by gym ({n} partitions)");
    }
    Ok(())
}

/// Serves until SIGINT or SIGTERM, after pending migrations; with `demo`, creates the demo gym
/// (once) and prints its fresh keys first.
pub(super) async fn serve(config: Config, demo: bool) -> Result<(), Failure> {
    let db = open(&config).await?;
    let state = AppState::new(db, config).await?;
    if demo {
        let keys = demo::ensure(&state.db, &*state.store).await?;
        println!("{}", keys.banner(&format!("http://{}", state.config.bind)));
    }
    state.start_background()?;
    crate::server::serve(state).await?;
    Ok(())
}

/// Sends webhook deliveries until SIGINT or SIGTERM (beside servers that leave it to workers).
pub(super) async fn worker(config: &Config) -> Result<(), Failure> {
    let db = open(config).await?;
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let dispatcher = crate::webhooks::dispatch::Dispatcher::new(db, config, wake, Default::default())?;
    tracing::info!("gymapi worker: sending webhook deliveries");
    dispatcher.run(crate::server::shutdown_signal()).await;
    Ok(())
}

pub(super) async fn demo(config: &Config, json: bool) -> Result<(), Failure> {
    let db = open(config).await?;
    let keys = demo::ensure(&db, &*key_cache(config).await).await?;
    print(json, keys.to_json(), || keys.banner(&format!("http://{}", config.bind)));
    Ok(())
}
