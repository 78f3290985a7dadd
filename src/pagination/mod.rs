//! Page arithmetic and links of the list envelope (openapi.yaml, "Lists").
//!
//! A walk is pinned to the moment it started: the first page fixes `as_of` (now, unless the client
//! gave one) and every link carries it, so records created during the walk are not listed and do
//! not shift later pages.
//!
//! A page costs its own records, not the history before it: the links to the next and the
//! previous page carry a `cursor` (`cursor.rs`), the place of the page's last (first) record and
//! the walk's total, and a walk by page number (`page=meta.next_page` with `as_of`) finds the same
//! kept for it in the store ([`Walks`]). A page with neither is found by its number.

mod cursor;

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use entity::ids::GymId;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, ModelTrait, Order, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait, Select, Value,
    sea_query::{Expr, SimpleExpr},
};
use sha2::{Digest, Sha256};

use cursor::{Anchor, Position, Resume};

use crate::{context::RequestContext, errors::ApiError, limits::Store};

/// From this many records skipped on, a page is found by its ids first on PostgreSQL (see
/// [`Page::fetch`]), and where the list counts its records per day, from the day it starts in
/// ([`Page::is_deep`]).
const DEFERRED_FROM: u64 = 1_000;

/// How long the store keeps a walk's next place for a client that walks by page number: the
/// longest pause between two pages that still costs one page (a longer one costs a count and a
/// skip, as a page asked by number does).
const KEPT_FOR: Duration = Duration::from_secs(15 * 60);

/// What a list request asks for: which page, how big, of which walk.
#[derive(Clone, Debug, Default)]
pub struct Ask {
    pub page: i64,
    pub per_page: i64,
    pub as_of: Option<DateTime<Utc>>,
    /// The `cursor` of a link, when the request is one.
    pub cursor: Option<String>,
}

/// The [`Ask`] of a generated list operation's parameters (each has `page`, `per_page`, `as_of`
/// and `cursor`).
macro_rules! ask {
    ($p:expr) => {
        $crate::pagination::Ask { page: $p.page, per_page: $p.per_page, as_of: $p.as_of, cursor: $p.cursor.clone() }
    };
}
pub(crate) use ask;

/// What lets a page be found from the page before it: the deployment's key that signs cursors,
/// and the store that keeps walks' next places (Redis, or in process).
pub struct Walks {
    store: Arc<dyn Store>,
    key: tokio::sync::OnceCell<Arc<[u8]>>,
}

impl Walks {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store, key: tokio::sync::OnceCell::new() }
    }

    async fn key(&self, db: &impl ConnectionTrait) -> Result<Arc<[u8]>, ApiError> {
        let key =
            self.key.get_or_try_init(|| async { crate::db::server_secret(db, "list_cursor").await.map(Arc::from) });
        Ok(key.await?.clone())
    }

    /// The place kept for a walk's page; a store that fails costs only the shortcut.
    async fn recall(&self, walk: &str) -> Option<String> {
        self.store.walk_recall(&memory_key(walk)).await.inspect_err(|e| tracing::debug!("walk recall: {e}")).ok()?
    }

    async fn keep(&self, walk: &str, cursor: &str) {
        if let Err(e) = self.store.walk_keep(&memory_key(walk), cursor, KEPT_FOR).await {
            tracing::debug!("walk keep: {e}");
        }
    }
}

/// A walk's page as the store's key: its identity hashed, in the gym's hash tag.
fn memory_key(walk: &str) -> String {
    let gym = walk.split('\n').next().unwrap_or_default();
    format!("{{{gym}}}:{}", hex::encode(&Sha256::digest(walk.as_bytes())[..16]))
}

