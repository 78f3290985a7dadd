//! The schema as the database holds it: every table with a `gym_id` is a tenant table whose keys
//! lead with `gym_id`, or one of the few reference tables read across gyms (docs/scaling.md); and
//! the migration to those keys keeps every row of a database filled by the schema before it.

use std::collections::BTreeMap;

use entity::ids::GymId;
use gymapi::{accounts::Actor, webhooks};
use migration::{Migrator, MigratorTrait, tenancy};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use uuid::Uuid;

use crate::common::{TestApp, bare_database, citus::on_citus, partitions};

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
    if on_citus() {
        assert_placed(&app.db).await;
    }
}

/// On Citus: every reference table is on every node, every tenant table distributed by `gym_id`
/// and colocated with the others, so that one gym's rows of every table sit on one node.
async fn assert_placed(db: &DatabaseConnection) {
    use migration::citus::{Placement, placement};
    for table in tenancy::REFERENCE_TABLES {
        assert_eq!(placement(db, table).await.unwrap(), Placement::Reference, "{table}");
    }
    let sql = "SELECT CAST(logicalrelid AS TEXT) AS t, CAST(colocationid AS BIGINT) AS c, \
               CAST(column_to_column_name(logicalrelid, partkey) AS TEXT) AS k FROM pg_dist_partition WHERE partmethod = 'h'";
    let placed: BTreeMap<String, (i64, String)> =
        rows(db, sql).await.iter().map(|r| (text(r, "t"), (r.try_get("", "c").unwrap(), text(r, "k")))).collect();
    let groups: std::collections::BTreeSet<i64> = placed.values().map(|(c, _)| *c).collect();
    assert_eq!(groups.len(), 1, "the tenant tables are in {} colocation groups: {placed:?}", groups.len());
    for table in tenancy::TENANT_TABLES {
        assert_eq!(placed.get(*table).map(|(_, k)| k.as_str()), Some("gym_id"), "{table} is not distributed by gym_id");
    }
}

/// On Citus, a database distributed part way through the migrations keeps the tables of the
/// later ones distributed, with their foreign keys (as `gymapi serve` migrates it).
#[tokio::test]
async fn later_migrations_keep_new_tables_distributed() {
    if !on_citus() {
        return;
    }
    let (url, _scratch) = bare_database().await;
    let db = gymapi::db::connect(&url).await.unwrap();
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_string()).collect();
    let devices = names.iter().position(|n| n == "m20261125_000012_devices").unwrap();
    Migrator::up(&db, Some(u32::try_from(devices).unwrap())).await.unwrap();
    let first = gymapi::db::distribute(&db).await.unwrap().unwrap();
    assert!(!first.distributed.is_empty());
    gymapi::db::migrate(&db).await.unwrap();
    assert_placed(&db).await;
    check_keys(&tables_with_gym(&db).await);
    db.close().await.unwrap();
}

