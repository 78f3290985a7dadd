//! `gymapi facility`: the locations of a gym and of its sandbox.

use clap::Subcommand;
use entity::ids::GymId;
use serde_json::json;
use uuid::Uuid;

use super::{Failure, key_cache, open, opt_time, print};
use crate::{
    accounts::{self, Actor},
    config::Config,
    facilities::{self, NewFacility},
    records::rfc3339,
};

#[derive(Subcommand, Debug)]
pub(super) enum FacilityCommand {
    /// Add a facility; prints its id.
    Create {
        #[arg(long)]
        gym: GymId,
        /// The facility belongs to the gym's sandbox instead.
        #[arg(long)]
        sandbox: bool,
        #[arg(long)]
        name: String,
        /// Its IANA time zone (default: the gym's).
        #[arg(long)]
        timezone: Option<String>,
        /// Its address (lines separated by newlines).
        #[arg(long)]
        address: Option<String>,
        /// The id the gym's previous system knew it by.
        #[arg(long)]
        legacy_id: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The facilities of a gym and of its sandbox, oldest first.
    List {
        #[arg(long)]
        gym: GymId,
        #[arg(long)]
        json: bool,
    },
    /// Rename a facility.
    Rename {
        id: Uuid,
        #[arg(long)]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Archive a facility: it keeps its history and takes nothing new. Its members and devices
    /// move to `--move-to` (another open facility of the gym), which a facility anyone is
    /// placed in needs.
    Archive {
        id: Uuid,
        #[arg(long)]
        move_to: Option<Uuid>,
        #[arg(long)]
        json: bool,
    },
}

/// A facility as `--json` prints it; `owner` is the gym the command named (a facility of another
/// gym id is of its sandbox).
fn facility_json(f: &entity::facility::Model, owner: GymId) -> serde_json::Value {
    json!({
        "id": f.id,
        "gym_id": f.gym_id,
        "sandbox": f.gym_id != owner,
        "name": f.name,
        "timezone": f.timezone,
        "address": f.address,
        "legacy_id": f.legacy_id,
        "archived_at": opt_time(f.archived_at),
        "created_at": rfc3339(f.created_at),
    })
}

fn line(f: &entity::facility::Model, owner: GymId) -> String {
    let sandbox = if f.gym_id == owner { "" } else { " (sandbox)" };
    let state = f.archived_at.map_or_else(|| "open".to_string(), |t| format!("archived {}", rfc3339(t)));
    format!("{}  {}{}  {}  {}", f.id, f.name, sandbox, f.timezone.as_deref().unwrap_or("gym's time zone"), state)
}

pub(super) async fn run(command: FacilityCommand, config: &Config) -> Result<(), Failure> {
    let db = open(config).await?;
    let actor = Actor::Operator;
    match command {
        FacilityCommand::Create { gym, sandbox, name, timezone, address, legacy_id, json } => {
            let target = accounts::facilities_gym(&db, &actor, gym, sandbox).await?;
            let new = NewFacility { name, timezone, address, legacy_id };
            let f = facilities::create(&db, target, new).await.map_err(accounts::AccountError::from)?;
            print(json, json!({"id": f.id}), || format!("facility {}", f.id));
        }
        FacilityCommand::List { gym, json } => {
            actor.require_view(gym)?;
            let list = facilities::of_gyms(&db, &accounts::with_sandbox(&db, gym).await?)
                .await
                .map_err(accounts::AccountError::from)?;
            let data: Vec<_> = list.iter().map(|f| facility_json(f, gym)).collect();
            print(json, json!({"data": data}), || list.iter().map(|f| line(f, gym)).collect::<Vec<_>>().join("\n"));
        }
        FacilityCommand::Rename { id, name, json } => {
            let (owner, f) = accounts::managed_facility(&db, &actor, id).await?;
            let f = facilities::rename(&db, f, &name).await.map_err(accounts::AccountError::from)?;
            print(json, facility_json(&f, owner), || format!("facility {} renamed {}", f.id, f.name));
        }
        FacilityCommand::Archive { id, move_to, json } => {
            let (owner, _) = accounts::managed_facility(&db, &actor, id).await?;
            let store = key_cache(config).await;
            let a = accounts::archive_facility(&db, store.as_ref(), &actor, owner, id, move_to).await?;
            let mut out = facility_json(&a.facility, owner);
            out["members_moved"] = json!(a.members_moved);
            out["devices_moved"] = json!(a.devices_moved);
            print(json, out, || {
                format!("facility {} archived; {} members and {} devices moved", id, a.members_moved, a.devices_moved)
            });
        }
    }
    Ok(())
}
