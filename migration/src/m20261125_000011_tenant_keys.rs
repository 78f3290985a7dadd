//! Every tenant table is keyed by `(gym_id, id)` instead of `id`, and its foreign keys to other
//! tenant tables carry `gym_id` too (members to facilities, webhook deliveries to endpoints), so
//! the tables can be distributed or hash-partitioned by gym (see `tenancy` and docs/scaling.md).
//! Every row is kept. Tables keyed by gym already (counters, import counters, usage) are left as
//! they are.
//!
//! PostgreSQL changes the keys in place, in the migration's transaction. SQLite cannot change a
//! table's key: each table is built again from its own `CREATE TABLE` with the new key, its rows
//! copied and its indexes made again, all in one transaction with foreign keys off, after a check
//! that every row's references hold within its gym.

use sea_orm_migration::{
    prelude::*,
    sea_orm::{ConnectionTrait, DbBackend, Statement},
};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The tables whose key was `id` alone.
const KEYED_BY_ID: &[&str] = &[
    "facilities",
    "members",
    "membership_plans",
    "subscription_plans",
    "member_memberships",
    "attendance",
    "products",
    "purchases",
    "webhook_endpoints",
    "webhook_events",
    "webhook_deliveries",
];

/// A reference to another tenant table, as `(table, column, referenced table)`.
const REFERENCES: &[(&str, &str, &str)] =
    &[("members", "facility_id", "facilities"), ("webhook_deliveries", "endpoint_id", "webhook_endpoints")];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        check_references(manager.get_connection()).await?;
        match manager.get_database_backend() {
            DbBackend::Postgres => postgres_up(manager.get_connection()).await,
            _ => sqlite_rebuild(manager.get_connection(), Direction::Up).await,
        }
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        match manager.get_database_backend() {
            DbBackend::Postgres => postgres_down(manager.get_connection()).await,
            _ => sqlite_rebuild(manager.get_connection(), Direction::Down).await,
        }
    }
}

/// Refuses to move a database in which a reference points into another gym (the new keys could
/// not hold it), naming the first one found.
async fn check_references(db: &impl ConnectionTrait) -> Result<(), DbErr> {
    for (table, column, target) in REFERENCES {
        let sql = format!(
            "SELECT CAST(t.id AS TEXT) AS id FROM {table} t WHERE NOT EXISTS \
             (SELECT 1 FROM {target} r WHERE r.gym_id = t.gym_id AND r.id = t.{column}) LIMIT 1"
        );
        if let Some(row) = db.query_one(Statement::from_string(db.get_database_backend(), sql)).await? {
            let id: String = row.try_get("", "id")?;
            return Err(DbErr::Migration(format!(
                "{table} {id}: its {column} is not a row of {target} of the same gym; fix it before migrating"
            )));
        }
    }
    Ok(())
}

async fn postgres_up(db: &impl ConnectionTrait) -> Result<(), DbErr> {
    let mut sql = String::from(
        "ALTER TABLE members DROP CONSTRAINT IF EXISTS fk_members_gym_facility;\n\
         ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS fk_webhook_deliveries_endpoint_id;\n",
    );
    for table in KEYED_BY_ID {
        sql.push_str(&format!(
            "ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, ADD CONSTRAINT {table}_pkey PRIMARY KEY (gym_id, id);\n"
        ));
    }
    sql.push_str(
        "DROP INDEX IF EXISTS ux_facilities_gym_id;\n\
         ALTER TABLE members ADD CONSTRAINT fk_members_gym_facility \
           FOREIGN KEY (gym_id, facility_id) REFERENCES facilities (gym_id, id);\n\
         ALTER TABLE webhook_deliveries ADD CONSTRAINT fk_webhook_deliveries_gym_endpoint \
           FOREIGN KEY (gym_id, endpoint_id) REFERENCES webhook_endpoints (gym_id, id);\n",
    );
    db.execute_unprepared(&sql).await?;
    Ok(())
}

