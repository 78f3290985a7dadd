//! Database connection and migrations (SQLite or PostgreSQL, chosen by URL).

use std::time::Duration;

use anyhow::Context as _;
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbBackend};

/// Connects to `url`. An in-memory SQLite database keeps exactly one connection (each connection
/// would otherwise see its own empty database).
pub async fn connect(url: &str) -> anyhow::Result<DatabaseConnection> {
    let mut options = ConnectOptions::new(url.to_string());
    let memory = url.contains(":memory:") || url.contains("mode=memory");
    let sqlite = url.starts_with("sqlite:");
    options
        .max_connections(if memory {
            1
        } else if sqlite {
            4
        } else {
            16
        })
        .min_connections(if memory { 1 } else { 0 })
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(10))
        .idle_timeout(if memory { Duration::from_secs(u32::MAX as u64) } else { Duration::from_secs(300) })
        // No ping before each use: it doubled the round trips of every query. A connection the
        // server dropped fails its next query (503), and the pool replaces it.
        .test_before_acquire(false)
        .sqlx_logging(false);
    if memory {
        options.max_lifetime(Duration::from_secs(u32::MAX as u64));
    }
    let db = Database::connect(options)
        .await
        .with_context(|| format!("cannot connect to the database ({})", redact(url)))?;
    if sqlite {
        use sea_orm::ConnectionTrait;
        // WAL lets readers run beside the writer; a busy timeout waits for the lock instead of failing.
        for pragma in [
            "PRAGMA journal_mode = WAL",
            "PRAGMA busy_timeout = 5000",
            "PRAGMA synchronous = NORMAL",
            "PRAGMA foreign_keys = ON",
        ] {
            db.execute_unprepared(pragma).await.with_context(|| pragma.to_string())?;
        }
    }
    Ok(db)
}

/// Applies pending migrations.
pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    Migrator::up(db, None).await.context("migrations failed")
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Whether SQLite refused a transaction because another connection wrote first (`SQLITE_BUSY`,
/// including the `BUSY_SNAPSHOT` of a transaction that read before it wrote): the transaction
/// did nothing and may run again.
pub fn is_busy(err: &sea_orm::DbErr) -> bool {
    let text = err.to_string();
    text.contains("database is locked") || text.contains("(code: 5)") || text.contains("(code: 517)")
}

/// `?` placeholders in the form of the backend (`$1`, `$2`, ... on PostgreSQL).
pub fn placeholders(backend: DbBackend, sql: &str) -> String {
    if backend != DbBackend::Postgres {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_backend() {
        assert_eq!(placeholders(DbBackend::Postgres, "a = ? AND b = ?"), "a = $1 AND b = $2");
        assert_eq!(placeholders(DbBackend::Sqlite, "a = ? AND b = ?"), "a = ? AND b = ?");
    }
}
