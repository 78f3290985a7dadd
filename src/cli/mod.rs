//! The operators' CLI (DESIGN.md §9). Scripts depend on it: names, flags and `--json` shapes are
//! stable. Exit codes: 0 success, 1 failure of the service or database, 2 bad input.

mod import;

use std::{io::Read as _, process::ExitCode};

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use entity::states::{Role, SubscriptionStatus};
use sea_orm::DatabaseConnection;
use serde_json::json;
use uuid::Uuid;

use crate::{
    accounts::{self, AccountError, Actor, GymUpdate, KeyStatus, Permission},
    config::Config,
    context::Environment,
    db, demo,
    state::AppState,
};

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
    Migrate,
    /// Create the demo gym with data (once) and print a fresh live and test key.
    Demo {
        #[arg(long)]
        json: bool,
    },
    /// Print openapi.yaml.
    Openapi,
    /// Gyms.
    #[command(subcommand)]
    Gym(GymCommand),
    /// Sandboxes.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Gym users of the settings area.
    #[command(subcommand)]
    User(UserCommand),
    /// Import a CSV or JSON Lines file through the API, in batches; run it again to resume.
    Import(ImportArgs),
    /// Send webhook deliveries (beside `serve` instances started with GYMAPI_WEBHOOK_DISPATCH=0).
    Worker,
    /// Webhook endpoints of a gym or its sandbox.
    #[command(subcommand)]
    Webhook(WebhookCommand),
}

