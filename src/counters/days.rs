//! Per-month and per-day counts of a dated list (check-ins by `occurred_at`, sales by
//! `purchased_at`): where a page asked by its number alone starts, without skipping the history
//! in front of it.
//!
//! A list with a [`Counted::day`] column keeps, in `gym_day_counts`, one count per UTC month and
//! one per UTC day of that column, for the whole list and for each value of its label (`list` is
//! the counter's name: `attendance`, `attendance.denied`; `bucket` is months or days since
//! 1970-01). Every writer of the list adds to them in its transaction, as it adds to the list's
//! counters ([`deltas`], [`add_statement`]), and a writer that changes a row's label moves its
//! counts ([`moved`]); [`super::recount`] rebuilds them.
//!
//! A page asked by its number starts at record `offset` of the walk. [`start`] reads the months
//! (a few hundred rows for ten years), then the days of the month the record falls in, each minus
//! the records created after the walk's `as_of` in one statement, and returns the day the page
//! starts in and how many of that day's records come before it: the page then skips at most one
//! day instead of every newer record. When the counts do not add up to the walk's total (a row
//! dated outside the years 0-9999, or counts not yet built), it returns `None`, and the page
//! skips the records before it as it did without them.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use entity::ids::GymId;
use rand::Rng;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Statement, Value};

use super::Counted;
use crate::db::{add_up_statement, placeholders};

/// Shards of a month's or a day's count: fewer than the counters' (a deep page reads every
/// month's), enough that concurrent check-ins of one gym rarely wait on one row.
const SHARDS: i16 = 4;

/// What a bucket spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Span {
    Month,
    Day,
}

impl Span {
    /// The bucket of `at`: months or days since 1970-01(-01), UTC.
    fn of(self, at: DateTime<Utc>) -> i64 {
        match self {
            Span::Month => (i64::from(at.year()) - 1970) * 12 + i64::from(at.month0()),
            Span::Day => at.timestamp().div_euclid(86_400),
        }
    }

    /// The counter's name of this span: `attendance@month`, `attendance.denied@day`.
    fn list(self, counter: &str) -> String {
        match self {
            Span::Month => format!("{counter}@month"),
            Span::Day => format!("{counter}@day"),
        }
    }

    /// [`Span::of`] as SQL over `column` (a UTC time: text `YYYY-MM-DDT…` on SQLite).
    fn sql(self, backend: DbBackend, column: &str) -> String {
        match (self, backend) {
            (Span::Month, DbBackend::Postgres) => format!(
                "CAST((EXTRACT(YEAR FROM {column} AT TIME ZONE 'UTC') - 1970) * 12 \
                 + EXTRACT(MONTH FROM {column} AT TIME ZONE 'UTC') - 1 AS BIGINT)"
            ),
            (Span::Day, DbBackend::Postgres) => format!("CAST(FLOOR(EXTRACT(EPOCH FROM {column}) / 86400) AS BIGINT)"),
            (Span::Month, _) => format!(
                "((CAST(substr({column}, 1, 4) AS INTEGER) - 1970) * 12 + CAST(substr({column}, 6, 2) AS INTEGER) - 1)"
            ),
            (Span::Day, _) => format!("CAST(julianday(substr({column}, 1, 10)) - 2440587.5 AS INTEGER)"),
        }
    }
}

/// The deltas of new rows of a dated list, each with its label's value and its date: for every
/// row, its month and its day, under the list's name and under its label's.
pub fn deltas<'a>(
    list: Counted,
    rows: impl IntoIterator<Item = (&'a str, DateTime<Utc>)>,
) -> BTreeMap<(String, i64), i64> {
    let mut deltas = BTreeMap::new();
    for (label, at) in rows {
        for counter in [list.name(None), list.name(Some(label))] {
            for span in [Span::Month, Span::Day] {
                *deltas.entry((span.list(&counter), span.of(at))).or_insert(0) += 1;
            }
        }
    }
    deltas
}

