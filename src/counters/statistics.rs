//! The gym's summary figures (`GET /statistics`), kept per version of what they count.
//!
//! The figures (member counts, memberships running today, this month's paid revenue) are computed
//! once per state of what they count and kept: a dashboard that polls them, or many integrations
//! of one gym asking at once, cost one small statement each (the versions of members, purchases
//! and memberships, and the facilities) instead of a count over the month's sales. The rule is
//! the search totals' (see [`super::search_totals`]): every write that changes what the figures count
//! bumps a version in its own transaction ([`StatisticsState`]), the versions are read
//! before the figures are computed, and kept figures are used again only while all three read the
//! same, on the same local day (which fixes "today" and "this month") in the same time zone. The
//! versions live in the database, so several servers on one database stay exact; each keeps its
//! own figures, one entry per gym.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
};

use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use entity::ids::GymId;
use entity::purchase;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, QueryFilter, QuerySelect, Statement, Value,
    sea_query::Expr,
};

use super::{
    ATTENDANCE_VERSION, COUNTER, MEMBER_ROWS, MEMBERS_VERSION, MEMBERSHIPS_VERSION, PURCHASES_VERSION, total_as_of_sql,
};
use crate::db::placeholders;

/// The versions of what the statistics report (members, purchases, memberships, attendance) and the gym's
/// facilities, read in one statement: a summary computed after reading them holds for as long as
/// they read the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromQueryResult)]
pub struct StatisticsState {
    pub members: i64,
    pub purchases: i64,
    pub memberships: i64,
    pub attendance: i64,
    pub facilities: i64,
}

async fn statistics_state(db: &impl ConnectionTrait, gym_id: GymId) -> Result<StatisticsState, DbErr> {
    let backend = db.get_database_backend();
    let sql = placeholders(
        backend,
        &format!(
            "SELECT CAST({COUNTER} AS BIGINT) AS members, CAST({COUNTER} AS BIGINT) AS purchases, \
             CAST({COUNTER} AS BIGINT) AS memberships, CAST({COUNTER} AS BIGINT) AS attendance, \
             CAST((SELECT COUNT(*) FROM facilities WHERE gym_id = ? AND open_id IS NOT NULL) AS BIGINT) AS facilities"
        ),
    );
    let values: Vec<Value> = vec![
        gym_id.into(),
        MEMBERS_VERSION.into(),
        gym_id.into(),
        PURCHASES_VERSION.into(),
        gym_id.into(),
        MEMBERSHIPS_VERSION.into(),
        gym_id.into(),
        ATTENDANCE_VERSION.into(),
        gym_id.into(),
    ];
    let row = StatisticsState::find_by_statement(Statement::from_sql_and_values(backend, sql, values)).one(db).await?;
    row.ok_or_else(|| DbErr::RecordNotFound("the statistics state statement returned no row".into()))
}

#[derive(FromQueryResult)]
struct CurrencySum {
    currency: String,
    amount: i64,
}

/// The member counts, the memberships running today and today's granted check-ins.
#[derive(Clone, Copy, Debug, FromQueryResult)]
pub struct Figures {
    pub total: i64,
    pub active: i64,
    pub inactive: i64,
    pub active_memberships: i64,
    pub check_ins_today: i64,
}

/// The member counts as of `at`, the memberships running on `today` and the granted check-ins of
/// `day` (from its first instant to the next day's), in one statement.
async fn figures(
    db: &impl ConnectionTrait,
    gym_id: GymId,
    today: NaiveDate,
    day: std::ops::Range<DateTime<Utc>>,
    at: DateTime<Utc>,
) -> Result<Figures, DbErr> {
    let backend = db.get_database_backend();
    let mut values: Vec<Value> = Vec::new();
    let mut members = |status: Option<&str>| {
        let (expr, v) = total_as_of_sql(gym_id, MEMBER_ROWS, status, at);
        values.extend(v);
        expr
    };
    let (total, active, inactive) = (members(None), members(Some("active")), members(Some("inactive")));
    values.extend([gym_id.into(), today.into(), today.into(), gym_id.into(), day.start.into(), day.end.into()]);
    let sql = format!(
        "SELECT {total} AS total, {active} AS active, {inactive} AS inactive, \
         CAST((SELECT COUNT(*) FROM member_memberships WHERE gym_id = ? AND starts_on <= ? \
               AND (ends_on IS NULL OR ends_on >= ?)) AS BIGINT) AS active_memberships, \
         CAST((SELECT COUNT(*) FROM attendance WHERE gym_id = ? AND occurred_at >= ? AND occurred_at < ? \
               AND kind = 'check_in' AND status = 'granted') AS BIGINT) AS check_ins_today"
    );
    let statement = Statement::from_sql_and_values(backend, placeholders(backend, &sql), values);
    let found = Figures::find_by_statement(statement).one(db).await?;
    found
        .map(|f| Figures { total: f.total.max(0), active: f.active.max(0), inactive: f.inactive.max(0), ..f })
        .ok_or_else(|| DbErr::RecordNotFound("the statistics statement returned no row".into()))
}

