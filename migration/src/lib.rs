//! Schema migrations of gymapi. The same migrations run on SQLite and PostgreSQL; [`tenancy`] says
//! which tables hold one gym's data and partitions them by gym on PostgreSQL.

pub use sea_orm_migration::prelude::*;

mod columns;

pub mod citus;
mod m20261122_000001_initial;
mod m20261122_000002_counters_and_search;
mod m20261122_000003_webhook_dispatch;
mod m20261122_000004_settings_sessions;
mod m20261122_000005_key_usage;
mod m20261123_000006_revenue_index;
mod m20261123_000007_tenant_search_index;
mod m20261123_000008_member_facility_key;
mod m20261124_000009_sqlite_search_cover;
mod m20261124_000010_counter_shards;
mod m20261125_000011_tenant_keys;
mod m20261125_000012_devices;
mod m20261125_000013_idempotency_records;
mod m20261125_000014_counter_sales;
mod m20261126_000015_server_secrets;
mod m20261126_000016_member_membership_lists;
mod m20261127_000017_keyed_write_guard;
mod m20261127_000018_frozen_receipts;
mod m20261127_000019_facility_details;
mod m20261128_000020_key_checksums;
mod m20261128_000021_receipt_facility;
mod m20261129_000022_member_page_order;
mod m20261129_000023_day_counts;
mod m20261129_000024_event_log;
mod m20261201_000025_purchase_day_counts;
mod m20261201_000026_member_entry_counts;
mod m20261202_000027_payment_takers;
pub mod tenancy;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261122_000001_initial::Migration),
            Box::new(m20261122_000002_counters_and_search::Migration),
            Box::new(m20261122_000003_webhook_dispatch::Migration),
            Box::new(m20261122_000004_settings_sessions::Migration),
            Box::new(m20261122_000005_key_usage::Migration),
            Box::new(m20261123_000006_revenue_index::Migration),
            Box::new(m20261123_000007_tenant_search_index::Migration),
            Box::new(m20261123_000008_member_facility_key::Migration),
            Box::new(m20261124_000009_sqlite_search_cover::Migration),
            Box::new(m20261124_000010_counter_shards::Migration),
            Box::new(m20261125_000011_tenant_keys::Migration),
            Box::new(m20261125_000012_devices::Migration),
            Box::new(m20261125_000013_idempotency_records::Migration),
            Box::new(m20261125_000014_counter_sales::Migration),
            Box::new(m20261126_000015_server_secrets::Migration),
            Box::new(m20261126_000016_member_membership_lists::Migration),
            Box::new(m20261127_000017_keyed_write_guard::Migration),
            Box::new(m20261127_000018_frozen_receipts::Migration),
            Box::new(m20261127_000019_facility_details::Migration),
            Box::new(m20261128_000020_key_checksums::Migration),
            Box::new(m20261128_000021_receipt_facility::Migration),
            Box::new(m20261129_000022_member_page_order::Migration),
            Box::new(m20261129_000023_day_counts::Migration),
            Box::new(m20261129_000024_event_log::Migration),
            Box::new(m20261201_000025_purchase_day_counts::Migration),
            Box::new(m20261201_000026_member_entry_counts::Migration),
            Box::new(m20261202_000027_payment_takers::Migration),
        ]
    }
}