/// The database as `gymapi serve` opens it: on tenant tables partitioned by gym every connection
/// asks PostgreSQL for generic plans, on plain ones PostgreSQL chooses (docs/performance.md).
#[tokio::test]
async fn partitioned_tables_are_read_with_generic_plans() {
    let app = TestApp::spawn().await;
    if app.db.get_database_backend() != DbBackend::Postgres {
        return;
    }
    // A connection as `gymapi serve` opens it (on Citus the test's own connection is another).
    let served = gymapi::db::open(&app.database_url).await.unwrap();
    let mode = text(&rows(&served, "SHOW plan_cache_mode").await[0], "plan_cache_mode");
    let wanted = match (partitions(), on_citus()) {
        (Some(_), _) => "force_generic_plan",
        (None, true) => "force_custom_plan",
        (None, false) => "auto",
    };
    assert_eq!(mode, wanted);
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

/// Fills a database of the schema before the tenant keys as that schema's writers did, in SQL (the
/// entities follow the newest schema): a gym with two facilities, 40 members, plans, memberships,
/// check-ins, products, sales, counters, and a webhook endpoint with three events and deliveries.
/// Returns the gym and the endpoint.
async fn fill_before_keys(db: &DatabaseConnection) -> (Uuid, Uuid) {
    let backend = db.get_database_backend();
    let at = chrono::Utc::now();
    let run = |sql: &str, values: Vec<sea_orm::Value>| {
        let sql = gymapi::db::placeholders(backend, sql);
        async move { db.execute(Statement::from_sql_and_values(backend, sql, values)).await.unwrap() }
    };
    let (gym, endpoint) = (Uuid::now_v7(), Uuid::now_v7());
    run(
        "INSERT INTO gyms (id, name, timezone, parent_gym_id, api_access, device_access, subscription_status, \
         grace_ends_at, created_at, updated_at) VALUES (?, 'Old', 'UTC', NULL, true, true, 'active', NULL, ?, ?)",
        vec![gym.into(), at.into(), at.into()],
    )
    .await;
    let facilities = [Uuid::now_v7(), Uuid::now_v7()];
    for f in facilities {
        run(
            "INSERT INTO facilities (id, gym_id, name, created_at, updated_at) VALUES (?, ?, 'F', ?, ?)",
            vec![f.into(), gym.into(), at.into(), at.into()],
        )
        .await;
    }
    let (plan, product) = (Uuid::now_v7(), Uuid::now_v7());
    run(
        "INSERT INTO membership_plans (id, gym_id, name, description, price_amount, currency, duration_days, \
         visit_limit, status, legacy_id, created_at, updated_at) VALUES (?, ?, 'P', NULL, 900, 'EUR', 30, NULL, 'active', NULL, ?, ?)",
        vec![plan.into(), gym.into(), at.into(), at.into()],
    )
    .await;
    run(
        "INSERT INTO products (id, gym_id, name, description, sku, price_amount, currency, status, legacy_id, \
         created_at, updated_at) VALUES (?, ?, 'Bar', NULL, NULL, 250, 'EUR', 'active', NULL, ?, ?)",
        vec![product.into(), gym.into(), at.into(), at.into()],
    )
    .await;
    for i in 0..40 {
        let member = Uuid::now_v7();
        run(
            "INSERT INTO members (id, gym_id, facility_id, first_name, last_name, email, email_normalized, phone, \
             gender, date_of_birth, city, country, status, legacy_id, visits_count, last_visit_at, created_at, \
             updated_at, search_text) VALUES (?, ?, ?, 'Ada', ?, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
             'active', NULL, 1, ?, ?, ?, 'ada')",
            vec![
                member.into(),
                gym.into(),
                facilities[i % 2].into(),
                format!("L{i}").into(),
                at.into(),
                at.into(),
                at.into(),
            ],
        )
        .await;
        run(
            "INSERT INTO member_memberships (id, gym_id, member_id, membership_plan_id, subscription_plan_id, \
             starts_on, ends_on, legacy_id, created_at, updated_at) VALUES (?, ?, ?, ?, NULL, ?, NULL, NULL, ?, ?)",
            vec![
                Uuid::now_v7().into(),
                gym.into(),
                member.into(),
                plan.into(),
                at.date_naive().into(),
                at.into(),
                at.into(),
            ],
        )
        .await;
        run(
            "INSERT INTO attendance (id, gym_id, facility_id, member_id, kind, status, occurred_at, legacy_id, \
             created_at, updated_at) VALUES (?, ?, ?, ?, 'check_in', 'granted', ?, NULL, ?, ?)",
            vec![
                Uuid::now_v7().into(),
                gym.into(),
                facilities[i % 2].into(),
                member.into(),
                at.into(),
                at.into(),
                at.into(),
            ],
        )
        .await;
        run(
            "INSERT INTO purchases (id, gym_id, member_id, product_id, description, quantity, total_amount, currency, \
             payment_status, purchased_at, legacy_id, created_at, updated_at) \
             VALUES (?, ?, ?, ?, 'Bar', 1, 250, 'EUR', 'paid', ?, NULL, ?, ?)",
            vec![Uuid::now_v7().into(), gym.into(), member.into(), product.into(), at.into(), at.into(), at.into()],
        )
        .await;
    }
    // The counters as that schema's writers kept them (today's `recount` also writes tables that
    // schema did not have yet).
    for gymapi::counters::Counted { table, label, .. } in gymapi::counters::ALL {
        run(
            &format!(
                "INSERT INTO gym_counters (gym_id, name, value) SELECT gym_id, name, n FROM (\
                 SELECT gym_id, '{table}' AS name, COUNT(*) AS n FROM {table} WHERE gym_id = ? GROUP BY gym_id \
                 UNION ALL SELECT gym_id, '{table}.' || {label}, COUNT(*) FROM {table} WHERE gym_id = ? \
                 GROUP BY gym_id, {label}) AS counted"
            ),
            vec![gym.into(), gym.into()],
        )
        .await;
    }
    run(
        "INSERT INTO webhook_endpoints (id, gym_id, url, event_types, enabled, secret, previous_secret, \
         previous_secret_expires_at, created_at, updated_at, disabled_reason) \
         VALUES (?, ?, 'https://example.com/h', NULL, true, 'whsec_x', NULL, NULL, ?, ?, NULL)",
        vec![endpoint.into(), gym.into(), at.into(), at.into()],
    )
    .await;
    for _ in 0..3 {
        let event = Uuid::now_v7();
        run(
            "INSERT INTO webhook_events (id, gym_id, event_type, payload, created_at) VALUES (?, ?, 'ping', '{}', ?)",
            vec![event.into(), gym.into(), at.into()],
        )
        .await;
        run(
            "INSERT INTO webhook_deliveries (id, gym_id, endpoint_id, event_id, event_type, status, attempts, \
             attempt_count, next_attempt_at, created_at, updated_at, claimed_until) \
             VALUES (?, ?, ?, ?, 'ping', 'pending', '[]', 0, ?, ?, ?, NULL)",
            vec![Uuid::now_v7().into(), gym.into(), endpoint.into(), event.into(), at.into(), at.into(), at.into()],
        )
        .await;
    }
    (gym, endpoint)
}

