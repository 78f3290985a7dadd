//! `gymapi key`: a gym's API keys (the full key is printed once, at creation or roll).

use clap::{Subcommand, ValueEnum};
use entity::ids::GymId;
use serde_json::json;
use uuid::Uuid;

use super::{Failure, key_cache, open, opt_time, print};
use crate::{
    accounts::{self, Actor, KeyStatus},
    config::Config,
    context::Environment,
    records::{now, rfc3339},
};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum EnvArg {
    Live,
    Test,
}

#[derive(Subcommand, Debug)]
pub(super) enum KeyCommand {
    /// Create a key; the full key is printed once.
    Create {
        #[arg(long)]
        gym: GymId,
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
        gym: GymId,
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

pub(super) async fn run(command: KeyCommand, config: &Config) -> Result<(), Failure> {
    match command {
        KeyCommand::Create { gym, env, name, json } => {
            let db = open(config).await?;
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
        KeyCommand::List { gym, json } => {
            let db = open(config).await?;
            let keys = accounts::list_keys(&db, &Actor::Operator, gym).await?;
            let now = now();
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
                    let last = k.last_used_at.map(rfc3339).unwrap_or_else(|| "never".into());
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
        KeyCommand::Roll { key_id, json } => {
            let db = open(config).await?;
            let r = accounts::roll_key(&db, &*key_cache(config).await, &Actor::Operator, key_id, config.key_roll_grace)
                .await?;
            end_device_polls(config, key_id).await;
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
        KeyCommand::Revoke { key_id, json } => {
            let db = open(config).await?;
            let k = accounts::revoke_key(&db, &*key_cache(config).await, &Actor::Operator, key_id).await?;
            end_device_polls(config, key_id).await;
            print(json, json!({ "id": k.id, "revoked_at": opt_time(k.revoked_at) }), || {
                format!("revoked key {}", k.id)
            });
            Ok(())
        }
    }
}

/// Wakes the waiting long polls of the key's devices on every server sharing the configured Redis,
/// so they end at once (401). Without Redis this process reaches no server: a waiting poll ends
/// when its wait runs out, and is handed nothing meanwhile.
async fn end_device_polls(config: &Config, key_id: Uuid) {
    if config.redis_url.is_none() {
        return;
    }
    match crate::wake::Wakes::connect(config, None).await {
        Ok(wakes) => wakes.signal(&crate::wake::key_topic(key_id)).await,
        Err(e) => eprintln!("warning: the key's waiting device polls end when their wait runs out ({e})"),
    }
}
