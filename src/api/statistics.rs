//! `Statistics`: the gym's summary figures, computed and kept by `counters::statistics`.

use chrono_tz::Tz;

use super::{Handlers, money};
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{
    context::RequestContext,
    counters::statistics::{self, Figures},
    errors::ApiError,
    records::now,
    types::Date,
};

impl StatisticsApi for Handlers {
    async fn get_statistics(&self, ctx: &RequestContext) -> Result<GetStatisticsResponse, ApiError> {
        let tz: Tz = ctx.tenant.timezone;
        let at = now();
        let s = statistics::summary(self.db(), &self.state.statistics, ctx.tenant.gym_id, tz, at)
            .await
            .map_err(ApiError::internal)?;
        let Figures { total, active, inactive, active_memberships, check_ins_today } = s.figures;
        Ok(GetStatisticsResponse::Ok(Json(Statistics {
            object: StatisticsObject::Statistics,
            members: MemberCounts { total, active, inactive },
            active_memberships,
            check_ins_today,
            facilities: s.facilities,
            revenue_this_month: RevenuePeriod {
                starts_on: Date(s.month.0),
                ends_on: Date(s.month.1),
                timezone: tz.name().to_string(),
                paid: s.paid.iter().map(|(currency, amount)| money(*amount, currency)).collect(),
            },
            generated_at: at,
        })))
    }
}
