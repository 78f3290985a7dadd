//! The front desk's devices: `devices` (doors, doorbells, card terminals, fiscal printers, kiosks of
//! a facility), `rings` (a doorbell's ring until answered) and `door_commands` (what a door is told
//! to do, handed out once); members get an optional `access_card`, unique per gym; attendance entries
//! name the device that made them. Tenant tables, keyed by `(gym_id, id)` from the start.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn a(name: &str) -> Alias {
    Alias::new(name)
}

fn uuid(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).uuid().not_null().to_owned()
}

fn uuid_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).uuid().null().to_owned()
}

fn string(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).string().not_null().to_owned()
}

fn string_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).string().null().to_owned()
}

fn ts(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).timestamp_with_time_zone().not_null().to_owned()
}

fn ts_null(name: &str) -> ColumnDef {
    ColumnDef::new(a(name)).timestamp_with_time_zone().null().to_owned()
}

/// `(gym_id, column)` of `table` references `(gym_id, id)` of `target`.
fn tenant_fk(table: &str, column: &str, target: &str, cascade: bool) -> ForeignKeyCreateStatement {
    let mut fk = ForeignKey::create();
    fk.name(format!("fk_{table}_gym_{column}"))
        .from_tbl(a(table))
        .from_col(a("gym_id"))
        .from_col(a(column))
        .to_tbl(a(target))
        .to_col(a("gym_id"))
        .to_col(a("id"));
    if cascade {
        fk.on_delete(ForeignKeyAction::Cascade);
    }
    fk.to_owned()
}

fn gym_fk(table: &str) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .name(format!("fk_{table}_gym_id"))
        .from(a(table), a("gym_id"))
        .to(a("gyms"), a("id"))
        .to_owned()
}

fn table(name: &str, columns: Vec<ColumnDef>, foreign_keys: Vec<ForeignKeyCreateStatement>) -> TableCreateStatement {
    let mut t = Table::create();
    t.table(a(name)).if_not_exists();
    for c in columns {
        t.col(c);
    }
    t.primary_key(Index::create().col(a("gym_id")).col(a("id")));
    for mut fk in foreign_keys {
        t.foreign_key(&mut fk);
    }
    t.to_owned()
}

fn index(table: &str, name: &str, columns: &[&str], unique: bool) -> IndexCreateStatement {
    let mut ix = Index::create();
    ix.name(format!("ix_{table}_{name}")).table(a(table));
    for c in columns {
        ix.col(a(c));
    }
    if unique {
        ix.unique();
    }
    ix.to_owned()
}

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
        manager
            .create_table(table(
                "devices",
                devices,
                vec![gym_fk("devices"), tenant_fk("devices", "facility_id", "facilities", false)],
            ))
            .await?;
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
        manager.create_table(table("rings", rings, vec![tenant_fk("rings", "device_id", "devices", true)])).await?;
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
        manager
            .create_table(table(
                "door_commands",
                commands,
                vec![tenant_fk("door_commands", "device_id", "devices", true)],
            ))
            .await?;
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
