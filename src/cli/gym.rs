//! `gymapi gym` and `gymapi sandbox`: gyms, their plan features and subscription, and sandboxes.

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand, ValueEnum};
use entity::ids::GymId;
use entity::states::SubscriptionStatus;
use serde_json::json;

use super::{Failure, bad_input, key_cache, open, opt_time, print};
use crate::{
    accounts::{self, Actor, GymUpdate},
    config::Config,
    sandbox::Contents,
};

#[derive(Subcommand, Debug)]
pub(super) enum GymCommand {
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
pub(super) struct GymUpdateArgs {
    id: GymId,
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
pub(super) enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum SubscriptionState {
    Active,
    PastDue,
    Unpaid,
}

#[derive(Subcommand, Debug)]
pub(super) enum SandboxCommand {
    /// Provision the gym's sandbox (one per gym).
    Provision {
        #[arg(long)]
        gym: GymId,
        #[arg(long)]
        json: bool,
    },
    /// Empty the gym's sandbox: every record goes; its keys, webhook endpoints, facilities and
    /// devices stay.
    Reset {
        #[arg(long)]
        gym: GymId,
        /// Then write the fixtures: the records the API document's examples show.
        #[arg(long)]
        fixtures: bool,
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn run(command: GymCommand, config: &Config) -> Result<(), Failure> {
    match command {
        GymCommand::Create { name, timezone, no_api_access, json } => {
            let db = open(config).await?;
            let gym = accounts::create_gym(&db, &name, &timezone, !no_api_access).await?;
            print(json, json!({ "id": gym.id }), || format!("created gym {} ({})", gym.id, gym.name));
            Ok(())
        }
        GymCommand::Update(a) => update(a, config).await,
    }
}

async fn update(a: GymUpdateArgs, config: &Config) -> Result<(), Failure> {
    let db = open(config).await?;
    let grace = match a.grace_ends_at.as_deref() {
        None => None,
        Some("none") => Some(None),
        Some(s) => Some(Some(
            DateTime::parse_from_rfc3339(s)
                .map_err(|_| bad_input(format!("--grace-ends-at must be an RFC 3339 time or `none`, got {s:?}")))?
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
    let gym = accounts::update_gym(&db, &*key_cache(config).await, a.id, update).await?;
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

pub(super) async fn sandbox(command: SandboxCommand, config: &Config) -> Result<(), Failure> {
    let db = open(config).await?;
    match command {
        SandboxCommand::Provision { gym, json } => {
            let sandbox = accounts::provision_sandbox(&db, &Actor::Operator, gym).await?;
            print(json, json!({ "id": sandbox.id }), || {
                format!("provisioned sandbox {} ({})", sandbox.id, sandbox.name)
            });
        }
        SandboxCommand::Reset { gym, fixtures, json } => {
            let contents = if fixtures { Contents::Fixtures } else { Contents::Empty };
            let (sandbox, at) = crate::sandbox::reset(&crate::db::Db::new(db), &Actor::Operator, gym, contents).await?;
            let at = crate::records::rfc3339(at);
            let done = if fixtures { "reset sandbox {sandbox} to the fixtures" } else { "emptied sandbox {sandbox}" };
            let contents = contents.as_str();
            print(json, json!({ "id": sandbox, "reset_at": at, "contents": contents }), || {
                format!("{} at {at}", done.replace("{sandbox}", &sandbox.to_string()))
            });
        }
    }
    Ok(())
}
