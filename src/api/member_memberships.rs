//! `MemberMemberships`: which member holds which plan for which period (written by the import).

use chrono::NaiveDate;
use entity::ids::MemberId;
use entity::{member, member_membership};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, Select};
use uuid::Uuid;

use super::{Handlers, find_in_gym};
use crate::listing::{Envelope, Total, list_page, listing};
use crate::openapi::*;
use crate::types::{Date, wire::Json};
use crate::{
    context::RequestContext,
    errors::ApiError,
    pagination::{Page, ask},
};

fn record(m: member_membership::Model) -> Result<MemberMembership, ApiError> {
    let (plan_kind, plan_id) = match (m.membership_plan_id, m.subscription_plan_id) {
        (Some(id), _) => (PlanKind::Membership, id),
        (None, Some(id)) => (PlanKind::Subscription, id),
        // The import writes exactly one of the two: a row with neither was not written by gymapi.
        (None, None) => return Err(ApiError::internal(anyhow::anyhow!("member membership {} names no plan", m.id))),
    };
    Ok(MemberMembership {
        object: MemberMembershipObject::MemberMembership,
        id: m.id,
        member_id: m.member_id.uuid(),
        plan_kind,
        plan_id,
        starts_on: Date(m.starts_on),
        ends_on: m.ends_on.map(Date).into(),
        legacy_id: m.legacy_id.into(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    })
}

/// The filters both lists share.
struct Filters {
    member_id: Option<MemberId>,
    plan_id: Option<Uuid>,
    active_on: Option<NaiveDate>,
}

impl Filters {
    fn select(&self, page: &mut Page) -> Select<member_membership::Entity> {
        use member_membership::Column as C;
        page.filter("plan_id", self.plan_id.map(|id| id.to_string()));
        page.filter("active_on", self.active_on.map(|d| d.to_string()));
        let mut select = member_membership::Entity::find();
        if let Some(id) = self.member_id {
            select = select.filter(C::MemberId.eq(id));
        }
        if let Some(id) = self.plan_id {
            select = select.filter(Condition::any().add(C::MembershipPlanId.eq(id)).add(C::SubscriptionPlanId.eq(id)));
        }
        if let Some(day) = self.active_on {
            select = select
                .filter(C::StartsOn.lte(day))
                .filter(Condition::any().add(C::EndsOn.is_null()).add(C::EndsOn.gte(day)));
        }
        select
    }
}

async fn list(
    h: &Handlers,
    ctx: &RequestContext,
    mut page: Page,
    filters: Filters,
    updated_since: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<MemberMembershipList, ApiError> {
    let select = filters.select(&mut page);
    let listing = listing!(member_membership, CreatedAt, None);
    let rows = list_page(h.db(), ctx, &mut page, select, listing, updated_since, Total::Counted).await?;
    let data = rows.into_iter().map(record).collect::<Result<Vec<_>, _>>()?;
    Ok(MemberMembershipList::of(&page, data))
}

impl MemberMembershipsApi for Handlers {
    async fn list_memberships_of_member(
        &self,
        ctx: &RequestContext,
        p: ListMembershipsOfMemberParams,
    ) -> Result<ListMembershipsOfMemberResponse, ApiError> {
        let m = find_in_gym::<member::Entity>(self.db(), ctx.tenant.gym_id, "member", &p.id).await?;
        let page = Page::new(ctx, &self.state.walks, ask!(p));
        let filters = Filters { member_id: Some(m.id), plan_id: p.plan_id, active_on: p.active_on.map(|d| d.0) };
        let list = list(self, ctx, page, filters, p.updated_since).await?;
        Ok(ListMembershipsOfMemberResponse::Ok(Json(list)))
    }

    async fn list_member_memberships(
        &self,
        ctx: &RequestContext,
        p: ListMemberMembershipsParams,
    ) -> Result<ListMemberMembershipsResponse, ApiError> {
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("member_id", p.member_id.map(|id| id.to_string()));
        let filters = Filters {
            member_id: p.member_id.map(MemberId::from),
            plan_id: p.plan_id,
            active_on: p.active_on.map(|d| d.0),
        };
        let list = list(self, ctx, page, filters, p.updated_since).await?;
        Ok(ListMemberMembershipsResponse::Ok(Json(list)))
    }

    async fn get_member_membership(
        &self,
        ctx: &RequestContext,
        p: GetMemberMembershipParams,
    ) -> Result<GetMemberMembershipResponse, ApiError> {
        let kind = "member's membership";
        let m = find_in_gym::<member_membership::Entity>(self.db(), ctx.tenant.gym_id, kind, &p.id).await?;
        Ok(GetMemberMembershipResponse::Ok(Json(record(m)?)))
    }
}
