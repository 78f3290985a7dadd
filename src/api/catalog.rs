//! The read-only catalogues: membership plans, subscription plans, products, and sales.

use entity::{membership_plan, product, purchase, subscription_plan};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use super::{Handlers, find_in_gym, money};
use crate::listing::{Envelope, Total, list_page, listing};
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{
    context::RequestContext,
    counters,
    errors::ApiError,
    pagination::{Page, ask},
    purchases,
};

fn membership_plan(m: membership_plan::Model) -> MembershipPlan {
    MembershipPlan {
        object: MembershipPlanObject::MembershipPlan,
        id: m.id,
        name: m.name,
        description: m.description.into(),
        price: money(m.price_amount, &m.currency),
        duration_days: m.duration_days.into(),
        visit_limit: m.visit_limit.into(),
        status: m.status.into(),
        legacy_id: m.legacy_id.into(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

fn subscription_plan(m: subscription_plan::Model) -> SubscriptionPlan {
    SubscriptionPlan {
        object: SubscriptionPlanObject::SubscriptionPlan,
        id: m.id,
        name: m.name,
        description: m.description.into(),
        price: money(m.price_amount, &m.currency),
        billing_interval: m.billing_interval.into(),
        billing_interval_count: m.billing_interval_count,
        status: m.status.into(),
        legacy_id: m.legacy_id.into(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

fn product(m: product::Model) -> Product {
    Product {
        object: ProductObject::Product,
        id: m.id,
        name: m.name,
        description: m.description.into(),
        sku: m.sku.into(),
        price: money(m.price_amount, &m.currency),
        status: m.status.into(),
        legacy_id: m.legacy_id.into(),
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

impl MembershipsApi for Handlers {
    async fn list_membership_plans(
        &self,
        ctx: &RequestContext,
        p: ListMembershipPlansParams,
    ) -> Result<ListMembershipPlansResponse, ApiError> {
        use membership_plan::Entity;
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        let listing = listing!(membership_plan, CreatedAt, Some(counters::MEMBERSHIP_PLAN_ROWS));
        let rows =
            list_page(self.db(), ctx, &mut page, Entity::find(), listing, p.updated_since, Total::Kept(None)).await?;
        Ok(ListMembershipPlansResponse::Ok(Json(MembershipPlanList::of(&page, rows.into_iter().map(membership_plan)))))
    }

    async fn get_membership_plan(
        &self,
        ctx: &RequestContext,
        p: GetMembershipPlanParams,
    ) -> Result<GetMembershipPlanResponse, ApiError> {
        use membership_plan::Entity;
        let m = find_in_gym::<Entity>(self.db(), ctx.tenant.gym_id, "membership plan", &p.id).await?;
        Ok(GetMembershipPlanResponse::Ok(Json(membership_plan(m))))
    }
}

impl SubscriptionsApi for Handlers {
    async fn list_subscription_plans(
        &self,
        ctx: &RequestContext,
        p: ListSubscriptionPlansParams,
    ) -> Result<ListSubscriptionPlansResponse, ApiError> {
        use subscription_plan::Entity;
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        let listing = listing!(subscription_plan, CreatedAt, Some(counters::SUBSCRIPTION_PLAN_ROWS));
        let rows =
            list_page(self.db(), ctx, &mut page, Entity::find(), listing, p.updated_since, Total::Kept(None)).await?;
        Ok(ListSubscriptionPlansResponse::Ok(Json(SubscriptionPlanList::of(
            &page,
            rows.into_iter().map(subscription_plan),
        ))))
    }

    async fn get_subscription_plan(
        &self,
        ctx: &RequestContext,
        p: GetSubscriptionPlanParams,
    ) -> Result<GetSubscriptionPlanResponse, ApiError> {
        use subscription_plan::Entity;
        let m = find_in_gym::<Entity>(self.db(), ctx.tenant.gym_id, "subscription plan", &p.id).await?;
        Ok(GetSubscriptionPlanResponse::Ok(Json(subscription_plan(m))))
    }
}

impl ProductsApi for Handlers {
    async fn list_products(
        &self,
        ctx: &RequestContext,
        p: ListProductsParams,
    ) -> Result<ListProductsResponse, ApiError> {
        use product::{Column, Entity};
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("status", p.status.map(|s| s.as_str().to_string()));
        let mut select = Entity::find();
        if let Some(s) = p.status {
            select = select.filter(Column::Status.eq(s.as_str()));
        }
        let listing = listing!(product, CreatedAt, Some(counters::PRODUCT_ROWS));
        let status = p.status.map(|s| s.as_str());
        let rows = list_page(self.db(), ctx, &mut page, select, listing, p.updated_since, Total::Kept(status)).await?;
        Ok(ListProductsResponse::Ok(Json(ProductList::of(&page, rows.into_iter().map(product)))))
    }

    async fn get_product(&self, ctx: &RequestContext, p: GetProductParams) -> Result<GetProductResponse, ApiError> {
        use product::Entity;
        let m = find_in_gym::<Entity>(self.db(), ctx.tenant.gym_id, "product", &p.id).await?;
        Ok(GetProductResponse::Ok(Json(product(m))))
    }
}

impl PurchasesApi for Handlers {
    async fn list_purchases(
        &self,
        ctx: &RequestContext,
        p: ListPurchasesParams,
    ) -> Result<ListPurchasesResponse, ApiError> {
        use purchase::{Column, Entity};
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("member_id", p.member_id.map(|id| id.to_string()));
        page.filter("payment_status", p.payment_status.map(|s| s.as_str().to_string()));
        let mut select = Entity::find();
        if let Some(id) = p.member_id {
            select = select.filter(Column::MemberId.eq(id));
        }
        if let Some(s) = p.payment_status {
            select = select.filter(Column::PaymentStatus.eq(s.as_str()));
        }
        let listing = listing!(purchase, PurchasedAt, Some(counters::PURCHASE_ROWS));
        // The counters know totals per payment status, not per member.
        let counted = match p.member_id {
            None => Total::Kept(p.payment_status.map(|s| s.as_str())),
            Some(_) => Total::Counted,
        };
        let rows = list_page(self.db(), ctx, &mut page, select, listing, p.updated_since, counted).await?;
        let records = purchases::records(self.db(), ctx.tenant.gym_id, rows).await?;
        Ok(ListPurchasesResponse::Ok(Json(PurchaseList::of(&page, records))))
    }

    async fn get_purchase(&self, ctx: &RequestContext, p: GetPurchaseParams) -> Result<GetPurchaseResponse, ApiError> {
        use purchase::Entity;
        let m = find_in_gym::<Entity>(self.db(), ctx.tenant.gym_id, "purchase", &p.id).await?;
        let record = purchases::records(self.db(), ctx.tenant.gym_id, vec![m]).await?.into_iter().next();
        Ok(GetPurchaseResponse::Ok(Json(record.ok_or_else(|| ApiError::not_found("purchase", &p.id))?)))
    }
}
