//! The schema as the database holds it: every table with a `gym_id` is a tenant table whose keys
//! lead with `gym_id`, or one of the few reference tables read across gyms (docs/scaling.md); and
//! the migration to those keys keeps every row of a database filled by the schema before it.

use std::collections::BTreeMap;

use gymapi::{accounts::Actor, webhooks};
use migration::{Migrator, MigratorTrait, tenancy};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde_json::json;

use crate::common::{TestApp, fresh_database, partitions};

/// The keys of a table: `(kind, name, columns)`, where kind is `primary key`, `unique` or
/// `foreign key to <table>`.
type Keys = Vec<(String, String, Vec<String>)>;

async fn rows(db: &DatabaseConnection, sql: &str) -> Vec<sea_orm::QueryResult> {
    db.query_all(Statement::from_string(db.get_database_backend(), sql.to_string())).await.unwrap()
}

fn text(row: &sea_orm::QueryResult, column: &str) -> String {
    row.try_get::<String>("", column).unwrap()
}

/// Every table with a `gym_id` column (partitions left out), with its keys.
async fn tables_with_gym(db: &DatabaseConnection) -> BTreeMap<String, Keys> {
    let mut out = BTreeMap::new();
    match db.get_database_backend() {
        DbBackend::Postgres => {
            let tables = rows(
                db,
                "SELECT CAST(c.relname AS TEXT) AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'gym_id' \
                 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition",
            )
            .await;
            for t in tables.iter().map(|r| text(r, "t")) {
                let keys = rows(
                    db,
                    &format!(
                        "SELECT CAST(c.conname AS TEXT) AS name, CAST(c.contype AS TEXT) AS kind, \
                         COALESCE(CAST(f.relname AS TEXT), '') AS target, \
                         (SELECT string_agg(CAST(a.attname AS TEXT), ',' ORDER BY k.i) FROM unnest(c.conkey) WITH ORDINALITY AS k(n, i) \
                          JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n) AS columns \
                         FROM pg_constraint c LEFT JOIN pg_class f ON f.oid = c.confrelid \
                         WHERE c.conrelid = '{t}'::regclass AND c.contype IN ('p', 'u', 'f') AND c.conparentid = 0 \
                         UNION ALL SELECT CAST(i.relname AS TEXT), 'u', '', \
                         (SELECT string_agg(CAST(a.attname AS TEXT), ',' ORDER BY k.i) FROM unnest(x.indkey) WITH ORDINALITY AS k(n, i) \
                          JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n) \
                         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
                         WHERE x.indrelid = '{t}'::regclass AND x.indisunique AND NOT x.indisprimary \
                         AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)"
                    ),
                )
                .await;
                let keys = keys
                    .iter()
                    .map(|r| {
                        let kind = match text(r, "kind").as_str() {
                            "p" => "primary key".to_string(),
                            "u" => "unique".to_string(),
                            _ => format!("foreign key to {}", text(r, "target")),
                        };
                        (kind, text(r, "name"), text(r, "columns").split(',').map(str::to_string).collect())
                    })
                    .collect();
                out.insert(t, keys);
            }
        }
        _ => {
            let tables = rows(db, "SELECT name AS t FROM sqlite_master WHERE type = 'table'").await;
            for t in tables.iter().map(|r| text(r, "t")) {
                let columns = rows(db, &format!("SELECT name, pk FROM pragma_table_info('{t}')")).await;
                if !columns.iter().any(|c| text(c, "name") == "gym_id") {
                    continue;
                }
                let mut primary: Vec<(i64, String)> = columns
                    .iter()
                    .map(|c| (c.try_get::<i64>("", "pk").unwrap(), text(c, "name")))
                    .filter(|(pk, _)| *pk > 0)
                    .collect();
                primary.sort();
                let mut keys: Keys =
                    vec![("primary key".into(), "pk".into(), primary.into_iter().map(|(_, c)| c).collect())];
                for ix in rows(db, &format!("SELECT name FROM pragma_index_list('{t}') WHERE \"unique\" = 1")).await {
                    let name = text(&ix, "name");
                    let cols = rows(db, &format!("SELECT name FROM pragma_index_info('{name}') ORDER BY seqno")).await;
                    keys.push(("unique".into(), name, cols.iter().map(|c| text(c, "name")).collect()));
                }
                let fks = rows(
                    db,
                    &format!(
                        "SELECT id, \"table\" AS target, \"from\" FROM pragma_foreign_key_list('{t}') ORDER BY id, seq"
                    ),
                )
                .await;
                let mut by_id: BTreeMap<i64, (String, Vec<String>)> = BTreeMap::new();
                for fk in fks {
                    let entry =
                        by_id.entry(fk.try_get::<i64>("", "id").unwrap()).or_insert((text(&fk, "target"), vec![]));
                    entry.1.push(text(&fk, "from"));
                }
                for (id, (target, cols)) in by_id {
                    keys.push((format!("foreign key to {target}"), format!("fk{id}"), cols));
                }
                out.insert(t, keys);
            }
        }
    }
    out
}

