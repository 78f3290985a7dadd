//! Which tables hold one gym's data and which are read across gyms, and the hash partitioning of
//! the first kind by `gym_id` on PostgreSQL (see docs/scaling.md).
//!
//! A *tenant* table's primary key, unique indexes and foreign keys to other tenant tables all lead
//! with `gym_id`: such a table can be distributed by `gym_id` (Citus), or hash-partitioned by it,
//! and every statement of a request names the gym, so it runs on one node. A *reference* table is
//! small and read across gyms (a key by its fingerprint, a user by their email at sign-in, a
//! session by its token); a distributed deployment keeps a copy of it on every node.

use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, TransactionTrait};

/// Tables that hold one gym's data, keyed by `gym_id`.
pub const TENANT_TABLES: &[&str] = &[
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
    "gym_counters",
    "gym_day_counts",
    "import_counters",
    "api_key_daily_requests",
    "devices",
    "rings",
    "door_commands",
    "idempotency_records",
    "purchase_lines",
    "gym_sequences",
    "payment_jobs",
    "print_jobs",
];

/// Tables read across gyms: small, replicated to every node of a distributed deployment.
pub const REFERENCE_TABLES: &[&str] = &["gyms", "api_keys", "users", "user_sessions", "server_secrets"];

/// How many hash partitions the tenant tables have, when they are partitioned (PostgreSQL).
pub async fn partitions(db: &impl ConnectionTrait) -> Result<Option<u32>, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(None);
    }
    let sql = "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent \
               WHERE p.relname = 'members' AND p.relkind = 'p'";
    let row = db.query_one(Statement::from_string(DbBackend::Postgres, sql)).await?;
    let n: i64 = row.map(|r| r.try_get("", "n")).transpose()?.unwrap_or(0);
    Ok(u32::try_from(n).ok().filter(|n| *n > 0))
}

/// Turns every tenant table that is not partitioned yet into one hash-partitioned by `gym_id` in
/// `modulus` partitions (`<table>_p0`, ...), keeping its rows, indexes (by name), primary key and
/// the foreign keys from and to it, in one transaction. PostgreSQL only; a no-op for tables
/// already partitioned, so it can run after every migration.
pub async fn partition_by_gym<C: ConnectionTrait + TransactionTrait>(db: &C, modulus: u32) -> Result<(), DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Err(DbErr::Migration("partitioning by gym is for PostgreSQL".into()));
    }
    if !(2..=256).contains(&modulus) {
        return Err(DbErr::Migration(format!("partitions must be 2 to 256, got {modulus}")));
    }
    let txn = db.begin().await?;
    for table in TENANT_TABLES {
        partition_table(&txn, table, modulus).await?;
    }
    txn.commit().await
}

async fn strings(
    db: &impl ConnectionTrait,
    sql: &str,
    table: &str,
    columns: &[&str],
) -> Result<Vec<Vec<String>>, DbErr> {
    let rows = db.query_all(Statement::from_sql_and_values(DbBackend::Postgres, sql, [table.into()])).await?;
    rows.iter().map(|r| columns.iter().map(|c| r.try_get::<String>("", c)).collect()).collect()
}

/// One table into its partitioned form (see [`partition_by_gym`]).
async fn partition_table(db: &impl ConnectionTrait, table: &str, modulus: u32) -> Result<(), DbErr> {
    let kind = strings(db, "SELECT CAST(relkind AS TEXT) AS k FROM pg_class WHERE relname = $1", table, &["k"]).await?;
    if kind.first().and_then(|k| k.first()).is_none_or(|k| k != "r") {
        return Ok(());
    }
    // What must be made again on the new table: its constraints (primary key, unique, foreign
    // keys), the indexes that no constraint owns, and the foreign keys of other tables to it. A
    // foreign key to a partitioned table has a constraint per partition under it (`conparentid`):
    // those come back with their parent.
    let own = strings(
        db,
        "SELECT CAST(conname AS TEXT) AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint \
         WHERE conrelid = CAST($1 AS regclass) AND contype IN ('p', 'u', 'f') AND conparentid = 0 \
         ORDER BY contype DESC, conname",
        table,
        &["name", "def"],
    )
    .await?;
    let indexes = strings(
        db,
        "SELECT indexdef AS def FROM pg_indexes i WHERE i.tablename = $1 AND NOT EXISTS \
         (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname AND c.conrelid = CAST($1 AS regclass))",
        table,
        &["def"],
    )
    .await?;
    let incoming = strings(
        db,
        "SELECT CAST(conname AS TEXT) AS name, CAST(CAST(conrelid AS regclass) AS TEXT) AS source, \
         pg_get_constraintdef(oid) AS def \
         FROM pg_constraint WHERE confrelid = CAST($1 AS regclass) AND contype = 'f' AND conrelid <> confrelid \
         AND conparentid = 0",
        table,
        &["name", "source", "def"],
    )
    .await?;
    let mut sql = String::new();
    for fk in &incoming {
        sql.push_str(&format!("ALTER TABLE {} DROP CONSTRAINT \"{}\";\n", fk[1], fk[0]));
    }
    sql.push_str(&format!(
        "ALTER TABLE \"{table}\" RENAME TO \"{table}__unpartitioned\";\n\
         CREATE TABLE \"{table}\" (LIKE \"{table}__unpartitioned\" INCLUDING DEFAULTS) PARTITION BY HASH (gym_id);\n"
    ));
    for i in 0..modulus {
        sql.push_str(&format!(
            "CREATE TABLE \"{table}_p{i}\" PARTITION OF \"{table}\" FOR VALUES WITH (MODULUS {modulus}, REMAINDER {i});\n"
        ));
    }
    sql.push_str(&format!(
        "INSERT INTO \"{table}\" SELECT * FROM \"{table}__unpartitioned\";\nDROP TABLE \"{table}__unpartitioned\";\n"
    ));
    for c in &own {
        sql.push_str(&format!("ALTER TABLE \"{table}\" ADD CONSTRAINT \"{}\" {};\n", c[0], c[1]));
    }
    for ix in &indexes {
        sql.push_str(&format!("{};\n", ix[0]));
    }
    for fk in &incoming {
        sql.push_str(&format!("ALTER TABLE {} ADD CONSTRAINT \"{}\" {};\n", fk[1], fk[0], fk[2]));
    }
    db.execute_unprepared(&sql).await?;
    Ok(())
}