/// The deltas of one row of a dated list whose label's value changed from `from` to `to`: its
/// month and its day move from the one label's counts to the other's (the list's own stay).
pub fn moved(list: Counted, from: &str, to: &str, at: DateTime<Utc>) -> BTreeMap<(String, i64), i64> {
    let mut deltas = BTreeMap::new();
    if from != to {
        for (label, n) in [(from, -1), (to, 1)] {
            for span in [Span::Month, Span::Day] {
                deltas.insert((span.list(&list.name(Some(label))), span.of(at)), n);
            }
        }
    }
    deltas
}

/// The statement that adds [`deltas`] to a gym's counts, to one shard picked at random; `None`
/// for no rows.
pub fn add_statement(backend: DbBackend, gym_id: GymId, deltas: BTreeMap<(String, i64), i64>) -> Option<Statement> {
    let shard = rand::thread_rng().gen_range(0..SHARDS);
    let rows = deltas
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|((list, bucket), n)| (vec![gym_id.into(), list.into(), bucket.into(), shard.into()], n));
    add_up_statement(backend, "gym_day_counts", &["gym_id", "list", "bucket", "shard"], "value", rows)
}

/// Rebuilds a gym's counts of `list` from its rows (after its old ones are deleted).
pub(super) fn rebuild(backend: DbBackend, gym_id: GymId, list: Counted) -> Vec<Statement> {
    let Some(day) = list.day else { return Vec::new() };
    let Counted { table, label, .. } = list;
    let mut out = Vec::new();
    for span in [Span::Month, Span::Day] {
        let bucket = span.sql(backend, day);
        let all = span.list(table);
        let labelled = format!("'{table}.' || {label} || '{}'", &all[table.len()..]);
        let sql = format!(
            "INSERT INTO gym_day_counts (gym_id, list, bucket, value) SELECT gym_id, list, bucket, n FROM (\
             SELECT gym_id, '{all}' AS list, {bucket} AS bucket, COUNT(*) AS n FROM {table} WHERE gym_id = ? \
             GROUP BY gym_id, {bucket} \
             UNION ALL SELECT gym_id, {labelled}, {bucket}, COUNT(*) FROM {table} WHERE gym_id = ? \
             GROUP BY gym_id, {label}, {bucket}) AS counted"
        );
        out.push(Statement::from_sql_and_values(backend, placeholders(backend, &sql), [gym_id.into(), gym_id.into()]));
    }
    out
}

/// Where the record `offset` (from the newest, from 0) of a gym's dated list, optionally of one
/// label value, pinned at `as_of`, is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start {
    /// The end of the record's day (exclusive): the page reads the records dated before it.
    pub before: DateTime<Utc>,
    /// How many records of that day come before it, newest first.
    pub skip: u64,
}

#[derive(FromQueryResult)]
struct Bucket {
    bucket: i64,
    n: i64,
}

/// Where record `offset` of `total` is (see the module's documentation); `None` when the counts
/// do not add up to `total`, or `offset` is past it.
pub async fn start(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    list: Counted,
    label: Option<&str>,
    as_of: DateTime<Utc>,
    (offset, total): (u64, i64),
) -> Result<Option<Start>, DbErr> {
    let Some(day) = list.day else { return Ok(None) };
    let scope = Scope { gym_id, list, label, as_of, day };
    let months = scope.counts(db, Span::Month, None).await?;
    if months.values().sum::<i64>() != total {
        return Ok(None);
    }
    let Some((month, offset)) = find(&months, offset) else { return Ok(None) };
    let days = scope.counts(db, Span::Day, Some(month)).await?;
    let Some((day, skip)) = find(&days, offset) else { return Ok(None) };
    let before = day.checked_add(1).and_then(|d| DateTime::from_timestamp(d.checked_mul(86_400)?, 0));
    Ok(before.map(|before| Start { before, skip }))
}

/// The bucket, newest first, that record `offset` falls in, and how many of its records come
/// before it.
fn find(counts: &BTreeMap<i64, i64>, mut offset: u64) -> Option<(i64, u64)> {
    for (bucket, n) in counts.iter().rev() {
        let n = u64::try_from(*n).unwrap_or(0);
        if offset < n {
            return Some((*bucket, offset));
        }
        offset -= n;
    }
    None
}