/// One page of a list, as requested and as found.
#[derive(Clone)]
pub struct Page {
    pub page: i64,
    pub per_page: i64,
    pub as_of: DateTime<Utc>,
    pub total: i64,
    /// Absolute URL of the list without query, e.g. `http://host/api/v1/members`.
    url: String,
    gym: GymId,
    /// The list's path below the API's base, e.g. `/members`.
    path: String,
    /// The filters of the request, in a stable order, kept in every link.
    filters: Vec<(&'static str, String)>,
    /// Whether the client named `as_of` (a walk's later page) rather than starting a walk.
    pinned: bool,
    cursor: Option<String>,
    walks: Arc<Walks>,
    /// Where the page is in its walk, once [`Page::locate`] has looked.
    located: Option<Located>,
    /// The places of the found page's first and last records.
    found: Option<(Position, Position)>,
    /// Where a page found by its number starts, when the list's counts per day said: the end of
    /// the day it starts in (exclusive) and how many of that day's records come before it.
    start: Option<(DateTime<Utc>, u64)>,
}

#[derive(Clone)]
struct Located {
    /// What the page's cursors are signed with.
    key: Arc<[u8]>,
    /// Where the page before (or after) it said it is, if one did.
    resume: Option<Resume>,
    /// Whether that came with the request (a link), not from the store.
    by_link: bool,
}

impl Page {
    pub fn new(ctx: &RequestContext, walks: &Arc<Walks>, ask: Ask) -> Self {
        Self {
            page: ask.page,
            per_page: ask.per_page,
            as_of: ask.as_of.unwrap_or_else(crate::records::now),
            total: 0,
            url: format!("{}{}", ctx.base_url, ctx.path),
            gym: ctx.tenant.gym_id,
            path: ctx.path.clone(),
            filters: Vec::new(),
            pinned: ask.as_of.is_some(),
            cursor: ask.cursor,
            walks: walks.clone(),
            located: None,
            found: None,
            start: None,
        }
    }

    /// Keeps a filter in the links (a `None` is not a filter).
    pub fn filter(&mut self, name: &'static str, value: Option<String>) {
        if let Some(v) = value {
            self.filters.push((name, v));
        }
    }

    pub fn offset(&self) -> u64 {
        (self.page.max(1) as u64 - 1).saturating_mul(self.per_page.max(1) as u64)
    }

    /// Whether this page, found by its number in a walk of `total` records, skips so many that
    /// the list's counts per day should say where it starts ([`Page::start_at`]).
    pub fn is_deep(&self, total: i64) -> bool {
        let total = u64::try_from(total).unwrap_or(0);
        Window::of(self.offset(), self.per_page.max(1) as u64, total).is_some_and(|w| w.skip >= DEFERRED_FROM)
    }

    /// Says where this page starts, when found by its number: after `skip` of the records dated
    /// before `before` (the end of the day it starts in), newest first.
    pub fn start_at(&mut self, before: DateTime<Utc>, skip: u64) {
        self.start = Some((before, skip));
    }

    pub fn last_page(&self) -> i64 {
        let per_page = self.per_page.max(1);
        (self.total.max(0) / per_page + i64::from(self.total % per_page != 0)).max(1)
    }

    pub fn prev(&self) -> Option<i64> {
        (self.page > 1).then(|| (self.page - 1).min(self.last_page()))
    }

    pub fn next(&self) -> Option<i64> {
        (self.page < self.last_page()).then(|| self.page + 1)
    }

    /// Positions (from 1) of the first and last record of this page, `None` when it is empty.
    pub fn range(&self) -> (Option<i64>, Option<i64>) {
        match i64::try_from(self.offset()) {
            Ok(offset) if offset < self.total => {
                (Some(offset + 1), Some(offset.saturating_add(self.per_page).min(self.total)))
            }
            _ => (None, None),
        }
    }

    pub fn link(&self, page: i64) -> String {
        let cursor = self.cursor_to(page).map(|(_, cursor)| cursor);
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.filters {
            q.append_pair(k, v);
        }
        q.append_pair("as_of", &crate::records::rfc3339(self.as_of));
        q.append_pair("page", &page.to_string());
        q.append_pair("per_page", &self.per_page.to_string());
        if let Some(cursor) = cursor {
            q.append_pair("cursor", &cursor);
        }
        format!("{}?{}", self.url, q.finish())
    }

