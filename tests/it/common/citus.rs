//! The Citus pass (`TEST_CITUS=1`, `TEST_DATABASE_URL` naming a coordinator, as `.ci/citus url`
//! prints it): every test's database is made on the coordinator and on each worker, with the
//! extension and the workers registered in it, then migrated and distributed as `gymapi migrate
//! --distribute` does.

use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};

/// Whether the suite runs on a Citus cluster.
pub fn on_citus() -> bool {
    let on = std::env::var("TEST_CITUS").is_ok_and(|v| v == "1");
    assert!(!on || super::on_postgres(), "TEST_CITUS needs TEST_DATABASE_URL (the coordinator)");
    on
}

/// The worker nodes registered on the coordinator at `base`, as URLs of their server.
async fn workers(admin: &DatabaseConnection, base: &str) -> Vec<url::Url> {
    let sql =
        "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeport";
    let rows = admin.query_all(Statement::from_string(admin.get_database_backend(), sql)).await.unwrap();
    assert!(!rows.is_empty(), "the coordinator at TEST_DATABASE_URL has no workers (.ci/citus start)");
    rows.iter()
        .map(|r| {
            let mut url = url::Url::parse(base).unwrap();
            url.set_host(Some(&r.try_get::<String>("", "nodename").unwrap())).unwrap();
            url.set_port(Some(u16::try_from(r.try_get::<i32>("", "nodeport").unwrap()).unwrap())).unwrap();
            url
        })
        .collect()
}

fn with_database(server: &url::Url, name: &str) -> String {
    let mut url = server.clone();
    url.set_path(&format!("/{name}"));
    url.to_string()
}

async fn run(url: &str, sql: &str) {
    let db = gymapi::db::connect(url).await.unwrap();
    db.execute_unprepared(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    db.close().await.unwrap();
}

/// Makes database `name` on every worker (the coordinator's is made by the caller), then the
/// extension and the workers in the coordinator's.
pub async fn prepare(admin: &DatabaseConnection, base: &str, name: &str) {
    let workers = workers(admin, base).await;
    for worker in &workers {
        run(&with_database(worker, "postgres"), &format!("CREATE DATABASE \"{name}\"")).await;
        run(&with_database(worker, name), "CREATE EXTENSION citus").await;
    }
    let coordinator = url::Url::parse(base).unwrap();
    let mut setup = format!(
        "CREATE EXTENSION citus; SELECT citus_set_coordinator_host('{}', {});",
        coordinator.host_str().unwrap(),
        coordinator.port().unwrap_or(5432)
    );
    for worker in &workers {
        setup.push_str(&format!(
            "SELECT citus_add_node('{}', {});",
            worker.host_str().unwrap(),
            worker.port().unwrap()
        ));
    }
    {
        // Registering a node alters the cluster-wide role on the worker: one test at a time
        // ("tuple concurrently updated" otherwise).
        static REGISTERING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one = REGISTERING.lock().await;
        run(&with_database(&coordinator, name), &setup).await;
    }
}

/// Migrates the database at `url` and distributes it as `gymapi migrate --distribute` does.
pub async fn distribute(url: &str) {
    let name = url::Url::parse(url).unwrap().path().trim_start_matches('/').to_string();
    let db = gymapi::db::connect(url).await.unwrap();
    gymapi::db::migrate(&db).await.unwrap();
    gymapi::db::distribute(&db).await.unwrap().expect("the database has the Citus extension");
    // A statement that reads or writes the shards of more than one gym fails the test, unless it
    // is one of the few that say so (`db::across_gyms`).
    db.execute_unprepared(&format!("ALTER DATABASE \"{name}\" SET citus.multi_task_query_log_level = 'error'"))
        .await
        .unwrap();
    db.close().await.unwrap();
}

/// Drops database `name` from every worker (the coordinator's is dropped by the caller).
pub async fn drop_from_workers(admin: &DatabaseConnection, base: &str, name: &str) {
    for worker in workers(admin, base).await {
        let db = gymapi::db::connect(&with_database(&worker, "postgres")).await.unwrap();
        let _ = db.execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await;
        let _ = db.close().await;
    }
}

/// A connection to `url` on which a statement may run on every shard: what a test reads or
/// writes behind the API's back is no request of the service's.
pub async fn inspecting(url: &str) -> DatabaseConnection {
    let mut url = url::Url::parse(url).unwrap();
    url.query_pairs_mut().append_pair("options[citus.multi_task_query_log_level]", "off");
    gymapi::db::connect(url.as_str()).await.unwrap()
}
