//! The keys issued before keys carried a checksum, known in memory, so that a made-up key of
//! their shape is refused without a database query (docs/architecture.md, "The stores").
//!
//! No such key is issued any more, so the list only shrinks: it is read from the database on the
//! first request that presents a key of the old shape, and read again when a key of that shape is
//! not on it and the list is older than [`RELOAD_AFTER`] (a key issued by an older server during an
//! upgrade). A flood of made-up keys of the old shape therefore costs at most one query per
//! `RELOAD_AFTER`, whatever its size. When the database cannot be read, keys are let through to
//! the usual lookup.

use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use std::{
    collections::HashSet,
    time::{Duration, Instant},
};
use tokio::sync::RwLock;

/// How old the list may be before a key missing from it has it read again.
pub const RELOAD_AFTER: Duration = Duration::from_secs(60);

/// The first 8 bytes of the fingerprints of the keys issued without a checksum.
#[derive(Default)]
pub struct LegacyKeys {
    loaded: RwLock<Option<Loaded>>,
}

struct Loaded {
    prefixes: HashSet<u64>,
    at: Instant,
}

impl Loaded {
    fn holds(&self, prefix: u64) -> bool {
        self.prefixes.contains(&prefix)
    }

    fn fresh(&self) -> bool {
        self.at.elapsed() < RELOAD_AFTER
    }
}

impl LegacyKeys {
    /// Whether a key of the old shape with this fingerprint (lowercase hex) may exist: `false`
    /// only when the list, read at most `RELOAD_AFTER` ago, does not hold it.
    pub async fn may_exist(&self, db: &DatabaseConnection, fingerprint: &str) -> bool {
        let Some(prefix) = prefix_of(fingerprint) else {
            return true;
        };
        if let Some(loaded) = &*self.loaded.read().await
            && (loaded.holds(prefix) || loaded.fresh())
        {
            return loaded.holds(prefix);
        }
        let mut slot = self.loaded.write().await;
        // Another request may have read the list while this one waited.
        if let Some(loaded) = &*slot
            && loaded.fresh()
        {
            return loaded.holds(prefix);
        }
        match read(db).await {
            Ok(prefixes) => {
                let loaded = Loaded { prefixes, at: Instant::now() };
                let holds = loaded.holds(prefix);
                *slot = Some(loaded);
                holds
            }
            Err(e) => {
                tracing::warn!(error = %e, "the keys issued without a checksum could not be read; looking the key up");
                true
            }
        }
    }
}

fn prefix_of(fingerprint: &str) -> Option<u64> {
    u64::from_str_radix(fingerprint.get(..16)?, 16).ok()
}

/// One statement on a reference table (every node of a distributed database holds it).
async fn read(db: &DatabaseConnection) -> Result<HashSet<u64>, sea_orm::DbErr> {
    let backend = db.get_database_backend();
    let sql = "SELECT fingerprint FROM api_keys WHERE checksummed = false";
    let rows = db.query_all(Statement::from_string(backend, sql)).await?;
    let mut prefixes = HashSet::with_capacity(rows.len());
    for row in rows {
        let fingerprint: String = row.try_get("", "fingerprint")?;
        prefixes.extend(prefix_of(&fingerprint));
    }
    Ok(prefixes)
}