async fn postgres_down(db: &impl ConnectionTrait) -> Result<(), DbErr> {
    let mut sql = String::from(
        "ALTER TABLE members DROP CONSTRAINT IF EXISTS fk_members_gym_facility;\n\
         ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS fk_webhook_deliveries_gym_endpoint;\n",
    );
    for table in KEYED_BY_ID {
        sql.push_str(&format!(
            "ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, ADD CONSTRAINT {table}_pkey PRIMARY KEY (id);\n"
        ));
    }
    sql.push_str(
        "CREATE UNIQUE INDEX IF NOT EXISTS ux_facilities_gym_id ON facilities (gym_id, id);\n\
         ALTER TABLE members ADD CONSTRAINT fk_members_gym_facility \
           FOREIGN KEY (gym_id, facility_id) REFERENCES facilities (gym_id, id);\n\
         ALTER TABLE webhook_deliveries ADD CONSTRAINT fk_webhook_deliveries_endpoint_id \
           FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id);\n",
    );
    db.execute_unprepared(&sql).await?;
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// The `CREATE TABLE` of `table` with the key of `direction`, from the one SQLite keeps.
fn rekeyed(create: &str, table: &str, direction: Direction) -> Result<String, DbErr> {
    let id_key = "\"id\" uuid_text NOT NULL PRIMARY KEY";
    let id_plain = "\"id\" uuid_text NOT NULL,";
    let gym_key = ", PRIMARY KEY (\"gym_id\", \"id\") )";
    let mut out =
        create.replacen(&format!("CREATE TABLE \"{table}\""), &format!("CREATE TABLE \"{table}__rekeyed\""), 1);
    let unexpected = || DbErr::Migration(format!("{table}: its CREATE TABLE is not the one the migrations wrote"));
    match direction {
        Direction::Up => {
            if !out.contains(id_key) || !out.trim_end().ends_with(')') {
                return Err(unexpected());
            }
            out = out.replacen(id_key, "\"id\" uuid_text NOT NULL", 1);
            let end = out.trim_end().len() - 1;
            out = format!("{}, PRIMARY KEY (\"gym_id\", \"id\") )", out[..end].trim_end());
        }
        Direction::Down => {
            if !out.trim_end().ends_with(gym_key) || !out.contains(id_plain) {
                return Err(unexpected());
            }
            out = out.replacen(id_plain, &format!("{id_key},"), 1);
            out = format!("{} )", out.trim_end().trim_end_matches(gym_key));
        }
    }
    for (from, column, target) in REFERENCES.iter().filter(|(from, ..)| *from == table) {
        let old = format!("FOREIGN KEY (\"{column}\") REFERENCES \"{target}\" (\"id\")");
        let new = format!("FOREIGN KEY (\"gym_id\", \"{column}\") REFERENCES \"{target}\" (\"gym_id\", \"id\")");
        let (find, put) = if direction == Direction::Up { (&old, &new) } else { (&new, &old) };
        if !out.contains(find.as_str()) {
            return Err(DbErr::Migration(format!("{from}: no foreign key {find}")));
        }
        out = out.replacen(find.as_str(), put, 1);
    }
    Ok(out)
}

/// Builds every table of [`KEYED_BY_ID`] again with the key of `direction`, in one statement
/// string (so one connection runs it: SQLite's `foreign_keys` setting is per connection, and is
/// ignored inside a transaction).
async fn sqlite_rebuild(db: &impl ConnectionTrait, direction: Direction) -> Result<(), DbErr> {
    let mut sql = String::from("PRAGMA foreign_keys = OFF;\nBEGIN IMMEDIATE;\n");
    for table in KEYED_BY_ID {
        let schema = db
            .query_all(Statement::from_sql_and_values(
                DbBackend::Sqlite,
                "SELECT type, sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL ORDER BY type DESC",
                [(*table).into()],
            ))
            .await?;
        let mut indexes = Vec::new();
        let mut create = None;
        for row in schema {
            let (kind, text): (String, String) = (row.try_get("", "type")?, row.try_get("", "sql")?);
            match kind.as_str() {
                "table" => create = Some(rekeyed(&text, table, direction)?),
                _ => indexes.push(text),
            }
        }
        let create = create.ok_or_else(|| DbErr::Migration(format!("no table {table}")))?;
        sql.push_str(&format!(
            "{create};\nINSERT INTO \"{table}__rekeyed\" SELECT * FROM \"{table}\";\nDROP TABLE \"{table}\";\n\
             ALTER TABLE \"{table}__rekeyed\" RENAME TO \"{table}\";\n"
        ));
        for ix in indexes {
            sql.push_str(&format!("{ix};\n"));
        }
    }
    sql.push_str("COMMIT;\nPRAGMA foreign_keys = ON;\n");
    db.execute_unprepared(&sql).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMBERS: &str = "CREATE TABLE \"members\" ( \"id\" uuid_text NOT NULL PRIMARY KEY, \"gym_id\" uuid_text NOT NULL, \
        \"facility_id\" uuid_text NOT NULL, FOREIGN KEY (\"gym_id\") REFERENCES \"gyms\" (\"id\"), \
        FOREIGN KEY (\"facility_id\") REFERENCES \"facilities\" (\"id\") )";

    #[test]
    fn a_table_is_keyed_by_gym_and_back() {
        let up = rekeyed(MEMBERS, "members", Direction::Up).unwrap();
        assert_eq!(
            up,
            "CREATE TABLE \"members__rekeyed\" ( \"id\" uuid_text NOT NULL, \"gym_id\" uuid_text NOT NULL, \
             \"facility_id\" uuid_text NOT NULL, FOREIGN KEY (\"gym_id\") REFERENCES \"gyms\" (\"id\"), \
             FOREIGN KEY (\"gym_id\", \"facility_id\") REFERENCES \"facilities\" (\"gym_id\", \"id\"), \
             PRIMARY KEY (\"gym_id\", \"id\") )"
        );
        let renamed = up.replacen("members__rekeyed", "members", 1);
        let down = rekeyed(&renamed, "members", Direction::Down).unwrap();
        assert_eq!(down, MEMBERS.replacen("\"members\"", "\"members__rekeyed\"", 1));
        assert!(rekeyed("CREATE TABLE \"members\" (\"id\" text)", "members", Direction::Up).is_err());
    }
}
