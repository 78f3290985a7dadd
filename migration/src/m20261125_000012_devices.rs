//! The front desk's devices: `devices` (doors, doorbells, card terminals, fiscal printers, kiosks of
//! a facility), `rings` (a doorbell's ring until answered) and `door_commands` (what a door is told
//! to do, handed out once); members get an optional `access_card`, unique per gym; attendance entries
//! name the device that made them. Tenant tables, keyed by `(gym_id, id)` from the start.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

use crate::columns::*;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let devices = vec![
            uuid("gym_id"),
            uuid("id"),
            uuid("facility_id"),
            string("kind"),
            string("name"),
            ts_null("last_seen_at"),
            ts("created_at"),
            ts("updated_at"),
        ];
        let keys = vec![gym_fk("devices"), tenant_fk("devices", "facility_id", "facilities", false)];
        create_tenant_table(manager, "devices", table("devices", devices, vec![]), keys).await?;
        manager.create_index(index("devices", "gym_created", &["gym_id", "created_at", "id"], false)).await?;
        let rings = vec![
            uuid("gym_id"),
            uuid("id"),
            uuid("device_id"),
            uuid("facility_id"),
            string("state"),
            string_null("message"),
            uuid_null("door_id"),
            uuid_null("command_id"),
            ts("expires_at"),
            ts_null("answered_at"),
            ts("created_at"),
            ts("updated_at"),
        ];
        let keys = vec![tenant_fk("rings", "device_id", "devices", true)];
        create_tenant_table(manager, "rings", table("rings", rings, vec![]), keys).await?;
        manager.create_index(index("rings", "gym_state_created", &["gym_id", "state", "created_at"], false)).await?;
        let commands = vec![
            uuid("gym_id"),
            uuid("id"),
            uuid("device_id"),
            uuid_null("ring_id"),
            string("action"),
            string("state"),
            ts("expires_at"),
            ts_null("delivered_at"),
            ts_null("reported_at"),
            string_null("detail"),
            ts("created_at"),
            ts("updated_at"),
        ];
        let keys = vec![tenant_fk("door_commands", "device_id", "devices", true)];
        create_tenant_table(manager, "door_commands", table("door_commands", commands, vec![]), keys).await?;
        manager
            .create_index(index(
                "door_commands",
                "gym_device_state",
                &["gym_id", "device_id", "state", "created_at"],
                false,
            ))
            .await?;
        manager
            .alter_table(Table::alter().table(a("members")).add_column(string_null("access_card")).to_owned())
            .await?;
        manager.create_index(index("members", "gym_access_card", &["gym_id", "access_card"], true)).await?;
        manager
            .alter_table(Table::alter().table(a("attendance")).add_column(uuid_null("device_id")).to_owned())
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.alter_table(Table::alter().table(a("attendance")).drop_column(a("device_id")).to_owned()).await?;
        manager.drop_index(Index::drop().name("ix_members_gym_access_card").table(a("members")).to_owned()).await?;
        manager.alter_table(Table::alter().table(a("members")).drop_column(a("access_card")).to_owned()).await?;
        for t in ["door_commands", "rings", "devices"] {
            manager.drop_table(Table::drop().table(a(t)).if_exists().to_owned()).await?;
        }
        Ok(())
    }
}
