//! What every request may need, built once and shared: the database, the configuration, the
//! contract, the limits store, and the in-process parts that serve the API (key resolution, usage
//! counts, kept search totals and statistics, the webhook dispatcher's wake-up).

use std::sync::Arc;

use sea_orm::DatabaseConnection;

use crate::{
    auth::{self, LastUsed},
    config::Config,
    contract::{Contract, Family},
    limits::Store,
    wake::{Shutdown, Wakes},
};

/// Everything a request may need, shared by all of them.
#[derive(Clone)]
pub struct AppState {
    /// sea-orm's connection, with a pool of its own for single statements on PostgreSQL.
    pub db: crate::db::Db,
    pub config: Arc<Config>,
    /// The integration API's document, at run time.
    pub contract: Arc<Contract>,
    /// The device API's document, at run time.
    pub devices_contract: Arc<Contract>,
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
    pub search_totals: Arc<crate::counters::search_totals::SearchTotals>,
    /// The statistics, kept per gym and per version of what they count.
    pub statistics: Arc<crate::counters::statistics::KeptStatistics>,
    /// Wake-ups of long polls, across servers through Redis when it is configured.
    pub wakes: Arc<Wakes>,
    /// The device long polls waiting on this server, capped per key and per gym.
    pub polls: Arc<crate::wake::PollSlots>,
    /// Begins when the server shuts down: waiting long polls answer then.
    pub shutdown: Shutdown,
    /// Devices' last requests, written at most every few seconds per device.
    pub heartbeats: Arc<crate::frontdesk::devices::Heartbeats>,
    /// What `GET /metrics` shows.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// What finds a list's next page from the page before it (see `pagination`).
    pub walks: Arc<crate::pagination::Walks>,
    /// The key that signs the sign-in form's token, read from the database once.
    pub sign_in_key: Arc<tokio::sync::OnceCell<Vec<u8>>>,
    /// The password hashes sign-ins may run at once (see [`crate::accounts::PASSWORD_HASHES_AT_ONCE`]).
    pub password_hashes: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// Connects the store the configuration names (Redis must answer at start-up).
    pub async fn new(db: DatabaseConnection, config: Config) -> anyhow::Result<Self> {
        let store = crate::limits::connect(&config).await?;
        let wakes = Wakes::connect(&config, store.breaker()).await?;
        let polls = crate::wake::PollSlots::new(config.long_polls_per_key, config.long_polls_per_gym());
        let metrics = Arc::new(crate::metrics::Metrics::new());
        Ok(Self {
            db: crate::db::Db::new(db),
            config: Arc::new(config),
            contract: Contract::embedded(Family::Integration)?,
            devices_contract: Contract::embedded(Family::Devices)?,
            last_used: Arc::new(LastUsed::default()),
            store: store.clone(),
            webhooks: Arc::new(tokio::sync::Notify::new()),
            usage: Arc::new(crate::usage::Usage::default()),
            resolutions: Arc::new(auth::Resolutions::counted(metrics.key_lookups.clone())),
            search_totals: Arc::default(),
            statistics: Arc::default(),
            wakes,
            polls,
            shutdown: Shutdown::default(),
            heartbeats: Arc::default(),
            metrics,
            walks: Arc::new(crate::pagination::Walks::new(store.clone())),
            sign_in_key: Arc::default(),
            password_hashes: Arc::new(tokio::sync::Semaphore::new(crate::accounts::PASSWORD_HASHES_AT_ONCE)),
        })
    }

    /// The document of an API family, at run time.
    pub fn contract(&self, family: Family) -> &Contract {
        match family {
            Family::Integration => &self.contract,
            Family::Devices => &self.devices_contract,
        }
    }

    /// Starts what runs beside the API: the webhook dispatcher (unless the configuration leaves it
    /// to `gymapi worker` processes), the flusher of key usage counts, the sweeper of expired
    /// idempotency records and that of events past their time.
    pub fn start_background(&self) -> anyhow::Result<()> {
        if self.config.webhook_dispatch {
            crate::webhooks::dispatch::spawn(
                self.db.orm().clone(),
                &self.config,
                self.webhooks.clone(),
                self.metrics.clone(),
            )?;
        }
        self.usage.clone().spawn_flusher(self.db.orm().clone());
        crate::limits::records::spawn_sweeper(self.db.orm().clone());
        crate::webhooks::retention::spawn_sweeper(self.db.orm().clone(), self.config.event_sweep_every);
        Ok(())
    }
}