/// The walk whose counts are read.
struct Scope<'a> {
    gym_id: GymId,
    list: Counted,
    label: Option<&'a str>,
    as_of: DateTime<Utc>,
    day: &'static str,
}

impl Scope<'_> {
    /// The walk's records per bucket of `span` (within one month, if given): the counts minus the
    /// records created after `as_of`, in one statement, so both parts see one snapshot.
    async fn counts(
        &self,
        db: &impl ConnectionTrait,
        span: Span,
        month: Option<i64>,
    ) -> Result<BTreeMap<i64, i64>, DbErr> {
        let backend = db.get_database_backend();
        let Counted { table, label: column, .. } = self.list;
        let bucket = span.sql(backend, self.day);
        let mut values: Vec<Value> = vec![self.gym_id.into(), span.list(&self.list.name(self.label)).into()];
        let (mut counted, mut created) = (String::new(), String::new());
        // The days of one month: the counts' range. The records created after `as_of` are read
        // along `(gym_id, created_at)` whatever their date (a bound on the date would take the
        // planner to the date's index, through the month's records), and those of other months
        // are left out below.
        let days = month.and_then(month_range).map(|(from, to)| Span::Day.of(from)..Span::Day.of(to));
        if let Some(days) = &days {
            counted = " AND bucket >= ? AND bucket < ?".into();
            values.extend([days.start.into(), days.end.into()]);
        }
        values.push(self.gym_id.into());
        if let Some(label) = self.label {
            created.push_str(&format!(" AND {column} = ?"));
            values.push(label.into());
        }
        values.push(self.as_of.into());
        let sql = format!(
            "SELECT bucket, CAST(SUM(n) AS BIGINT) AS n FROM (\
             SELECT bucket, value AS n FROM gym_day_counts WHERE gym_id = ? AND list = ?{counted} \
             UNION ALL SELECT {bucket} AS bucket, -1 AS n FROM {table} WHERE gym_id = ?{created} AND created_at > ?\
             ) AS counted GROUP BY bucket"
        );
        let statement = Statement::from_sql_and_values(backend, placeholders(backend, &sql), values);
        let rows = Bucket::find_by_statement(statement).all(db).await?;
        let within = |b: &Bucket| days.as_ref().is_none_or(|d| d.contains(&b.bucket));
        Ok(rows.into_iter().filter(|b| b.n != 0 && within(b)).map(|b| (b.bucket, b.n)).collect())
    }
}

/// The first instant of month `month` (months since 1970-01) and of the month after it.
fn month_range(month: i64) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let first = |m: i64| {
        let date =
            NaiveDate::from_ymd_opt(i32::try_from(m.div_euclid(12) + 1970).ok()?, (m.rem_euclid(12) + 1) as u32, 1)?;
        Some(date.and_hms_opt(0, 0, 0)?.and_utc())
    };
    Some((first(month)?, first(month.checked_add(1)?)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_count_months_and_days_since_1970() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(Span::Month.of(at("1970-01-31T23:59:59Z")), 0);
        assert_eq!(Span::Month.of(at("2026-11-29T04:00:00Z")), 56 * 12 + 10);
        assert_eq!(Span::Day.of(at("1970-01-02T00:00:00Z")), 1);
        assert_eq!(Span::Day.of(at("1969-12-31T23:59:59Z")), -1);
        let (from, to) = month_range(56 * 12 + 11).unwrap();
        assert_eq!((from, to), (at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00Z")));
    }

    #[test]
    fn a_record_is_found_in_its_bucket_newest_first() {
        let counts = BTreeMap::from([(1, 3), (2, 0), (5, 2)]);
        assert_eq!(find(&counts, 0), Some((5, 0)));
        assert_eq!(find(&counts, 1), Some((5, 1)));
        assert_eq!(find(&counts, 2), Some((1, 0)));
        assert_eq!(find(&counts, 4), Some((1, 2)));
        assert_eq!(find(&counts, 5), None);
    }
}
