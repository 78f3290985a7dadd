//! Distributing the schema over a Citus cluster (see docs/scaling.md): the reference tables become
//! reference tables (a copy on every node), the tenant tables are distributed by `gym_id` and
//! colocated, so that one gym's rows of every table sit on the same node. Every key and foreign
//! key is kept.
//!
//! Citus refuses a foreign key from a local table to a distributed one, and a table that refers
//! to a reference table is pulled into Citus's metadata as a "local table", which then cannot be
//! colocated. So the foreign keys of the tables still to be placed are dropped first, every table
//! is placed, and the keys are made again (Citus checks each on its shards).

use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};

use crate::tenancy::{REFERENCE_TABLES, TENANT_TABLES};

/// How a table is placed on the cluster.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Placement {
    /// Not in Citus's metadata (or only as a local table): on the coordinator alone.
    Local,
    /// A copy on every node.
    Reference,
    /// Split into shards by `gym_id`.
    Distributed,
}

/// Whether the database has the Citus extension.
pub async fn has_citus(db: &impl ConnectionTrait) -> Result<bool, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(false);
    }
    Ok(count(db, "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_extension WHERE extname = 'citus'", []).await? > 0)
}

/// Whether the tenant tables are distributed (so that later migrations keep new ones so).
pub async fn is_distributed(db: &impl ConnectionTrait) -> Result<bool, DbErr> {
    Ok(has_citus(db).await? && placement(db, TENANT_TABLES[0]).await? == Placement::Distributed)
}

/// The nodes (`host:port`) whose commits are not synchronous (`synchronous_commit = off`): Citus
/// ends a shard move's catch-up at the source's `pg_current_wal_lsn()`, which can then stand
/// before a commit already answered, and that transaction stays behind on the old placement.
pub async fn asynchronous_nodes(db: &impl ConnectionTrait) -> Result<Vec<String>, DbErr> {
    let sql = "SELECT CAST(n.nodename || ':' || n.nodeport AS TEXT) AS node FROM \
               run_command_on_all_nodes('SHOW synchronous_commit') r JOIN pg_dist_node n ON n.nodeid = r.nodeid \
               WHERE r.success AND r.result = 'off'";
    let rows = db.query_all(Statement::from_string(DbBackend::Postgres, sql)).await?;
    rows.iter().map(|r| r.try_get::<String>("", "node")).collect()
}

/// Where `table` is placed now. A reference table and a Citus local table (a table that refers
/// to a reference table, pulled into the metadata) both have no distribution method (`n`); the
/// first is replicated to every node (`t`), the second is not.
pub async fn placement(db: &impl ConnectionTrait, table: &str) -> Result<Placement, DbErr> {
    let sql = "SELECT CAST(partmethod AS TEXT) AS m, CAST(repmodel AS TEXT) AS r FROM pg_dist_partition \
               WHERE logicalrelid = CAST(CAST($1 AS TEXT) AS regclass)";
    let row = db.query_one(Statement::from_sql_and_values(DbBackend::Postgres, sql, [table.into()])).await?;
    let Some(row) = row else {
        return Ok(Placement::Local);
    };
    let (method, model): (String, String) = (row.try_get("", "m")?, row.try_get("", "r")?);
    Ok(match (method.as_str(), model.as_str()) {
        ("h", _) => Placement::Distributed,
        ("n", "t") => Placement::Reference,
        _ => Placement::Local,
    })
}

/// What [`distribute`] did.
#[derive(Debug, Default)]
pub struct Distributed {
    /// Tables made reference tables by this run.
    pub reference: Vec<String>,
    /// Tables distributed by this run.
    pub distributed: Vec<String>,
}

