//! `Statistics`: summary figures of the gym.

use chrono::{Datelike, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use entity::{facility, member_membership, purchase};
use poem_openapi::payload::Json;
use sea_orm::{
    ColumnTrait, Condition, EntityTrait, FromQueryResult, PaginatorTrait, QueryFilter, QuerySelect, sea_query::Expr,
};

use super::{Handlers, generated::*, money};
use crate::{accounts::now, context::RequestContext, counters, errors::ApiError, types::Date};

#[derive(FromQueryResult)]
struct CurrencySum {
    currency: String,
    amount: i64,
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

impl StatisticsApi for Handlers {
    async fn get_statistics(&self, ctx: &RequestContext) -> Result<GetStatisticsResponse, ApiError> {
        let gym_id = ctx.tenant.gym_id;
        let db = self.db();
        let tz: Tz = ctx.tenant.timezone.parse().unwrap_or(Tz::UTC);
        let at = now();
        let today = at.with_timezone(&tz).date_naive();

        let (first, next) =
            month_bounds(today).ok_or_else(|| ApiError::internal(anyhow::anyhow!("no month for {today}")))?;
        let instant = |d: NaiveDate| {
            d.and_hms_opt(0, 0, 0).and_then(|m| tz.from_local_datetime(&m).earliest()).map(|t| t.with_timezone(&Utc))
        };
        let (start, end) = instant(first)
            .zip(instant(next))
            .ok_or_else(|| ApiError::internal(anyhow::anyhow!("no local midnight")))?;

        // Independent queries, run side by side on the pool: the answer takes as long as the
        // slowest. Member counts come from the gym's counters, exact in every write's transaction.
        let active_memberships = member_membership::Entity::find()
            .filter(member_membership::Column::GymId.eq(gym_id))
            .filter(member_membership::Column::StartsOn.lte(today))
            .filter(
                Condition::any()
                    .add(member_membership::Column::EndsOn.is_null())
                    .add(member_membership::Column::EndsOn.gte(today)),
            )
            .count(db);
        let facilities = facility::Entity::find().filter(facility::Column::GymId.eq(gym_id)).count(db);
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
        let (total, active, inactive, active_memberships, facilities, sums) = tokio::try_join!(
            counters::members_as_of(db, gym_id, None, at),
            counters::members_as_of(db, gym_id, Some("active"), at),
            counters::members_as_of(db, gym_id, Some("inactive"), at),
            active_memberships,
            facilities,
            sums,
        )?;
        let members = MemberCounts { total, active, inactive };
        let mut paid: Vec<Money> = sums.into_iter().map(|s| money(s.amount, &s.currency)).collect();
        paid.sort_by(|a, b| a.currency.cmp(&b.currency));

        Ok(GetStatisticsResponse::Ok(Json(Statistics {
            object: StatisticsObject::Statistics,
            members,
            active_memberships: active_memberships as i64,
            facilities: facilities as i64,
            revenue_this_month: RevenuePeriod {
                starts_on: Date(first),
                ends_on: Date(next.pred_opt().unwrap_or(first)),
                timezone: tz.name().to_string(),
                paid,
            },
            generated_at: at,
        })))
    }
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
