//! The operators' CLI: one file per command group, each with its arguments and its `run`. Scripts
//! depend on it (see the README's "Operators' CLI"): names, flags and `--json` shapes are stable.
//! Exit codes: 0 success, 1 failure of the service or database, 2 bad input.

mod device;
mod facility;
mod gym;
mod key;
mod serve;
mod user;
mod webhook;

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand, ValueEnum};
use sea_orm::DatabaseConnection;
use serde_json::json;

use crate::{accounts::AccountError, config::Config, contract::Family, db};

#[derive(Parser, Debug)]
#[command(name = "gymapi", version, about = "The gymapi service and its operators' tools")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run pending migrations, then serve the API.
    Serve {
        /// Address to listen on (default: GYMAPI_BIND or 127.0.0.1:8080).
        #[arg(long)]
        bind: Option<std::net::SocketAddr>,
        /// Create the demo gym (once) and print a fresh live and test key.
        #[arg(long)]
        demo: bool,
    },
    /// Run pending migrations.
    Migrate {
        /// Hash-partition every tenant table by gym in this many partitions (PostgreSQL, 2 to 256);
        /// later migrations keep new tenant tables partitioned the same way.
        #[arg(long, conflicts_with = "distribute")]
        partitions: Option<u32>,
        /// On a Citus coordinator: make the reference tables reference tables and distribute
        /// every tenant table by gym, colocated; later migrations keep new tables so.
        #[arg(long)]
        distribute: bool,
    },
    /// Create the demo gym with data (once) and print a fresh live and test key.
    Demo {
        #[arg(long)]
        json: bool,
    },
    /// Print openapi.yaml (or, with --devices, openapi-devices.yaml), in OpenAPI 3.0 or its 3.1 copy.
    Openapi {
        /// The device API's document instead of the integration API's.
        #[arg(long)]
        devices: bool,
        #[arg(long, value_enum, default_value = "3.0")]
        openapi_version: OpenapiVersion,
    },
    /// Gyms.
    #[command(subcommand)]
    Gym(gym::GymCommand),
    /// Sandboxes.
    #[command(subcommand)]
    Sandbox(gym::SandboxCommand),
    /// API keys.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Gym users of the settings area.
    #[command(subcommand)]
    User(user::UserCommand),
    /// Import a CSV or JSON Lines file through the API, in batches; run it again to resume.
    Import(Box<gymapi_import::ImportArgs>),
    /// Send webhook deliveries (beside `serve` instances started with GYMAPI_WEBHOOK_DISPATCH=0).
    Worker,
    /// Webhook endpoints of a gym or its sandbox.
    #[command(subcommand)]
    Webhook(webhook::WebhookCommand),
    /// Front-desk devices of a gym and its sandbox.
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Facilities (locations) of a gym and its sandbox.
    #[command(subcommand)]
    Facility(facility::FacilityCommand),
}

/// The OpenAPI version `gymapi openapi` prints a document in.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum OpenapiVersion {
    /// The document itself.
    #[value(name = "3.0")]
    V30,
    /// Its OpenAPI 3.1 copy (webhooks under `webhooks`, nullable fields as type lists).
    #[value(name = "3.1")]
    V31,
}

/// A failure, and whether it was the caller's input.
struct Failure {
    message: String,
    bad_input: bool,
}

impl From<AccountError> for Failure {
    fn from(e: AccountError) -> Self {
        let bad_input = !matches!(e, AccountError::Db(_));
        Self { message: e.to_string(), bad_input }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self { message: format!("{e:#}"), bad_input: false }
    }
}

fn bad_input(message: impl Into<String>) -> Failure {
    Failure { message: message.into(), bad_input: true }
}

pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    // Held to the end: dropping it writes out the log lines still queued.
    let _log_writer = init_tracing(&config, matches!(cli.command, Command::Serve { .. }));
    match run(cli.command, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(if f.bad_input { 2 } else { 1 })
        }
    }
}

/// Logs go to stderr through a writer thread, so a request's log line costs its worker a queue
/// push rather than a system call. The queue never drops lines: when it is full, the worker waits.
fn init_tracing(config: &Config, serving: bool) -> tracing_appender::non_blocking::WorkerGuard {
    use tracing_subscriber::{EnvFilter, fmt};
    let default = if serving { "info,sqlx=warn,sea_orm=warn" } else { "warn" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("gymapi-log")
        .finish(std::io::stderr());
    // Colours only for a terminal: a log file or a collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer);
    let _ = if config.log_json { builder.json().try_init() } else { builder.try_init() };
    guard
}

async fn open(config: &Config) -> Result<DatabaseConnection, Failure> {
    Ok(db::open(&config.database_url).await?)
}

/// The store whose key cache a change to keys or gyms must clear: the server's Redis when
/// `REDIS_URL` is set. If it cannot be reached the change is still made, with a warning: cached
/// grants expire within `limits::GRANT_TTL`, and servers skip the cache while Redis is down.
async fn key_cache(config: &Config) -> std::sync::Arc<dyn crate::limits::Store> {
    match crate::limits::connect(config).await {
        Ok(store) => store,
        Err(e) => {
            tracing::warn!(error = %e, "cached keys not cleared; the change takes effect within {} s", crate::limits::GRANT_TTL.as_secs());
            std::sync::Arc::new(crate::limits::MemoryStore::default())
        }
    }
}

fn print(json_out: bool, value: serde_json::Value, human: impl FnOnce() -> String) {
    if json_out {
        out(&format!("{value}\n"));
    } else {
        out(&format!("{}\n", human()));
    }
}

/// Writes `text` to standard output. A reader that stops early (`gymapi openapi | head`) is its
/// choice, not a failure: what it did not read is dropped (`print!` would panic on the closed pipe).
fn out(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

fn opt_time(t: Option<DateTime<Utc>>) -> serde_json::Value {
    t.map_or(serde_json::Value::Null, |t| json!(crate::records::rfc3339(t)))
}

async fn run(command: Command, mut config: Config) -> Result<(), Failure> {
    match command {
        Command::Import(a) => {
            gymapi_import::run(*a).await.map_err(|f| Failure { message: f.message, bad_input: f.bad_input })
        }
        Command::Webhook(c) => webhook::run(c, &config).await,
        Command::Device(c) => device::run(c, &config).await,
        Command::Facility(c) => facility::run(c, &config).await,
        Command::Gym(c) => gym::run(c, &config).await,
        Command::Sandbox(c) => gym::sandbox(c, &config).await,
        Command::Key(c) => key::run(c, &config).await,
        Command::User(c) => user::run(c, &config).await,
        Command::Openapi { devices, openapi_version } => {
            let family = if devices { Family::Devices } else { Family::Integration };
            match openapi_version {
                OpenapiVersion::V30 => out(family.document()),
                OpenapiVersion::V31 => out(family.document_3_1()),
            }
            Ok(())
        }
        Command::Migrate { partitions, distribute } => serve::migrate(&config, partitions, distribute).await,
        Command::Serve { bind, demo } => {
            if let Some(b) = bind {
                config.bind = b;
            }
            serve::serve(config, demo).await
        }
        Command::Worker => serve::worker(&config).await,
        Command::Demo { json } => serve::demo(&config, json).await,
    }
}
