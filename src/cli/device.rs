//! `gymapi device`: the front-desk devices of a gym and of its sandbox.

use clap::Subcommand;
use entity::ids::GymId;
use serde_json::json;

use super::{Failure, open, opt_time, print};
use crate::{
    accounts::Actor,
    config::Config,
    frontdesk::devices::{self, online},
    records::{now, rfc3339},
};

#[derive(Subcommand, Debug)]
pub(super) enum DeviceCommand {
    /// The devices of a gym and of its sandbox, oldest first, with whether each is online.
    List {
        #[arg(long)]
        gym: GymId,
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn run(command: DeviceCommand, config: &Config) -> Result<(), Failure> {
    let db = open(config).await?;
    match command {
        DeviceCommand::List { gym, json } => {
            let list = devices::all_of(&db, &Actor::Operator, gym).await?;
            let at = now();
            let record = |d: &entity::device::Model| {
                json!({
                    "id": d.id,
                    "gym_id": d.gym_id,
                    "sandbox": d.gym_id != gym,
                    "kind": d.kind,
                    "name": d.name,
                    "facility_id": d.facility_id,
                    "online": online(d, at),
                    "last_seen_at": opt_time(d.last_seen_at),
                    "created_at": rfc3339(d.created_at),
                })
            };
            print(json, json!({"data": list.iter().map(record).collect::<Vec<_>>()}), || {
                let line = |d: &entity::device::Model| {
                    format!(
                        "{}  {:<14} {:<7} {}{}  last seen {}",
                        d.id,
                        d.kind,
                        if online(d, at) { "online" } else { "offline" },
                        d.name,
                        if d.gym_id == gym { "" } else { " (sandbox)" },
                        d.last_seen_at.map_or_else(|| "never".to_string(), rfc3339),
                    )
                };
                if list.is_empty() {
                    "no devices".to_string()
                } else {
                    list.iter().map(line).collect::<Vec<_>>().join("\n")
                }
            });
        }
    }
    Ok(())
}
