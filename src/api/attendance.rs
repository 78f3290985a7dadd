//! `Attendance`: check-ins and door access events. `/attendance` and `/access-logs` are one list.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use entity::attendance;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use super::Handlers;
use crate::listing::{Envelope, list_page, listing};
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

async fn list(h: &Handlers, ctx: &RequestContext, p: ListAttendanceParams) -> Result<AttendanceList, ApiError> {
    use attendance::{Column, Entity};
    let tz: Tz = ctx.tenant.timezone;
    let mut errors = FieldErrors::new();
    // The document's pattern has refused what is not a date or a date-time; what is left here is a
    // day or time past what the gym's calendar can place.
    let message = |name: &str| format!("The {name} parameter is a date or time out of range.");
    let from = p.from.as_deref().map(|v| parse_bound(v, tz, Bound::Start).ok_or(()));
    let to = p.to.as_deref().map(|v| parse_bound(v, tz, Bound::End).ok_or(()));
    if matches!(from, Some(Err(()))) {
        errors.add("from", message("from"));
    }
    if matches!(to, Some(Err(()))) {
        errors.add("to", message("to"));
    }
    errors.into_result()?;

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
    if let Some(Ok((t, _))) = from {
        select = select.filter(Column::OccurredAt.gte(t));
    }
    match to {
        Some(Ok((t, true))) => select = select.filter(Column::OccurredAt.lt(t)),
        Some(Ok((t, false))) => select = select.filter(Column::OccurredAt.lte(t)),
        _ => {}
    }
    let listing = listing!(attendance, OccurredAt, Some(counters::ATTENDANCE_ROWS));
    // The counters know totals per status, not per member or period.
    let counted = (p.member_id.is_none() && from.is_none() && to.is_none()).then(|| p.status.map(|s| s.as_str()));
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
