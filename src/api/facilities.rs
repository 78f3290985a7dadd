//! The gym's facilities, read only: the ids `facility_id` takes.

use entity::facility;

use super::{Handlers, find_in_gym};
use crate::listing::{Envelope, Total, list_page, listing};
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{
    context::RequestContext,
    errors::ApiError,
    pagination::{Page, ask},
};

/// A facility as the API shows it; `gym_timezone` is its time zone when it has none of its own.
fn record(m: facility::Model, gym_timezone: &str) -> Facility {
    Facility {
        object: FacilityObject::Facility,
        id: m.id,
        name: m.name,
        timezone: m.timezone.unwrap_or_else(|| gym_timezone.to_string()),
        address: m.address.into(),
        legacy_id: m.legacy_id.into(),
        archived_at: m.archived_at.into(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

impl FacilitiesApi for Handlers {
    async fn list_facilities(
        &self,
        ctx: &RequestContext,
        p: ListFacilitiesParams,
    ) -> Result<ListFacilitiesResponse, ApiError> {
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        let select = <facility::Entity as sea_orm::EntityTrait>::find();
        let listing = listing!(facility, CreatedAt, None);
        let rows = list_page(self.db(), ctx, &mut page, select, listing, p.updated_since, Total::Counted).await?;
        let tz = ctx.tenant.timezone.name();
        Ok(ListFacilitiesResponse::Ok(Json(FacilityList::of(&page, rows.into_iter().map(|m| record(m, tz))))))
    }

    async fn get_facility(&self, ctx: &RequestContext, p: GetFacilityParams) -> Result<GetFacilityResponse, ApiError> {
        let m = find_in_gym::<facility::Entity>(self.db(), ctx.tenant.gym_id, "facility", &p.id).await?;
        Ok(GetFacilityResponse::Ok(Json(record(m, ctx.tenant.timezone.name()))))
    }
}
