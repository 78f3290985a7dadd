//! Page arithmetic and links of the list envelope (openapi.yaml, "Lists").
//!
//! A walk is pinned to the moment it started: the first page fixes `as_of` (now, unless the client
//! gave one) and every link carries it, so records created during the walk are not listed and do
//! not shift later pages.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, Order, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
    QueryTrait, Select,
    sea_query::{Expr, SimpleExpr},
};

use crate::{context::RequestContext, errors::ApiError};

/// From this many records skipped on, a page is found by its ids first on PostgreSQL (see
/// [`Page::fetch`]).
const DEFERRED_FROM: u64 = 1_000;

/// One page of a list, as requested and as found.
#[derive(Clone, Debug)]
pub struct Page {
    pub page: i64,
    pub per_page: i64,
    pub as_of: DateTime<Utc>,
    pub total: i64,
    /// Absolute URL of the list without query, e.g. `http://host/api/v1/members`.
    url: String,
    /// The filters of the request, in a stable order, kept in every link.
    filters: Vec<(&'static str, String)>,
}

impl Page {
    pub fn new(ctx: &RequestContext, page: i64, per_page: i64, as_of: Option<DateTime<Utc>>) -> Self {
        Self {
            page,
            per_page,
            as_of: as_of.unwrap_or_else(crate::records::now),
            total: 0,
            url: format!("{}{}", ctx.base_url, ctx.path),
            filters: Vec::new(),
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
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.filters {
            q.append_pair(k, v);
        }
        q.append_pair("as_of", &crate::records::rfc3339(self.as_of));
        q.append_pair("page", &page.to_string());
        q.append_pair("per_page", &self.per_page.to_string());
        format!("{}?{}", self.url, q.finish())
    }

    /// Counts and fetches one page of `select`, newest first by `order` then `id`, limited to
    /// records created at or before `as_of`. `known_total` skips the count when the caller has it
    /// (from the gym's counters).
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
        let select = select.filter(created.lte(self.as_of));
        self.total = match known_total {
            Some(n) => n,
            None => i64::try_from(select.clone().count(db).await?).unwrap_or(i64::MAX),
        };
        let Some(window) = Window::of(self.offset(), self.per_page.max(1) as u64, self.total.max(0) as u64) else {
            return Ok(Vec::new());
        };
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
        Page { page, per_page, as_of: Utc::now(), total, url: String::new(), filters: Vec::new() }
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