    /// The walk identity and the cursor of the page next to this one on either side (`None` for
    /// any other page, and before the page is found).
    fn cursor_to(&self, page: i64) -> Option<(String, String)> {
        let (key, (first, last)) = (&self.located.as_ref()?.key, self.found?);
        let anchor = if page == self.page.checked_add(1)? {
            Anchor::After(last)
        } else if page == self.page.checked_sub(1)? {
            Anchor::Before(first)
        } else {
            return None;
        };
        let walk = self.walk(page);
        let cursor = Resume { anchor, total: self.total }.encode(key, &walk);
        Some((walk, cursor))
    }

    /// What names one page of one walk: the gym, the list, its filters, `as_of`, `per_page` and
    /// the page. A cursor is signed over it, and the store keeps a walk's next place under it.
    fn walk(&self, page: i64) -> String {
        let mut filters = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.filters {
            filters.append_pair(k, v);
        }
        let as_of = self.as_of.timestamp_micros();
        format!("{}\n{}\n{}\n{as_of}\n{}\n{page}", self.gym, self.path, filters.finish(), self.per_page)
    }

    /// Looks where this page is in its walk (call it once every filter is kept): from the
    /// request's cursor or, for a walk by page number, from what the page before it kept.
    /// Returns the walk's total when one of them gave it, so that a caller counts nothing then;
    /// [`Page::fetch`] looks itself when nobody did.
    pub async fn locate(&mut self, db: &impl ConnectionTrait) -> Result<Option<i64>, ApiError> {
        if self.located.is_none() {
            let key = self.walks.key(db).await?;
            let (resume, by_link) = self.resume(&key).await;
            self.located = Some(Located { key, resume, by_link });
        }
        Ok(self.located.as_ref().and_then(|l| l.resume).map(|r| r.total))
    }

    /// Where this page is, from the request's cursor or, for a walk by page number, from what the
    /// page before it kept; `None` when neither names this page (it is then found by its number).
    async fn resume(&self, key: &[u8]) -> (Option<Resume>, bool) {
        let walk = self.walk(self.page);
        if let Some(r) = self.cursor.as_deref().and_then(|c| Resume::decode(c, key, &walk)) {
            return (Some(r), true);
        }
        if !self.pinned || self.page <= 1 {
            return (None, false);
        }
        let kept = self.walks.recall(&walk).await;
        (kept.and_then(|c| Resume::decode(&c, key, &walk)), false)
    }

    /// Counts and fetches one page of `select`, newest first by `order` then `id`, limited to
    /// records created at or before `as_of`. `known_total` skips the count when the caller has it
    /// (from the gym's counters); a caller learns from [`Page::locate`] whether the walk's total is
    /// known already, and then counts nothing.
    ///
    /// A page the walk's previous (or next) page pointed at, by its cursor or by what it kept in
    /// the store, is read from that record on (`(order, id) < (…)`, along the list's index) with
    /// the walk's total, counting nothing. Otherwise:
    ///
    /// A page past the middle is read from the other end: oldest first, skipping the records
    /// after it, then turned round. The exact total says where the page starts counted from
    /// either end, so no page skips more than half of the records (the last page of 100,000
    /// members skips none instead of 99,975).
    ///
    /// On PostgreSQL a deep page is found in two steps of one statement: the ids of the page,
    /// skipping the records before it along the `(gym_id, order, id)` index alone, then those
    /// records by primary key. Skipping whole rows instead reads every skipped record from the
    /// table (page 3,200 of 100,000 members: 38 ms one way, 16 ms the other). SQLite skips rows
    /// cheaply, and without table statistics it plans the outer step as a scan of the gym (35 ms
    /// instead of 8), so there the page is read directly.
    pub async fn fetch<E, C>(
        &mut self,
        db: &C,
        select: Select<E>,
        created: E::Column,
        order: E::Column,
        id: E::Column,
        known_total: Option<i64>,
    ) -> Result<Vec<E::Model>, ApiError>
    where
        E: EntityTrait,
        E::Model: Sync,
        C: ConnectionTrait,
    {
        let select = select.filter(created_by::<E>(db.get_database_backend(), created, self.as_of));
        let walk_total = self.locate(db).await?;
        self.total = match (walk_total, known_total) {
            (Some(n), _) | (None, Some(n)) => n,
            (None, None) => i64::try_from(select.clone().count(db).await?).unwrap_or(i64::MAX),
        };
        let (resume, by_link) = self.located.as_ref().map_or((None, false), |l| (l.resume, l.by_link));
        let rows = match resume {
            Some(r) => from_anchor(db, select, r.anchor, order, id, self.per_page.max(1) as u64).await?,
            None => self.by_number(db, select, order, id).await?,
        };
        let place = |row: &E::Model| position::<E>(row, order, id);
        self.found = rows.first().and_then(place).zip(rows.last().and_then(place));
        // A walk by page number asks for the next page with this page's `as_of`; one that follows
        // `links.next` brings its cursor and needs nothing kept.
        if let (false, Some(next)) = (by_link, self.next()) {
            if let Some((walk, cursor)) = self.cursor_to(next) {
                self.walks.keep(&walk, &cursor).await;
            }
        }
        Ok(rows)
    }