/// What a kept summary holds for: the versions (and facilities) read before it was computed, and
/// the gym's local day and time zone, which fix "today" and "this month".
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    state: StatisticsState,
    today: NaiveDate,
    timezone: String,
}

/// A kept summary: everything but the facilities (read with the versions) and the time.
#[derive(Clone)]
struct Kept {
    key: Key,
    figures: Figures,
    /// This month's paid revenue per currency, sorted by currency.
    paid: Vec<(String, i64)>,
}

/// Gyms whose summary is kept at most; past it, the kept summaries are dropped and kept anew.
const CAPACITY: usize = 10_000;

/// The summaries kept by this process, one per gym (the newest computed).
#[derive(Default)]
pub struct KeptStatistics {
    kept: Mutex<HashMap<GymId, Kept>>,
}

impl KeptStatistics {
    /// The summary kept for the gym, if it was computed at `key`.
    fn get(&self, gym_id: GymId, key: &Key) -> Option<Kept> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get(&gym_id).filter(|k| k.key == *key).cloned()
    }

    fn put(&self, gym_id: GymId, summary: Kept) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= CAPACITY && !kept.contains_key(&gym_id) {
            kept.clear();
        }
        kept.insert(gym_id, summary);
    }
}

/// First day of the month of `day`, and the first day of the next month.
fn month_bounds(day: NaiveDate) -> Option<(NaiveDate, NaiveDate)> {
    let first = day.with_day(1)?;
    let next = if first.month() == 12 {
        NaiveDate::from_ymd_opt(first.year() + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(first.year(), first.month() + 1, 1)?
    };
    Some((first, next))
}

/// The gym's summary at `at`, in its time zone `tz`.
#[derive(Clone, Debug)]
pub struct Summary {
    pub figures: Figures,
    pub facilities: i64,
    /// The first and the last day of the month of `at` in `tz`.
    pub month: (NaiveDate, NaiveDate),
    /// This month's paid revenue per currency, sorted by currency.
    pub paid: Vec<(String, i64)>,
}

/// The summary of the gym at `at` in `tz`: kept figures when they were computed at the versions
/// read now (one small statement), else computed and kept.
pub async fn summary(
    db: &impl ConnectionTrait,
    kept: &KeptStatistics,
    gym_id: GymId,
    tz: Tz,
    at: DateTime<Utc>,
) -> anyhow::Result<Summary> {
    let today = at.with_timezone(&tz).date_naive();
    let (first, next) = month_bounds(today).ok_or_else(|| anyhow::anyhow!("no month for {today}"))?;
    let instant = |d: NaiveDate| {
        d.and_hms_opt(0, 0, 0).and_then(|m| tz.from_local_datetime(&m).earliest()).map(|t| t.with_timezone(&Utc))
    };
    let (start, end) = instant(first).zip(instant(next)).ok_or_else(|| anyhow::anyhow!("no local midnight"))?;
    let day = instant(today)
        .zip(today.succ_opt().and_then(instant))
        .map(|(start, end)| start..end)
        .ok_or_else(|| anyhow::anyhow!("no local midnight of {today}"))?;

    let state = statistics_state(db, gym_id).await?;
    let key = Key { state, today, timezone: tz.name().to_string() };
    let Kept { figures, paid, .. } = match kept.get(gym_id, &key) {
        Some(found) => found,
        None => {
            // Two statements side by side on the pool: the scalar figures in one (one snapshot;
            // member counts from the gym's counters, exact in every write's transaction), the
            // month's sums per currency in the other (from the index alone, see the revenue
            // index migration). Kept under the versions read before either.
            let sums = purchase::Entity::find()
                .select_only()
                .column(purchase::Column::Currency)
                .column_as(
                    Expr::col(purchase::Column::TotalAmount).sum().cast_as(sea_orm::sea_query::Alias::new("BIGINT")),
                    "amount",
                )
                .filter(purchase::Column::GymId.eq(gym_id))
                .filter(purchase::Column::PaymentStatus.eq("paid"))
                .filter(purchase::Column::PurchasedAt.gte(start))
                .filter(purchase::Column::PurchasedAt.lt(end))
                .group_by(purchase::Column::Currency)
                .into_model::<CurrencySum>()
                .all(db);
            let (figures, sums) = tokio::try_join!(figures(db, gym_id, today, day, at), sums)?;
            let mut paid: Vec<(String, i64)> = sums.into_iter().map(|s| (s.currency, s.amount)).collect();
            paid.sort();
            let computed = Kept { key, figures, paid };
            kept.put(gym_id, computed.clone());
            computed
        }
    };
    Ok(Summary { figures, facilities: state.facilities, month: (first, next.pred_opt().unwrap_or(first)), paid })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn month_bounds_cover_december() {
        let d = NaiveDate::from_ymd_opt(2026, 12, 31).unwrap();
        let (a, b) = month_bounds(d).unwrap();
        assert_eq!(a.to_string(), "2026-12-01");
        assert_eq!(b.to_string(), "2027-01-01");
    }
}
