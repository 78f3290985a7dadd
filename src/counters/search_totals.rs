//! The exact `total` of a member search, counted once per state of the gym's members.
//!
//! Counting a broad search is the dearest part of its answer (12,500 of 100,000 members match
//! `ada`: about 8 ms on PostgreSQL, 22 ms on SQLite), and an integrator paging through a search,
//! or repeating it, asks for the same count again and again. A count is kept here with the gym's
//! [`MEMBERS_VERSION`](crate::counters::MEMBERS_VERSION) read before it was taken, and is used
//! again only while that version reads the same and the page's `as_of` reaches past the gym's
//! newest member:
//!
//! - every write that adds members or changes what a search or a status filter matches bumps the
//!   version in its own transaction, and the version never goes down;
//! - the version is read before the count, in a snapshot no newer than the count's, so a count is
//!   filed under the version it was taken at or under an older one, which no later read returns;
//! - a count is kept only when its `as_of` is at or past the newest member, so it is the count of
//!   all of them, which is the answer for every later `as_of` while no member is added.
//!
//! Each process keeps its own (several servers on one PostgreSQL stay exact: the version lives in
//! the database). Lists with `updated_since` are always counted. The cache holds [`CAPACITY`]
//! searches; when it is full the least recently used quarter goes.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult, Statement, Value};

use super::{COUNTER, MEMBERS_VERSION};
use crate::db::placeholders;

/// Searches kept at most (a few hundred bytes each).
pub const CAPACITY: usize = 4_096;

/// A search: the gym, the status filter and the LIKE pattern of the term.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Search {
    pub gym_id: GymId,
    pub status: Option<&'static str>,
    pub pattern: String,
}

struct Kept {
    version: i64,
    total: i64,
    used: u64,
}

#[derive(Default)]
struct Inner {
    kept: HashMap<Search, Kept>,
    clock: u64,
}

#[derive(Default)]
pub struct SearchTotals {
    inner: Mutex<Inner>,
}

impl SearchTotals {
    /// The total kept for `search` at `version`, if there is one.
    pub fn get(&self, search: &Search, version: i64) -> Option<i64> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.clock += 1;
        let clock = inner.clock;
        let kept = inner.kept.get_mut(search).filter(|k| k.version == version)?;
        kept.used = clock;
        Some(kept.total)
    }

    /// Keeps the total of all of the gym's members that `search` matches, counted after reading
    /// `version`.
    pub fn put(&self, search: Search, version: i64, total: i64) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.clock += 1;
        let used = inner.clock;
        if inner.kept.len() >= CAPACITY && !inner.kept.contains_key(&search) {
            inner.evict();
        }
        match inner.kept.get_mut(&search) {
            // A count filed under an older version than the one kept says nothing new.
            Some(k) if k.version > version => {}
            Some(k) => *k = Kept { version, total, used },
            None => {
                inner.kept.insert(search, Kept { version, total, used });
            }
        }
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Drops the least recently used quarter.
    fn evict(&mut self) {
        let mut used: Vec<u64> = self.kept.values().map(|k| k.used).collect();
        let cut = used.len() / 4;
        if cut == 0 {
            return;
        }
        let (_, &mut oldest_kept, _) = used.select_nth_unstable(cut);
        self.kept.retain(|_, k| k.used >= oldest_kept);
    }
}

/// Where a gym's members stand: their [`MEMBERS_VERSION`] and the newest `created_at` among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromQueryResult)]
pub struct MembersState {
    pub version: i64,
    pub newest: Option<DateTime<Utc>>,
}

/// Reads [`MembersState`] in one statement (two index lookups).
pub async fn members_state(db: &impl ConnectionTrait, gym_id: GymId) -> Result<MembersState, DbErr> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        &format!(
            "SELECT CAST({COUNTER} AS BIGINT) AS version, (SELECT MAX(created_at) FROM members WHERE gym_id = ?) AS newest"
        ),
    );
    let values: Vec<Value> = vec![gym_id.into(), MEMBERS_VERSION.into(), gym_id.into()];
    let row = MembersState::find_by_statement(Statement::from_sql_and_values(backend, sql, values)).one(db).await?;
    Ok(row.unwrap_or(MembersState { version: 0, newest: None }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(n: usize) -> Search {
        Search { gym_id: GymId(uuid::Uuid::nil()), status: None, pattern: format!("%{n}%") }
    }

    #[test]
    fn a_total_is_given_back_only_at_its_version() {
        let totals = SearchTotals::default();
        totals.put(search(1), 7, 12_500);
        assert_eq!(totals.get(&search(1), 7), Some(12_500));
        assert_eq!(totals.get(&search(1), 8), None);
        assert_eq!(totals.get(&search(2), 7), None);
        // A count taken after an older read does not replace a newer one.
        totals.put(search(1), 6, 1);
        assert_eq!(totals.get(&search(1), 7), Some(12_500));
        totals.put(search(1), 8, 12_501);
        assert_eq!(totals.get(&search(1), 8), Some(12_501));
        assert_eq!(totals.get(&search(1), 7), None);
    }

    #[test]
    fn a_full_cache_drops_its_least_recently_used_quarter() {
        let totals = SearchTotals::default();
        for n in 0..CAPACITY {
            totals.put(search(n), 1, n as i64);
        }
        // The first ten are used again, so the next ones in line are the oldest.
        for n in 0..10 {
            assert_eq!(totals.get(&search(n), 1), Some(n as i64));
        }
        totals.put(search(CAPACITY), 1, 0);
        assert_eq!(totals.len(), CAPACITY - CAPACITY / 4 + 1);
        for n in 0..10 {
            assert_eq!(totals.get(&search(n), 1), Some(n as i64), "recently used {n} was dropped");
        }
        assert_eq!(totals.get(&search(10), 1), None);
        assert_eq!(totals.get(&search(CAPACITY - 1), 1), Some((CAPACITY - 1) as i64));
        assert_eq!(totals.get(&search(CAPACITY), 1), Some(0));
    }
}