    /// The page found by its number: skipping the records before it, from the nearer end.
    async fn by_number<E, C>(
        &self,
        db: &C,
        select: Select<E>,
        order: E::Column,
        id: E::Column,
    ) -> Result<Vec<E::Model>, ApiError>
    where
        E: EntityTrait,
        E::Model: Sync,
        C: ConnectionTrait,
    {
        let Some(window) = Window::of(self.offset(), self.per_page.max(1) as u64, self.total.max(0) as u64) else {
            return Ok(Vec::new());
        };
        if let Some((before, skip)) = self.start {
            // The day the page starts in, from the list's counts per day: at most a day skipped.
            let page = select.filter(order.lt(before)).offset(skip).limit(window.take);
            return Ok(page.order_by(order, Order::Desc).order_by(id, Order::Desc).all(db).await?);
        }
        let direction = if window.newest_first { Order::Desc } else { Order::Asc };
        let page = if window.skip >= DEFERRED_FROM && db.get_database_backend() == DbBackend::Postgres {
            let ids = select
                .clone()
                .select_only()
                .column(id)
                .order_by(order, direction.clone())
                .order_by(id, direction.clone())
                .offset(window.skip)
                .limit(window.take)
                .into_query();
            // `= ANY(ARRAY(…))`, not `IN (…)`: the ids are found once, first, and the rows then
            // by primary key. With `IN`, PostgreSQL's generic plan (what a prepared statement
            // settles on after five runs) joins the ids against every member of the gym: 207 ms
            // instead of 4 (docs/performance.md, "Deep pages found by their ids first").
            let ids = SimpleExpr::SubQuery(None, Box::new(ids.into_sub_query_statement()));
            select.filter(Expr::cust_with_exprs("$1 = ANY(ARRAY($2))", [Expr::col((E::default(), id)).into(), ids]))
        } else {
            select.offset(window.skip).limit(window.take)
        };
        let mut rows = page.order_by(order, direction.clone()).order_by(id, direction).all(db).await?;
        if !window.newest_first {
            rows.reverse();
        }
        Ok(rows)
    }
}

/// The `take` records of `select` on the anchor's side of its record, newest first.
async fn from_anchor<E, C>(
    db: &C,
    select: Select<E>,
    anchor: Anchor,
    order: E::Column,
    id: E::Column,
    take: u64,
) -> Result<Vec<E::Model>, ApiError>
where
    E: EntityTrait,
    E::Model: Sync,
    C: ConnectionTrait,
{
    let tuple = || Expr::tuple([Expr::col((E::default(), order)).into(), Expr::col((E::default(), id)).into()]);
    let at = |p: Position| Expr::tuple([Expr::val(p.at).into(), Expr::val(p.id).into()]);
    // The bound on the order column alone as well: every planner reads it as the index's range.
    let (select, direction) = match anchor {
        Anchor::After(p) => (select.filter(order.lte(p.at)).filter(tuple().lt(at(p))), Order::Desc),
        Anchor::Before(p) => (select.filter(order.gte(p.at)).filter(tuple().gt(at(p))), Order::Asc),
    };
    let mut rows = select.order_by(order, direction.clone()).order_by(id, direction).limit(take).all(db).await?;
    if matches!(anchor, Anchor::Before(_)) {
        rows.reverse();
    }
    Ok(rows)
}

/// `created <= as_of`, the walk's pin. On SQLite as `+created <= as_of`: the unary `+` keeps the
/// planner off the `(gym_id, created_at)` index, which it otherwise takes for this range (it has
/// no statistics to say that the range holds nearly every row) and then sorts the whole gym for
/// the page: 1 s for page 1 of 1,000,000 check-ins instead of 2 ms.
fn created_by<E: EntityTrait>(backend: DbBackend, created: E::Column, as_of: DateTime<Utc>) -> SimpleExpr {
    match backend {
        DbBackend::Sqlite => {
            // SQLite's placeholder in a custom expression is `?`, taken in order.
            Expr::cust_with_exprs("+? <= ?", [Expr::col((E::default(), created)).into(), Expr::val(as_of).into()])
        }
        _ => created.lte(as_of),
    }
}

/// A record's place in the order of `order` then `id`.
fn position<E: EntityTrait>(row: &E::Model, order: E::Column, id: E::Column) -> Option<Position> {
    let at = match row.get(order) {
        Value::ChronoDateTimeUtc(Some(t)) => *t,
        _ => return None,
    };
    let id = match row.get(id) {
        Value::Uuid(Some(u)) => *u,
        _ => return None,
    };
    Some(Position { at, id })
}

/// Where a page's records are read from: `skip` records, then `take`, counted from the newest end
/// or from the oldest, whichever skips fewer.
#[derive(Debug, PartialEq, Eq)]
struct Window {
    skip: u64,
    take: u64,
    newest_first: bool,
}

impl Window {
    /// The page of `per_page` records after the `offset` newest of `total`; `None` past the end.
    fn of(offset: u64, per_page: u64, total: u64) -> Option<Self> {
        if offset >= total {
            return None;
        }
        let end = offset.saturating_add(per_page).min(total);
        let from_oldest = total - end;
        Some(if from_oldest < offset {
            Self { skip: from_oldest, take: end - offset, newest_first: false }
        } else {
            Self { skip: offset, take: end - offset, newest_first: true }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(page: i64, per_page: i64, total: i64) -> Page {
        let walks = Arc::new(Walks::new(Arc::new(crate::limits::MemoryStore::default())));
        Page {
            page,
            per_page,
            as_of: Utc::now(),
            total,
            url: String::new(),
            gym: GymId::generate(),
            path: String::new(),
            filters: Vec::new(),
            pinned: false,
            cursor: None,
            walks,
            located: None,
            found: None,
            start: None,
        }
    }

    #[test]
    fn arithmetic_holds_at_the_extremes() {
        let p = page(i64::MAX, 100, 5);
        assert_eq!((p.last_page(), p.next(), p.prev(), p.range()), (1, None, Some(1), (None, None)));
        let p = page(3, 2, 5);
        assert_eq!((p.last_page(), p.next(), p.prev(), p.range()), (3, None, Some(2), (Some(5), Some(5))));
        let p = page(1, 25, 0);
        assert_eq!((p.last_page(), p.next(), p.prev(), p.range()), (1, None, None, (None, None)));
        let p = page(1, 100, i64::MAX);
        assert_eq!(p.next(), Some(2));
    }

    #[test]
    fn pages_past_the_middle_are_read_from_the_oldest_end() {
        let w = |skip, take, newest_first| Some(Window { skip, take, newest_first });
        // 10 records, 3 a page: pages [0..3) [3..6) [6..9) [9..10) counted from the newest.
        assert_eq!(Window::of(0, 3, 10), w(0, 3, true));
        assert_eq!(Window::of(3, 3, 10), w(3, 3, true), "4 after it, 3 before: from the newest");
        assert_eq!(Window::of(6, 3, 10), w(1, 3, false), "1 older record to skip");
        assert_eq!(Window::of(9, 3, 10), w(0, 1, false), "the last page holds one record");
        assert_eq!(Window::of(10, 3, 10), None);
        assert_eq!(Window::of(0, 25, 0), None);
        // The last page of 100,000 members skips nothing.
        assert_eq!(Window::of(99_975, 25, 100_000), w(0, 25, false));
        assert_eq!(Window::of(u64::MAX - 1, 100, u64::MAX), w(0, 1, false));
    }
}
