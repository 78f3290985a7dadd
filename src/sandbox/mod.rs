//! Resetting a gym's sandbox, a partner's CI fixture (`POST /sandbox/reset` with a test key, the
//! settings area, `gymapi sandbox reset`): every record goes, in one transaction; the API keys,
//! webhook endpoints, facilities and devices stay (openapi.yaml, tag `Sandbox`). A reset to the
//! fixtures then writes them ([`fixtures`]) in the same transaction.
//!
//! The limits store may still hold the sandbox's `Idempotency-Key`s: a test key's repeat that the
//! store answers is checked against the key's database record, which the reset removed
//! (`middleware/idempotency.rs`), so a key sent before the reset is new after it.

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use sea_orm::{ConnectionTrait, Statement};

mod fixtures;
mod front_desk;

use crate::{
    accounts::{self, AccountError, Actor, Permission},
    counters,
    db::{Db, placeholders},
    records::now,
};

/// The tenant tables a reset empties, each row referring to another before that other.
pub const EMPTIED: &[&str] = &[
    "idempotency_records",
    "webhook_deliveries",
    "webhook_events",
    "print_jobs",
    "payment_jobs",
    "purchase_lines",
    "purchases",
    "door_commands",
    "rings",
    "attendance",
    "member_memberships",
    "members",
    "products",
    "membership_plans",
    "subscription_plans",
    "import_counters",
    "gym_sequences",
];

/// The tenant tables a reset keeps: what gym users set up (and the keys' daily usage, which is
/// the owner's account, not the sandbox's data).
pub const KEPT: &[&str] = &["facilities", "devices", "webhook_endpoints", "api_key_daily_requests"];

/// The tenant tables a reset rebuilds from what is left (`counters::recount`).
pub const RECOUNTED: &[&str] = &["gym_counters", "gym_day_counts"];

/// What a sandbox holds after its reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contents {
    Empty,
    /// The records the integration document's examples show ([`fixtures`]).
    Fixtures,
}

impl Contents {
    pub fn as_str(self) -> &'static str {
        match self {
            Contents::Empty => "empty",
            Contents::Fixtures => "fixtures",
        }
    }
}

/// Resets the sandbox of `owner`'s gym to `contents`, for a gym user or an operator; returns the
/// sandbox and when.
pub async fn reset(
    db: &Db,
    actor: &Actor,
    owner: GymId,
    contents: Contents,
) -> accounts::Result<(GymId, DateTime<Utc>)> {
    actor.require(Permission::SettingsManage, owner)?;
    let sandbox = accounts::sandbox_of(db, owner).await?.ok_or(AccountError::SandboxRequired)?;
    Ok((sandbox.id, empty(db, sandbox.id, contents).await?))
}

/// Empties `sandbox`, then writes `contents`, in one transaction: `db`'s, or, for a keyed request,
/// the keyed write's (its `Idempotency-Key`'s record is then written after the reset, in the same
/// transaction).
pub async fn empty(db: &Db, sandbox: GymId, contents: Contents) -> Result<DateTime<Utc>, sea_orm::DbErr> {
    let at = now();
    let backend = db.get_database_backend();
    let run = |sql: &str, values: Vec<sea_orm::Value>| {
        Statement::from_sql_and_values(backend, placeholders(backend, sql), values)
    };
    let txn = crate::db::begin_writing(db).await?;
    for table in EMPTIED {
        txn.execute(run(&format!("DELETE FROM {table} WHERE gym_id = ?"), vec![sandbox.into()])).await?;
    }
    if contents == Contents::Fixtures {
        fixtures::write(&txn, sandbox, at).await?;
        front_desk::write(&txn, sandbox, at).await?;
    }
    // The counts go to what is left (nothing, or the fixtures); the versions move on, so that nothing kept per
    // version (a search's total, the statistics) is read again.
    counters::recount(&txn, sandbox).await?;
    txn.commit().await?;
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tenant_table_is_emptied_kept_or_recounted() {
        let mut named: Vec<&str> = EMPTIED.iter().chain(KEPT).chain(RECOUNTED).copied().collect();
        named.sort_unstable();
        let mut tenant: Vec<&str> = migration::tenancy::TENANT_TABLES.to_vec();
        tenant.sort_unstable();
        assert_eq!(named, tenant, "a tenant table the reset does not name");
    }
}
