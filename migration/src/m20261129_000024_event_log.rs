//! Events as a log a client reads (`GET /events`): the gym's events in the list's order (time,
//! then `id`), and by type in that order, along an index each; a delivery found by its event, so
//! that events past their time are removed with their deliveries without reading every delivery.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Table, index name, columns.
const ADDED: [(&str, &str, &[&str]); 3] = [
    ("webhook_events", "gym_created_id", &["gym_id", "created_at", "id"]),
    ("webhook_events", "gym_type_created_id", &["gym_id", "event_type", "created_at", "id"]),
    ("webhook_deliveries", "gym_event", &["gym_id", "event_id"]),
];

/// The index the first of them replaces (its columns lead it).
const REPLACED: (&str, &str, &[&str]) = ("webhook_events", "gym_created", &["gym_id", "created_at"]);

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (table, name, columns) in ADDED {
            manager.create_index(index(table, name, columns, false)).await?;
        }
        let (table, old, _) = REPLACED;
        manager.drop_index(Index::drop().name(format!("ix_{table}_{old}")).table(a(table)).to_owned()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let (table, old, columns) = REPLACED;
        manager.create_index(index(table, old, columns, false)).await?;
        for (table, name, _) in ADDED {
            manager.drop_index(Index::drop().name(format!("ix_{table}_{name}")).table(a(table)).to_owned()).await?;
        }
        Ok(())
    }
}
