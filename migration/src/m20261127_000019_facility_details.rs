//! A facility is a location a gym manages: it gains its own time zone (empty: the gym's), an
//! address, the id the gym's previous system knew it by, and when it was archived.
//!
//! An archived facility keeps its history but takes no new members or devices, and it is archived
//! only once its members and devices have gone elsewhere. The database decides both, so that an
//! archive and a new member racing for one facility cannot leave the member in it: `open_id` is
//! the facility's id while it is open and empty once archived, and members and devices refer to a
//! facility through it. On PostgreSQL that is their foreign key, `(gym_id, facility_id) →
//! facilities (gym_id, open_id)`: archiving a facility anyone still refers to fails, and a member
//! written after the archive finds no open facility. SQLite, whose keys cannot change without
//! building each table again and whose writers take turns, says the same with triggers.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const COLUMNS: [&str; 5] = ["timezone", "address", "legacy_id", "archived_at", "open_id"];

/// The tables that place a row in a facility, and the name of their key to it before.
const PLACED: [(&str, &str); 2] = [("members", "fk_members_gym_facility"), ("devices", "fk_devices_gym_facility_id")];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = [
            string_null("timezone"),
            string_null("address"),
            string_null("legacy_id"),
            ts_null("archived_at"),
            uuid_null("open_id"),
        ];
        for column in columns {
            manager.alter_table(Table::alter().table(a("facilities")).add_column(column).to_owned()).await?;
        }
        manager.create_index(index("facilities", "gym_legacy", &["gym_id", "legacy_id"], true)).await?;
        manager.create_index(index("facilities", "gym_updated", &["gym_id", "updated_at"], false)).await?;
        manager.create_index(index("facilities", "gym_open", &["gym_id", "open_id"], true)).await?;
        let db = manager.get_connection();
        db.execute_unprepared("UPDATE facilities SET open_id = id").await?;
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                for statement in postgres_keys(true) {
                    db.execute_unprepared(&statement).await?;
                }
            }
            _ => {
                db.execute_unprepared(&sqlite_triggers()).await?;
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                for statement in postgres_keys(false) {
                    db.execute_unprepared(&statement).await?;
                }
            }
            _ => {
                let mut drop = String::from("DROP TRIGGER IF EXISTS tr_facilities_archive;\n");
                for (table, _) in PLACED {
                    for on in ["insert", "update"] {
                        drop.push_str(&format!("DROP TRIGGER IF EXISTS tr_{table}_open_facility_{on};\n"));
                    }
                }
                db.execute_unprepared(&drop).await?;
            }
        }
        for name in ["ix_facilities_gym_legacy", "ix_facilities_gym_updated", "ix_facilities_gym_open"] {
            manager.drop_index(Index::drop().name(name).table(a("facilities")).to_owned()).await?;
        }
        for c in COLUMNS {
            manager.alter_table(Table::alter().table(a("facilities")).drop_column(a(c)).to_owned()).await?;
        }
        Ok(())
    }
}

/// Members' and devices' keys to the open facility (`up`), or back to the facility (`down`), one
/// statement each: Citus runs no `ADD CONSTRAINT` beside another subcommand, nor several
/// statements in one.
fn postgres_keys(up: bool) -> Vec<String> {
    let mut statements = Vec::new();
    for (table, before) in PLACED {
        let open = format!("fk_{table}_gym_open_facility");
        let (drop, add, target) = if up { (before, open.as_str(), "open_id") } else { (open.as_str(), before, "id") };
        statements.push(format!("ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {drop}"));
        statements.push(format!(
            "ALTER TABLE {table} ADD CONSTRAINT {add} \
             FOREIGN KEY (gym_id, facility_id) REFERENCES facilities (gym_id, {target})"
        ));
    }
    statements
}

/// A member or device placed in an archived facility is refused; so is archiving a facility that
/// members or devices are in. Each message names the rule (`members::refused` reads it).
fn sqlite_triggers() -> String {
    let mut sql = String::new();
    for (table, _) in PLACED {
        let archived = "EXISTS (SELECT 1 FROM facilities f WHERE f.gym_id = NEW.gym_id \
                        AND f.id = NEW.facility_id AND f.open_id IS NULL)";
        sql.push_str(&format!(
            "CREATE TRIGGER tr_{table}_open_facility_insert BEFORE INSERT ON {table} WHEN {archived} \
             BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: the facility is archived'); END;\n\
             CREATE TRIGGER tr_{table}_open_facility_update BEFORE UPDATE OF facility_id ON {table} WHEN {archived} \
             BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: the facility is archived'); END;\n"
        ));
    }
    sql.push_str(
        "CREATE TRIGGER tr_facilities_archive BEFORE UPDATE OF open_id ON facilities \
         WHEN NEW.open_id IS NULL AND (EXISTS (SELECT 1 FROM members m WHERE m.gym_id = OLD.gym_id \
         AND m.facility_id = OLD.id) OR EXISTS (SELECT 1 FROM devices d WHERE d.gym_id = OLD.gym_id \
         AND d.facility_id = OLD.id)) \
         BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: the facility still has members or devices'); END;\n",
    );
    sql
}
