//! `gymapi user`: the gym users who sign in to the settings area.

use std::io::Read as _;

use clap::{Subcommand, ValueEnum};
use entity::ids::GymId;
use entity::states::Role;
use serde_json::json;

use super::{Failure, bad_input, open, print};
use crate::{
    accounts::{self, Permission},
    config::Config,
};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum RoleArg {
    Owner,
    Employee,
}

#[derive(Subcommand, Debug)]
pub(super) enum UserCommand {
    /// Create a gym user; the password is read from standard input.
    Create {
        #[arg(long)]
        gym: GymId,
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

pub(super) async fn run(command: UserCommand, config: &Config) -> Result<(), Failure> {
    match command {
        UserCommand::Create { gym, email, role, grants, json } => {
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
            let db = open(config).await?;
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
