//! What the webhook dispatcher needs beside the outbox tables of the first migration.
//!
//! - `webhook_deliveries.claimed_until`: a dispatcher's lease on a delivery it is sending. Another
//!   instance skips the row until the lease ends, so a delivery is sent once; a dispatcher that dies
//!   mid-send leaves a lease that runs out, and the delivery is sent again.
//! - `webhook_endpoints.disabled_reason`: why an endpoint stopped receiving (a `410 Gone`, or a
//!   person), for the settings area.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn a(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(a("webhook_deliveries"))
                    .add_column(ColumnDef::new(a("claimed_until")).timestamp_with_time_zone().null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(a("webhook_endpoints"))
                    .add_column(ColumnDef::new(a("disabled_reason")).string().null())
                    .to_owned(),
            )
            .await?;
        // `GET /webhook-deliveries?endpoint_id=...` and the settings page's per-endpoint view.
        manager
            .create_index(
                Index::create()
                    .name("ix_webhook_deliveries_gym_endpoint")
                    .table(a("webhook_deliveries"))
                    .col(a("gym_id"))
                    .col(a("endpoint_id"))
                    .col(a("created_at"))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop().name("ix_webhook_deliveries_gym_endpoint").table(a("webhook_deliveries")).to_owned(),
            )
            .await?;
        for (table, column) in [("webhook_endpoints", "disabled_reason"), ("webhook_deliveries", "claimed_until")] {
            manager.alter_table(Table::alter().table(a(table)).drop_column(a(column)).to_owned()).await?;
        }
        Ok(())
    }
}
