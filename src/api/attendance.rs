//! `Attendance`: check-ins and door access events. `/attendance` and `/access-logs` are one list.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use entity::attendance;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Select};

use super::Handlers;
use crate::listing::{Envelope, Total, list_page, listing};
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{
    context::RequestContext,
    counters,
    errors::{ApiError, FieldErrors},
    pagination::{Page, ask},
};

/// Which end of a day a bare date stands for.
#[derive(Clone, Copy)]
enum Bound {
    /// `from`: the first instant of the day.
    Start,
    /// `to`: the first instant of the next day (exclusive).
    End,
}

/// A `from`/`to` value: an RFC 3339 time, or a date meaning the whole day in the gym's time zone.
/// Returns the instant and whether the bound is exclusive.
fn parse_bound(value: &str, tz: Tz, bound: Bound) -> Option<(DateTime<Utc>, bool)> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Some((t.with_timezone(&Utc), false));
    }
    let date = NaiveDate::parse_from_str(value, "%Y-%m-%d").ok().filter(|_| value.len() == 10)?;
    let day = match bound {
        Bound::Start => date,
        Bound::End => date.succ_opt()?,
    };
    let midnight = day.and_hms_opt(0, 0, 0)?;
    // The earliest instant of that local midnight (a DST gap moves it forward).
    let local = tz
        .from_local_datetime(&midnight)
        .earliest()
        .or_else(|| tz.from_local_datetime(&(midnight + chrono::Duration::hours(1))).earliest())?;
    Some((local.with_timezone(&Utc), matches!(bound, Bound::End)))
}

/// The instants a list's `from` and `to` stand for (`to` with whether it is exclusive).
pub(super) struct Period {
    from: Option<DateTime<Utc>>,
    to: Option<(DateTime<Utc>, bool)>,
}

impl Period {
    /// `from` and `to` read in the gym's time zone `tz`, or the 422 naming each that the gym's
    /// calendar cannot place (the document's pattern has refused what is not a date or a
    /// date-time).
    pub(super) fn read(from: Option<&str>, to: Option<&str>, tz: Tz) -> Result<Self, ApiError> {
        let mut errors = FieldErrors::new();
        let mut bound = |name: &str, value: Option<&str>, which: Bound| {
            let found = value.map(|v| parse_bound(v, tz, which));
            if matches!(found, Some(None)) {
                errors.add(name, format!("The {name} parameter is a date or time out of range."));
            }
            found.flatten()
        };
        let (from, to) = (bound("from", from, Bound::Start).map(|(t, _)| t), bound("to", to, Bound::End));
        errors.into_result()?;
        Ok(Self { from, to })
    }

    /// Whether neither end is set.
    pub(super) fn is_open(&self) -> bool {
        self.from.is_none() && self.to.is_none()
    }

    /// `select` narrowed to the period on `column`.
    pub(super) fn narrow<E: EntityTrait>(&self, mut select: Select<E>, column: E::Column) -> Select<E> {
        if let Some(t) = self.from {
            select = select.filter(column.gte(t));
        }
        match self.to {
            Some((t, true)) => select.filter(column.lt(t)),
            Some((t, false)) => select.filter(column.lte(t)),
            None => select,
        }
    }
}

async fn list(h: &Handlers, ctx: &RequestContext, p: ListAttendanceParams) -> Result<AttendanceList, ApiError> {
    use attendance::{Column, Entity};
    let period = Period::read(p.from.as_deref(), p.to.as_deref(), ctx.tenant.timezone)?;
    let mut page = Page::new(ctx, &h.state.walks, ask!(p));
    page.filter("member_id", p.member_id.map(|id| id.to_string()));
    page.filter("status", p.status.map(|s| s.as_str().to_string()));
    page.filter("from", p.from.clone());
    page.filter("to", p.to.clone());
    let mut select = Entity::find();
    if let Some(id) = p.member_id {
        select = select.filter(Column::MemberId.eq(id));
    }
    if let Some(s) = p.status {
        select = select.filter(Column::Status.eq(s.as_str()));
    }
    let select = period.narrow(select, Column::OccurredAt);
    let listing = listing!(attendance, OccurredAt, Some(counters::ATTENDANCE_ROWS));
    // The counters know totals per status, and each member their own; a period's, or a member's
    // of one status, are counted.
    let counted = match (p.member_id, p.status, period.is_open()) {
        (None, status, true) => Total::Kept(status.map(|s| s.as_str())),
        (Some(member), None, true) => Total::MemberEntries(member.into()),
        _ => Total::Counted,
    };
    let rows = list_page(h.db(), ctx, &mut page, select, listing, p.updated_since, counted).await?;
    Ok(AttendanceList::of(&page, rows.into_iter().map(crate::attendance::record)))
}

impl AttendanceApi for Handlers {
    async fn list_attendance(
        &self,
        ctx: &RequestContext,
        p: ListAttendanceParams,
    ) -> Result<ListAttendanceResponse, ApiError> {
        Ok(ListAttendanceResponse::Ok(Json(list(self, ctx, p).await?)))
    }

    async fn list_access_logs(
        &self,
        ctx: &RequestContext,
        p: ListAccessLogsParams,
    ) -> Result<ListAccessLogsResponse, ApiError> {
        let p = ListAttendanceParams {
            member_id: p.member_id,
            status: p.status.map(|s| entity::states::AttendanceStatus::from(s).into()),
            from: p.from,
            to: p.to,
            updated_since: p.updated_since,
            as_of: p.as_of,
            cursor: p.cursor,
            page: p.page,
            per_page: p.per_page,
        };
        Ok(ListAccessLogsResponse::Ok(Json(list(self, ctx, p).await?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_is_the_whole_day_in_the_gyms_zone() {
        let tz: Tz = "Europe/Berlin".parse().unwrap();
        let (start, excl) = parse_bound("2026-03-01", tz, Bound::Start).unwrap();
        assert_eq!(start.to_rfc3339(), "2026-02-28T23:00:00+00:00");
        assert!(!excl);
        let (end, excl) = parse_bound("2026-03-01", tz, Bound::End).unwrap();
        assert_eq!(end.to_rfc3339(), "2026-03-01T23:00:00+00:00");
        assert!(excl);
        assert!(parse_bound("2026-3-1", tz, Bound::Start).is_none());
        assert!(parse_bound("yesterday", tz, Bound::Start).is_none());
        let (t, _) = parse_bound("2026-03-01T10:00:00+02:00", tz, Bound::Start).unwrap();
        assert_eq!(t.to_rfc3339(), "2026-03-01T08:00:00+00:00");
    }
}