#[derive(Subcommand, Debug)]
enum WebhookCommand {
    /// Add an endpoint; prints its signing secret (shown once).
    Create {
        #[arg(long)]
        gym: Uuid,
        /// The endpoint receives the events of the gym's sandbox instead.
        #[arg(long)]
        sandbox: bool,
        #[arg(long)]
        url: String,
        /// Event types, comma separated (default: all).
        #[arg(long, value_delimiter = ',')]
        events: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// The endpoints of a gym and of its sandbox.
    List {
        #[arg(long)]
        gym: Uuid,
        #[arg(long)]
        json: bool,
    },
    /// Stop sending to an endpoint.
    Disable {
        id: Uuid,
        #[arg(long)]
        json: bool,
    },
    /// Send to an endpoint again.
    Enable {
        id: Uuid,
        #[arg(long)]
        json: bool,
    },
    /// A new signing secret; the old one keeps signing for 24 h.
    RotateSecret {
        id: Uuid,
        #[arg(long)]
        json: bool,
    },
    /// Delete an endpoint and its deliveries.
    Delete { id: Uuid },
    /// Send a `ping` event to an endpoint.
    Ping {
        id: Uuid,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct ImportArgs {
    /// The server (`/api/v1` is added unless the URL ends with it).
    #[arg(long, env = "GYMAPI_BASE_URL", default_value = "http://127.0.0.1:8080")]
    base_url: String,
    /// The API key (or GYMAPI_KEY, which keeps it out of the process list).
    #[arg(long, env = "GYMAPI_KEY", hide_env_values = true)]
    key: String,
    /// plans, members, memberships, attendance, access_logs, products or purchases.
    #[arg(long)]
    entity: String,
    /// A `.csv` file with a header row, or JSON Lines (one row object per line).
    file: std::path::PathBuf,
    /// Rows per request (1 to 500).
    #[arg(long, default_value_t = 500)]
    batch_size: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Validate every batch on the server and report; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Rename a CSV column: COLUMN=FIELD (nested fields with dots, e.g. price.amount); COLUMN=- skips it.
    #[arg(long = "map", value_name = "COLUMN=FIELD")]
    map: Vec<String>,
    /// Retries of a batch after a 5xx or a network error (a 429 always waits and retries).
    #[arg(long, default_value_t = 8)]
    max_retries: u32,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum GymCommand {
    /// Create a gym with its first facility.
    Create {
        #[arg(long)]
        name: String,
        /// IANA time zone.
        #[arg(long, default_value = "UTC")]
        timezone: String,
        /// Create the gym on a plan without API access.
        #[arg(long)]
        no_api_access: bool,
        #[arg(long)]
        json: bool,
    },
    /// Change a gym's plan features and subscription state.
    Update(GymUpdateArgs),
}

#[derive(Args, Debug)]
struct GymUpdateArgs {
    id: Uuid,
    #[arg(long)]
    api_access: Option<OnOff>,
    #[arg(long)]
    device_access: Option<OnOff>,
    /// `unpaid` blocks requests (402) once the grace period has ended (at once without one);
    /// `past_due` blocks them only after --grace-ends-at.
    #[arg(long)]
    subscription: Option<SubscriptionState>,
    /// End of the grace period (RFC 3339), or `none`.
    #[arg(long)]
    grace_ends_at: Option<String>,
    /// IANA time zone.
    #[arg(long)]
    timezone: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SubscriptionState {
    Active,
    PastDue,
    Unpaid,
}

#[derive(Subcommand, Debug)]
enum SandboxCommand {
    /// Provision the gym's sandbox (one per gym).
    Provision {
        #[arg(long)]
        gym: Uuid,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum EnvArg {
    Live,
    Test,
}

#[derive(Subcommand, Debug)]
enum KeyCommand {
    /// Create a key; the full key is printed once.
    Create {
        #[arg(long)]
        gym: Uuid,
        #[arg(long = "env")]
        env: EnvArg,
        #[arg(long)]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// List a gym's keys.
    List {
        #[arg(long)]
        gym: Uuid,
        #[arg(long)]
        json: bool,
    },
    /// Roll a key: a new key now, the old one keeps working for the grace period.
    Roll {
        key_id: Uuid,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key: it stops working at once.
    Revoke {
        key_id: Uuid,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum RoleArg {
    Owner,
    Employee,
}

#[derive(Subcommand, Debug)]
enum UserCommand {
    /// Create a gym user; the password is read from standard input.
    Create {
        #[arg(long)]
        gym: Uuid,
        #[arg(long)]
        email: String,
        #[arg(long)]
        role: RoleArg,
        /// A permission to grant (repeatable): settings.manage.
        #[arg(long = "grant")]
        grants: Vec<String>,
        #[arg(long)]
        json: bool,
    },
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
    let db = db::connect(&config.database_url).await?;
    db::migrate(&db).await?;
    Ok(db)
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
        println!("{value}");
    } else {
        println!("{}", human());
    }
}

fn opt_time(t: Option<DateTime<Utc>>) -> serde_json::Value {
    t.map_or(serde_json::Value::Null, |t| json!(crate::records::rfc3339(t)))
}

async fn import(a: ImportArgs) -> Result<(), Failure> {
    use self::import::{self as client, ClientError};
    let mut map = Vec::with_capacity(a.map.len());
    for m in &a.map {
        let (column, field) =
            m.split_once('=').ok_or_else(|| bad_input(format!("--map {m}: expected COLUMN=FIELD")))?;
        map.push((column.trim().to_string(), field.trim().to_string()));
    }
    let base = a.base_url.trim_end_matches('/');
    let base_url = if base.ends_with("/api/v1") { base.to_string() } else { format!("{base}/api/v1") };
    let opts = client::Options {
        base_url,
        key: a.key,
        entity: a.entity.clone(),
        file: a.file,
        batch_size: a.batch_size,
        jobs: a.jobs,
        dry_run: a.dry_run,
        map,
        max_retries: a.max_retries,
        progress: !a.quiet && !a.json,
    };
    let summary = client::run(opts).await.map_err(|e| match e {
        ClientError::BadInput(m) => bad_input(m),
        ClientError::Service(m) => Failure { message: m, bad_input: false },
    })?;
    print(a.json, summary.to_json(&a.entity, a.dry_run), || {
        format!(
            "{}{}: {} rows in {} batches ({} answered from an earlier run), {} created, {} already there, {:.1} s ({:.0} rows/s); {} waits for the rate limit, {} retries",
            a.entity,
            if a.dry_run { " (dry run)" } else { "" },
            summary.rows,
            summary.batches,
            summary.replayed,
            summary.created,
            summary.skipped,
            summary.seconds,
            summary.rows_per_second(),
            summary.rate_limited,
            summary.retried,
        )
    });
    Ok(())
}

fn endpoint_json(e: &entity::webhook_endpoint::Model) -> serde_json::Value {
    json!({
        "id": e.id,
        "gym_id": e.gym_id,
        "url": e.url,
        "events": e.event_types.as_deref().map(|t| t.split(',').collect::<Vec<_>>()),
        "enabled": e.enabled,
        "disabled_reason": e.disabled_reason,
        "secret_rotated_until": opt_time(e.previous_secret_expires_at),
        "created_at": crate::records::rfc3339(e.created_at),
    })
}

async fn webhook(command: WebhookCommand, config: &Config) -> Result<(), Failure> {
    use crate::webhooks;
    let db = open(config).await?;
    let actor = Actor::Operator;
    match command {
        WebhookCommand::Create { gym, sandbox, url, events, json } => {
            let e = webhooks::create_endpoint(&db, &actor, gym, sandbox, &url, &events, config.webhook_allow_private)
                .await?;
            print(json, json!({"id": e.model.id, "secret": e.secret, "url": e.model.url}), || {
                format!("endpoint {}\nsecret {} (shown once: keep it to verify signatures)", e.model.id, e.secret)
            });
        }
        WebhookCommand::List { gym, json } => {
            let list = webhooks::list_endpoints(&db, &actor, gym).await?;
            print(json, json!({"data": list.iter().map(endpoint_json).collect::<Vec<_>>()}), || {
                list.iter()
                    .map(|e| {
                        format!(
                            "{}  {}  {}  {}",
                            e.id,
                            if e.enabled { "enabled " } else { "disabled" },
                            e.event_types.as_deref().unwrap_or("all events"),
                            e.url
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        WebhookCommand::Disable { id, json } => {
            let e = webhooks::set_enabled(&db, &actor, id, false).await?;
            print(json, endpoint_json(&e), || format!("endpoint {} disabled", e.id));
        }
        WebhookCommand::Enable { id, json } => {
            let e = webhooks::set_enabled(&db, &actor, id, true).await?;
            print(json, endpoint_json(&e), || format!("endpoint {} enabled", e.id));
        }
        WebhookCommand::RotateSecret { id, json } => {
            let e = webhooks::rotate_secret(&db, &actor, id).await?;
            print(
                json,
                json!({"id": e.model.id, "secret": e.secret, "previous_valid_until": opt_time(e.model.previous_secret_expires_at)}),
                || {
                    format!(
                        "new secret {} (the old one signs too until {})",
                        e.secret,
                        opt_time(e.model.previous_secret_expires_at)
                    )
                },
            );
        }
        WebhookCommand::Delete { id } => {
            webhooks::delete_endpoint(&db, &actor, id).await?;
        }
        WebhookCommand::Ping { id, json } => {
            let delivery = webhooks::ping(&db, &actor, id).await?;
            print(json, json!({"delivery_id": delivery}), || format!("ping queued: delivery {delivery}"));
        }
    }
    Ok(())
}

async fn run(command: Command, mut config: Config) -> Result<(), Failure> {
    match command {
        Command::Import(a) => import(a).await,
        Command::Webhook(w) => webhook(w, &config).await,
        Command::Openapi => {
            print!("{}", crate::contract::DOCUMENT);
            Ok(())
        }
        Command::Migrate => {
            open(&config).await?;
            eprintln!("migrations applied ({})", db::redact(&config.database_url));
            Ok(())
        }
        Command::Serve { bind, demo } => {
            if let Some(b) = bind {
                config.bind = b;
            }
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
        Command::Worker => {
            let db = open(&config).await?;
            let wake = std::sync::Arc::new(tokio::sync::Notify::new());
            let dispatcher = crate::webhooks::dispatch::Dispatcher::new(db, &config, wake)?;
            tracing::info!("gymapi worker: sending webhook deliveries");
            dispatcher.run(crate::server::shutdown_signal()).await;
            Ok(())
        }
        Command::Demo { json } => {
            let db = open(&config).await?;
            let keys = demo::ensure(&db, &*key_cache(&config).await).await?;
            print(json, keys.to_json(), || keys.banner(&format!("http://{}", config.bind)));
            Ok(())
        }
        Command::Gym(GymCommand::Create { name, timezone, no_api_access, json }) => {
            let db = open(&config).await?;
            let gym = accounts::create_gym(&db, &name, &timezone, !no_api_access).await?;
            print(json, json!({ "id": gym.id }), || format!("created gym {} ({})", gym.id, gym.name));
            Ok(())
        }
        Command::Gym(GymCommand::Update(a)) => {
            let db = open(&config).await?;
            let grace = match a.grace_ends_at.as_deref() {
                None => None,
                Some("none") => Some(None),
                Some(s) => Some(Some(
                    DateTime::parse_from_rfc3339(s)
                        .map_err(|_| {
                            bad_input(format!("--grace-ends-at must be an RFC 3339 time or `none`, got {s:?}"))
                        })?
                        .with_timezone(&Utc),
                )),
            };
            let update = GymUpdate {
                api_access: a.api_access.map(|v| matches!(v, OnOff::On)),
                device_access: a.device_access.map(|v| matches!(v, OnOff::On)),
                subscription_status: a.subscription.map(|s| match s {
                    SubscriptionState::Active => SubscriptionStatus::Active,
                    SubscriptionState::PastDue => SubscriptionStatus::PastDue,
                    SubscriptionState::Unpaid => SubscriptionStatus::Unpaid,
                }),
                grace_ends_at: grace,
                timezone: a.timezone,
            };
            let gym = accounts::update_gym(&db, &*key_cache(&config).await, a.id, update).await?;
            print(
                a.json,
                json!({
                    "id": gym.id, "api_access": gym.api_access, "device_access": gym.device_access,
                    "subscription": gym.subscription_status, "grace_ends_at": opt_time(gym.grace_ends_at), "timezone": gym.timezone,
                }),
                || format!("updated gym {}", gym.id),
            );
            Ok(())
        }
        Command::Sandbox(SandboxCommand::Provision { gym, json }) => {
            let db = open(&config).await?;
            let sandbox = accounts::provision_sandbox(&db, &Actor::Operator, gym).await?;
            print(json, json!({ "id": sandbox.id }), || {
                format!("provisioned sandbox {} ({})", sandbox.id, sandbox.name)
            });
            Ok(())
        }
        Command::Key(KeyCommand::Create { gym, env, name, json }) => {
            let db = open(&config).await?;
            let env = match env {
                EnvArg::Live => Environment::Live,
                EnvArg::Test => Environment::Test,
            };
            let k = accounts::create_key(&db, &Actor::Operator, gym, env, &name).await?;
            print(
                json,
                json!({ "id": k.model.id, "key": k.key, "prefix": k.model.prefix, "environment": k.model.environment }),
                || {
                    format!(
                        "created {} key {}\n\n  {}\n\nThis is the only time the full key is shown. Store it now.",
                        k.model.environment, k.model.id, k.key
                    )
                },
            );
            Ok(())
        }
        Command::Key(KeyCommand::List { gym, json }) => {
            let db = open(&config).await?;
            let keys = accounts::list_keys(&db, &Actor::Operator, gym).await?;
            let now = crate::records::now();
            let rows: Vec<serde_json::Value> = keys
                .iter()
                .map(|k| {
                    json!({
                        "id": k.id, "name": k.name, "environment": k.environment, "prefix": k.prefix,
                        "status": KeyStatus::of(k, now).label(now), "last_used_at": opt_time(k.last_used_at),
                        "expires_at": opt_time(k.expires_at),
                    })
                })
                .collect();
            print(json, json!({ "data": rows }), || {
                let mut out = format!(
                    "{:<36}  {:<5}  {:<14}  {:<18}  {:<20}  NAME",
                    "ID", "ENV", "PREFIX", "STATUS", "LAST USED"
                );
                for k in &keys {
                    let last = k.last_used_at.map(crate::records::rfc3339).unwrap_or_else(|| "never".into());
                    out.push_str(&format!(
                        "\n{:<36}  {:<5}  {:<14}  {:<18}  {:<20}  {}",
                        k.id,
                        k.environment,
                        k.prefix,
                        KeyStatus::of(k, now).label(now),
                        last.chars().take(20).collect::<String>(),
                        k.name
                    ));
                }
                out
            });
            Ok(())
        }
        Command::Key(KeyCommand::Roll { key_id, json }) => {
            let db = open(&config).await?;
            let r =
                accounts::roll_key(&db, &*key_cache(&config).await, &Actor::Operator, key_id, config.key_roll_grace)
                    .await?;
            print(
                json,
                json!({ "id": r.new.model.id, "key": r.new.key, "retiring_id": r.retiring.id, "expires_at": opt_time(r.retiring.expires_at) }),
                || {
                    format!(
                        "rolled key {} into {}\n\n  {}\n\nThe old key works until {}.",
                        r.retiring.id,
                        r.new.model.id,
                        r.new.key,
                        opt_time(r.retiring.expires_at)
                    )
                },
            );
            Ok(())
        }
        Command::Key(KeyCommand::Revoke { key_id, json }) => {
            let db = open(&config).await?;
            let k = accounts::revoke_key(&db, &*key_cache(&config).await, &Actor::Operator, key_id).await?;
            print(json, json!({ "id": k.id, "revoked_at": opt_time(k.revoked_at) }), || {
                format!("revoked key {}", k.id)
            });
            Ok(())
        }
        Command::User(UserCommand::Create { gym, email, role, grants, json }) => {
            let grants = grants
                .iter()
                .map(|g| {
                    Permission::parse(g)
                        .ok_or_else(|| bad_input(format!("unknown permission {g:?} (known: settings.manage)")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut password = String::new();
            std::io::stdin()
                .read_to_string(&mut password)
                .map_err(|e| bad_input(format!("cannot read the password from standard input: {e}")))?;
            let password = password.trim_end_matches(['\r', '\n']);
            let db = open(&config).await?;
            let role = match role {
                RoleArg::Owner => Role::Owner,
                RoleArg::Employee => Role::Employee,
            };
            let user = accounts::create_user(&db, gym, &email, role, &grants, password).await?;
            print(json, json!({ "id": user.id, "email": user.email, "role": user.role }), || {
                format!("created user {} ({})", user.id, user.email)
            });
            Ok(())
        }
    }
}
