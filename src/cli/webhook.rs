//! `gymapi webhook`: a gym's webhook endpoints (the signing secret is printed once).

use clap::Subcommand;
use entity::ids::GymId;
use serde_json::json;
use uuid::Uuid;

use super::{Failure, open, opt_time, print};
use crate::{accounts::Actor, config::Config, records::rfc3339, webhooks};

#[derive(Subcommand, Debug)]
pub(super) enum WebhookCommand {
    /// Add an endpoint; prints its signing secret (shown once).
    Create {
        #[arg(long)]
        gym: GymId,
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
        gym: GymId,
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

fn endpoint_json(e: &entity::webhook_endpoint::Model) -> serde_json::Value {
    json!({
        "id": e.id,
        "gym_id": e.gym_id,
        "url": e.url,
        "events": e.event_types.as_deref().map(|t| t.split(',').collect::<Vec<_>>()),
        "enabled": e.enabled,
        "disabled_reason": e.disabled_reason,
        "secret_rotated_until": opt_time(e.previous_secret_expires_at),
        "created_at": rfc3339(e.created_at),
    })
}

pub(super) async fn run(command: WebhookCommand, config: &Config) -> Result<(), Failure> {
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