/// Places every reference table on every node and distributes every tenant table by `gym_id`,
/// colocated with `facilities`; tables already placed are left as they are, so a second run
/// changes nothing and a run after a migration places only the tables it added. Rows are kept.
pub async fn distribute(db: &impl ConnectionTrait) -> Result<Distributed, DbErr> {
    if !has_citus(db).await? {
        return Err(DbErr::Migration(
            "the database has no Citus extension (CREATE EXTENSION citus on the coordinator and on every worker)"
                .into(),
        ));
    }
    let workers = count(db, "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_dist_node WHERE groupid <> 0", []).await?;
    if workers == 0 {
        return Err(DbErr::Migration(
            "the Citus coordinator has no workers (SELECT citus_add_node(host, port) for each worker)".into(),
        ));
    }
    // Tables a later migration makes are placed when it has run (`db::migrate` calls this again).
    let mut pending = Vec::new();
    let wanted = REFERENCE_TABLES.iter().map(|t| (*t, Placement::Reference));
    for (table, target) in wanted.chain(TENANT_TABLES.iter().map(|t| (*t, Placement::Distributed))) {
        if exists(db, table).await? && placement(db, table).await? != target {
            pending.push((table, target));
        }
    }
    let mut done = Distributed::default();
    if pending.is_empty() {
        return Ok(done);
    }
    let keys = foreign_keys(db, &pending).await?;
    for key in &keys {
        db.execute_unprepared(&format!("ALTER TABLE \"{}\" DROP CONSTRAINT \"{}\"", key.table, key.name)).await?;
    }
    // A table Citus pulled in as a local table (it referred to a reference table) goes back to
    // being a plain table before it is placed.
    for (table, _) in &pending {
        if has_metadata(db, table).await? {
            call(db, "SELECT undistribute_table(CAST(CAST($1 AS TEXT) AS regclass))", table).await?;
        }
    }
    for (table, target) in &pending {
        if *target == Placement::Reference {
            call(db, "SELECT create_reference_table(CAST(CAST($1 AS TEXT) AS regclass))", table).await?;
            done.reference.push(table.to_string());
        } else {
            distribute_table(db, table).await?;
            done.distributed.push(table.to_string());
        }
    }
    for key in &keys {
        db.execute_unprepared(&format!(
            "ALTER TABLE \"{}\" ADD CONSTRAINT \"{}\" {}",
            key.table, key.name, key.definition
        ))
        .await?;
    }
    Ok(done)
}

/// Distributes `table` by `gym_id`, colocated with the first tenant table (which starts the group).
pub async fn distribute_table(db: &impl ConnectionTrait, table: &str) -> Result<(), DbErr> {
    let anchor = TENANT_TABLES[0];
    let sql = if table == anchor || placement(db, anchor).await? != Placement::Distributed {
        "SELECT create_distributed_table(CAST(CAST($1 AS TEXT) AS regclass), 'gym_id')".to_string()
    } else {
        format!(
            "SELECT create_distributed_table(CAST(CAST($1 AS TEXT) AS regclass), 'gym_id', colocate_with => '{anchor}')"
        )
    };
    call(db, &sql, table).await
}

struct ForeignKey {
    table: String,
    name: String,
    definition: String,
}

/// The foreign keys from or to any table still to be placed.
async fn foreign_keys(db: &impl ConnectionTrait, pending: &[(&str, Placement)]) -> Result<Vec<ForeignKey>, DbErr> {
    let names: Vec<String> = pending.iter().map(|(t, _)| t.to_string()).collect();
    let sql = "SELECT CAST(c.conrelid AS regclass)::text AS tbl, CAST(c.conname AS TEXT) AS name, \
               pg_get_constraintdef(c.oid) AS def FROM pg_constraint c \
               WHERE c.contype = 'f' AND c.conparentid = 0 AND c.connamespace = CAST('public' AS regnamespace) \
               AND (CAST(c.conrelid AS regclass)::text = ANY($1) OR CAST(c.confrelid AS regclass)::text = ANY($1)) \
               ORDER BY 1, 2";
    let rows = db.query_all(Statement::from_sql_and_values(DbBackend::Postgres, sql, [names.into()])).await?;
    rows.iter()
        .map(|r| {
            Ok(ForeignKey {
                table: r.try_get::<String>("", "tbl")?.trim_matches('"').to_string(),
                name: r.try_get("", "name")?,
                definition: r.try_get("", "def")?,
            })
        })
        .collect()
}

async fn exists(db: &impl ConnectionTrait, table: &str) -> Result<bool, DbErr> {
    let sql = "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_class \
               WHERE relname = $1 AND relnamespace = CAST('public' AS regnamespace)";
    Ok(count(db, sql, [table.into()]).await? > 0)
}

async fn has_metadata(db: &impl ConnectionTrait, table: &str) -> Result<bool, DbErr> {
    let sql = "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM pg_dist_partition \
               WHERE logicalrelid = CAST(CAST($1 AS TEXT) AS regclass)";
    Ok(count(db, sql, [table.into()]).await? > 0)
}

async fn call(db: &impl ConnectionTrait, sql: &str, table: &str) -> Result<(), DbErr> {
    db.query_one(Statement::from_sql_and_values(DbBackend::Postgres, sql, [table.into()])).await?;
    Ok(())
}

/// The `n` that `sql` (a `COUNT(*)`) answers for `values`.
async fn count<const N: usize>(
    db: &impl ConnectionTrait,
    sql: &str,
    values: [sea_orm_migration::sea_orm::Value; N],
) -> Result<i64, DbErr> {
    let row = db.query_one(Statement::from_sql_and_values(DbBackend::Postgres, sql, values)).await?;
    Ok(row.map(|r| r.try_get::<i64>("", "n")).transpose()?.unwrap_or(0))
}
