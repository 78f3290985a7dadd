//! The deployment's secrets (`server_secrets`): shared by every instance of one deployment, by
//! name, made once by the first instance that needs one.

use rand::RngCore;
use sea_orm::{ConnectionTrait, DbErr, Statement, Value};

/// The deployment's secret called `name`, made by the first instance that asks (`INSERT ... ON
/// CONFLICT DO NOTHING`, then read: every instance reads the same one).
pub async fn server_secret(db: &impl ConnectionTrait, name: &str) -> Result<Vec<u8>, DbErr> {
    let backend = db.get_database_backend();
    let insert = super::placeholders(
        backend,
        "INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
    );
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let values: [Value; 3] = [name.into(), hex::encode(bytes).into(), chrono::Utc::now().into()];
    db.execute(Statement::from_sql_and_values(backend, insert, values)).await?;
    let select = super::placeholders(backend, "SELECT value FROM server_secrets WHERE name = ?");
    let row = db.query_one(Statement::from_sql_and_values(backend, select, [name.into()])).await?;
    let value: String =
        row.ok_or_else(|| DbErr::RecordNotFound(format!("server secret {name}")))?.try_get("", "value")?;
    hex::decode(value).map_err(|e| DbErr::Custom(format!("server secret {name}: {e}")))
}
