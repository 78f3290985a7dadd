//! The few statements that read or write the rows of many gyms (docs/scaling.md, "Statements that
//! read more than one gym"). On a database distributed by gym (Citus) each of them runs on every
//! node; every other statement names one gym and runs on one. A deployment that sets
//! `citus.multi_task_query_log_level` to report (or refuse) statements that run on several nodes
//! is told that these ones are meant to: they run in a transaction that turns the report off.
//! PostgreSQL without Citus accepts the setting as a placeholder and ignores it; SQLite needs none.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryResult, Statement};

/// Marks the statements of `txn`, a transaction, as reading or writing many gyms.
pub async fn across_gyms(txn: &impl ConnectionTrait) -> Result<(), DbErr> {
    if txn.get_database_backend() == DbBackend::Postgres {
        txn.execute_unprepared("SET LOCAL citus.multi_task_query_log_level = 'off'").await?;
    }
    Ok(())
}

/// Runs `statement`, a read of many gyms: on PostgreSQL in a transaction marked by
/// [`across_gyms`], on SQLite as it is (a read there needs no transaction, hence no write lock).
pub async fn query_across_gyms(db: &DatabaseConnection, statement: Statement) -> Result<Vec<QueryResult>, DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return db.query_all(statement).await;
    }
    let txn = super::begin_writing(db).await?;
    across_gyms(&txn).await?;
    let rows = txn.query_all(statement).await?;
    txn.commit().await?;
    Ok(rows)
}
