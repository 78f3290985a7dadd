//! Bulk import from a previous gym system: `POST /import/{entity}`, one file per kind of row, on
//! the rules of [`batch`] and the statements of [`sql`]. The `gymapi import` command that sends
//! files here is `crate::cli::import`.
//!
//! A batch is validated whole before anything is written: every row whose `legacy_id` is new must
//! be valid and its references (`member_legacy_id`, ...) must name rows imported earlier. The
//! lookups are one query per referenced kind per batch. The write is one transaction: one
//! multi-row `INSERT ... ON CONFLICT (gym_id, legacy_id) DO NOTHING RETURNING ...` per table, the
//! list counters, the member visit figures and the import counters. Rows another request inserted
//! meanwhile are skipped by the conflict clause, so `created` is always what this batch wrote.

mod attendance;
mod batch;
mod facilities;
mod members;
mod memberships;
mod plans;
mod products;
mod sql;

use std::collections::HashMap;

use entity::ids::GymId;
use entity::import_counter;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

pub use attendance::attendance;
pub use batch::in_batch;
pub use facilities::facilities;
pub use members::members;
pub use memberships::memberships;
pub use plans::plans;
pub use products::{products, purchases};

use crate::{
    errors::ApiError,
    openapi::{ImportEntity, ImportEntityStatus, ImportStatus, ImportStatusObject},
};

/// Every kind in import order, with zeros for the kinds not imported yet.
pub async fn status(db: &impl ConnectionTrait, gym_id: GymId) -> Result<ImportStatus, ApiError> {
    let rows = import_counter::Entity::find().filter(import_counter::Column::GymId.eq(gym_id)).all(db).await?;
    let mut by_entity: HashMap<String, import_counter::Model> =
        rows.into_iter().map(|r| (r.entity.clone(), r)).collect();
    let entities = ImportEntity::ALL
        .iter()
        .map(|&entity| {
            let row = by_entity.remove(entity.as_str());
            ImportEntityStatus {
                entity,
                received: row.as_ref().map_or(0, |r| r.received),
                created: row.as_ref().map_or(0, |r| r.created),
                skipped: row.as_ref().map_or(0, |r| r.skipped),
                last_batch_at: row.and_then(|r| r.last_batch_at).into(),
            }
        })
        .collect();
    Ok(ImportStatus { object: ImportStatusObject::ImportStatus, entities })
}
