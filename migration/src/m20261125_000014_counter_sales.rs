//! Sales at the counter: purchases made by a device of a facility get their items
//! (`purchase_lines`), a receipt number (sequential per gym, from `gym_sequences`), and the jobs
//! that take them to the card terminal (`payment_jobs`) and the fiscal printer (`print_jobs`).
//! Tenant tables, keyed by `gym_id` from the start.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [uuid_null("device_id"), uuid_null("facility_id"), big_null("receipt_number")] {
            manager.alter_table(Table::alter().table(a("purchases")).add_column(column).to_owned()).await?;
        }
        manager.create_index(index("purchases", "gym_receipt", &["gym_id", "receipt_number"], true)).await?;
        let mut lines = Table::create();
        lines
            .table(a("purchase_lines"))
            .if_not_exists()
            .col(uuid("gym_id"))
            .col(uuid("purchase_id"))
            .col(int("position"))
            .col(uuid_null("product_id"))
            .col(string("description"))
            .col(int("quantity"))
            .col(big("unit_amount"))
            .col(big("line_amount"))
            .primary_key(Index::create().col(a("gym_id")).col(a("purchase_id")).col(a("position")));
        let keys = vec![tenant_fk("purchase_lines", "purchase_id", "purchases", true)];
        create_tenant_table(manager, "purchase_lines", lines.to_owned(), keys).await?;
        let mut sequences = Table::create();
        sequences
            .table(a("gym_sequences"))
            .if_not_exists()
            .col(uuid("gym_id"))
            .col(string("name"))
            .col(big("value"))
            .primary_key(Index::create().col(a("gym_id")).col(a("name")))
            .foreign_key(&mut gym_fk("gym_sequences"));
        manager.create_table(sequences.to_owned()).await?;
        let payments = vec![
            uuid("gym_id"),
            uuid("id"),
            uuid("purchase_id"),
            uuid("facility_id"),
            string("state"),
            big("amount"),
            string("currency"),
            uuid_null("device_id"),
            ts_null("reserved_until"),
            string_null("card_scheme"),
            string_null("card_last4"),
            string_null("reason"),
            ts_null("reported_at"),
            ts("created_at"),
            ts("updated_at"),
        ];
        let fk = tenant_fk("payment_jobs", "purchase_id", "purchases", true);
        create_tenant_table(manager, "payment_jobs", table("payment_jobs", payments, vec![]), vec![fk]).await?;
        let claims = ["gym_id", "facility_id", "state", "created_at"];
        manager.create_index(index("payment_jobs", "gym_facility_state", &claims, false)).await?;
        manager.create_index(index("payment_jobs", "gym_purchase", &["gym_id", "purchase_id"], false)).await?;
        let prints = vec![
            uuid("gym_id"),
            uuid("id"),
            uuid("purchase_id"),
            uuid("facility_id"),
            string("state"),
            big("receipt_number"),
            uuid_null("device_id"),
            ts_null("delivered_at"),
            string_null("reason"),
            ts_null("reported_at"),
            ts("created_at"),
            ts("updated_at"),
        ];
        let fk = tenant_fk("print_jobs", "purchase_id", "purchases", true);
        create_tenant_table(manager, "print_jobs", table("print_jobs", prints, vec![]), vec![fk]).await?;
        manager.create_index(index("print_jobs", "gym_facility_state", &claims, false)).await?;
        manager.create_index(index("print_jobs", "gym_purchase", &["gym_id", "purchase_id"], false)).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in ["print_jobs", "payment_jobs", "gym_sequences", "purchase_lines"] {
            manager.drop_table(Table::drop().table(a(t)).if_exists().to_owned()).await?;
        }
        manager.drop_index(Index::drop().name("ix_purchases_gym_receipt").table(a("purchases")).to_owned()).await?;
        for c in ["receipt_number", "facility_id", "device_id"] {
            manager.alter_table(Table::alter().table(a("purchases")).drop_column(a(c)).to_owned()).await?;
        }
        Ok(())
    }
}
