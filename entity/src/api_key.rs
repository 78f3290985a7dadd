use sea_orm::entity::prelude::*;

use crate::{ids::*, states::*};

/// An API key. Only its fingerprint and display prefix are stored.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// The production gym the key belongs to (a test key acts on that gym's sandbox).
    pub gym_id: GymId,
    pub name: String,
    pub environment: Environment,
    /// Lowercase hex SHA-256 of the full key. The key itself is never stored.
    #[sea_orm(unique)]
    pub fingerprint: String,
    /// Environment prefix plus the first 4 random characters, e.g. `svc_live_AbCd`.
    pub prefix: String,
    pub created_at: DateTimeUtc,
    pub last_used_at: Option<DateTimeUtc>,
    /// Set when the key was rolled: it stops working at this time.
    pub expires_at: Option<DateTimeUtc>,
    pub revoked_at: Option<DateTimeUtc>,
    /// The key that replaced this one when it was rolled.
    pub replaced_by_id: Option<Uuid>,
    /// The key ends in a checksum of the rest (every key issued since 2026-11-28).
    pub checksummed: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