/// A database filled by the schema before the tenant keys moves to them, and back, and is
/// partitioned, without losing a row.
#[tokio::test]
async fn moving_to_the_tenant_keys_keeps_every_row() {
    let (url, _scratch) = bare_database().await;
    let db = gymapi::db::connect(&url).await.unwrap();
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_string()).collect();
    let before_keys = names.iter().position(|n| n == "m20261125_000011_tenant_keys").unwrap();
    let after_keys = u32::try_from(names.len() - before_keys).unwrap();
    Migrator::up(&db, Some(u32::try_from(before_keys).unwrap())).await.unwrap();
    let (gym, endpoint) = fill_before_keys(&db).await;
    let filled = counts(&db).await;
    assert!(filled["members"] == 40 && filled["webhook_deliveries"] == 3 && filled["facilities"] == 2, "{filled:?}");

    // The tables as they were, row for row; tables made by later migrations are empty, but for the
    // counts of check-ins per day, which their migration fills in (checked below).
    let same = |now: BTreeMap<String, i64>, what: &str| {
        for (table, n) in now.iter().filter(|(t, _)| *t != "gym_day_counts") {
            assert_eq!(filled.get(table).copied().unwrap_or(0), *n, "{table}: {what}");
        }
        assert!(filled.keys().all(|t| now.contains_key(t)), "{what}: a table went missing");
    };
    Migrator::up(&db, None).await.unwrap();
    same(counts(&db).await, "rows moved to the tenant keys");
    check_keys(&tables_with_gym(&db).await);
    let found = webhooks::find_endpoint(&db, &Actor::Operator, endpoint).await.unwrap();
    assert_eq!(found.gym_id, GymId::from(gym));

    Migrator::down(&db, Some(after_keys)).await.unwrap();
    assert_eq!(counts(&db).await, filled, "rows moved back to the keys by id");
    Migrator::up(&db, None).await.unwrap();
    same(counts(&db).await, "rows moved to the tenant keys again");
    if on_citus() {
        let placed = gymapi::db::distribute(&db).await.unwrap().unwrap();
        assert_eq!(placed.distributed.len(), migration::tenancy::TENANT_TABLES.len());
        same(counts(&db).await, "rows distributed over the workers");
        check_keys(&tables_with_gym(&db).await);
        let again = gymapi::db::distribute(&db).await.unwrap().unwrap();
        assert!(again.reference.is_empty() && again.distributed.is_empty(), "a second run placed {again:?}");
    } else if db.get_database_backend() == DbBackend::Postgres {
        gymapi::db::partition(&db, 4).await.unwrap();
        same(counts(&db).await, "rows moved to the partitioned tables");
        check_keys(&tables_with_gym(&db).await);
    }
    // The check-ins' counts per month and day, filled in by their migration (last: it recounts).
    crate::common::assert_day_counts_hold(&db, GymId::from(gym)).await;
    db.close().await.unwrap();
}
