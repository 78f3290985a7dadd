use sea_orm::entity::prelude::*;

use crate::ids::*;

/// A keyed write that ran, and its response, kept for the idempotency window.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_records")]
pub struct Model {
    /// The gym the key acted on (a sandbox's own id for a test key).
    #[sea_orm(primary_key, auto_increment = false)]
    pub gym_id: GymId,
    /// SHA-256 of the `Idempotency-Key`, in hex.
    #[sea_orm(primary_key, auto_increment = false)]
    pub key_digest: String,
    /// SHA-256 of the request's method, path, query and body, in hex.
    pub fingerprint: String,
    pub status: i32,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