/// Every primary key, unique key and foreign key (to another tenant table) of every table with a
/// `gym_id` leads with it, but in the reference tables; every such table is one or the other.
fn check_keys(tables: &BTreeMap<String, Keys>) {
    for (table, keys) in tables {
        let reference = tenancy::REFERENCE_TABLES.contains(&table.as_str());
        assert!(
            reference || tenancy::TENANT_TABLES.contains(&table.as_str()),
            "{table} has a gym_id but is neither a tenant nor a reference table (migration::tenancy)"
        );
        if reference {
            continue;
        }
        assert!(keys.iter().any(|(kind, ..)| kind == "primary key"), "{table} has no primary key");
        for (kind, name, columns) in keys {
            let to_reference = tenancy::REFERENCE_TABLES.iter().any(|r| *kind == format!("foreign key to {r}"));
            if to_reference {
                continue;
            }
            assert_eq!(columns.first().map(String::as_str), Some("gym_id"), "{table}: {kind} {name} on {columns:?}");
        }
    }
}

#[tokio::test]
async fn every_key_of_a_tenant_table_leads_with_its_gym() {
    let app = TestApp::spawn().await;
    let tables = tables_with_gym(&app.db).await;
    assert!(tables.len() >= tenancy::TENANT_TABLES.len(), "{:?}", tables.keys());
    check_keys(&tables);
    if partitions().is_some() {
        for table in tenancy::TENANT_TABLES {
            let kind =
                rows(&app.db, &format!("SELECT CAST(relkind AS TEXT) AS k FROM pg_class WHERE relname = '{table}'"))
                    .await;
            assert_eq!(text(&kind[0], "k"), "p", "{table} is not partitioned");
        }
    }
}

/// Rows of every table but the migrations' own.
async fn counts(db: &DatabaseConnection) -> BTreeMap<String, i64> {
    let list = match db.get_database_backend() {
        DbBackend::Postgres => {
            "SELECT CAST(c.relname AS TEXT) AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                                WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        }
        _ => "SELECT name AS t FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    };
    let mut out = BTreeMap::new();
    for t in rows(db, list).await.iter().map(|r| text(r, "t")).filter(|t| t != "seaql_migrations") {
        let n = rows(db, &format!("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM \"{t}\"")).await;
        out.insert(t, n[0].try_get::<i64>("", "n").unwrap());
    }
    out
}

/// A database filled by the schema before the tenant keys (the demo gym, a webhook endpoint, its
/// events and deliveries) moves to them, and back, and is partitioned, without losing a row.
#[tokio::test]
async fn moving_to_the_tenant_keys_keeps_every_row() {
    let (url, _scratch) = fresh_database().await;
    let db = gymapi::db::connect(&url).await.unwrap();
    let before_keys = Migrator::migrations().len() - 1;
    Migrator::up(&db, Some(u32::try_from(before_keys).unwrap())).await.unwrap();
    let store = gymapi::limits::MemoryStore::default();
    let demo = gymapi::demo::ensure(&db, &store).await.unwrap();
    let hook =
        webhooks::create_endpoint(&db, &Actor::Operator, demo.gym_id, false, "https://example.com/h", &[], false)
            .await
            .unwrap();
    for _ in 0..3 {
        assert!(webhooks::emit(&db, demo.gym_id, webhooks::EventType::MemberCreated, json!({})).await.unwrap());
    }
    let filled = counts(&db).await;
    assert!(filled["members"] > 0 && filled["webhook_deliveries"] == 3 && filled["facilities"] >= 3, "{filled:?}");

    Migrator::up(&db, None).await.unwrap();
    assert_eq!(counts(&db).await, filled, "rows moved to the tenant keys");
    check_keys(&tables_with_gym(&db).await);
    let found = webhooks::find_endpoint(&db, &Actor::Operator, hook.model.id).await.unwrap();
    assert_eq!(found.gym_id, demo.gym_id);

    Migrator::down(&db, Some(1)).await.unwrap();
    assert_eq!(counts(&db).await, filled, "rows moved back to the keys by id");
    Migrator::up(&db, None).await.unwrap();
    assert_eq!(counts(&db).await, filled);
    if db.get_database_backend() == DbBackend::Postgres {
        gymapi::db::partition(&db, 4).await.unwrap();
        assert_eq!(counts(&db).await, filled, "rows moved to the partitioned tables");
        check_keys(&tables_with_gym(&db).await);
    }
    db.close().await.unwrap();
}
