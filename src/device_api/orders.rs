//! `Orders`: sales at the counter, as the kiosk and the front desk see them. The records of a
//! payment and a print job are shared with `terminals` and `printers`.

use chrono::{DateTime, Utc};
use entity::ids::MemberId;
use entity::{payment_job, print_job, purchase};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use super::DeviceHandlers;
use crate::{
    context::RequestContext,
    errors::ApiError,
    frontdesk::{
        printer,
        sales::{self, NewOrder, Sale},
        terminal,
    },
    listing::{Envelope, Total, list_page, listing},
    openapi::device_api::*,
    pagination::{Page, ask},
    records::now,
    types::wire::Json,
};

fn money(amount: i64, currency: &str) -> Money {
    Money { amount, currency: currency.to_string() }
}

/// A payment job as the API returns it, its state as it reads at `at`.
pub(super) fn payment(j: &payment_job::Model, at: DateTime<Utc>) -> PaymentJob {
    PaymentJob {
        object: PaymentJobObject::PaymentJob,
        id: j.id,
        order_id: j.purchase_id,
        facility_id: j.facility_id,
        state: terminal::state(j, at).into(),
        amount: money(j.amount, &j.currency),
        device_id: j.device_id.into(),
        reserved_until: j.reserved_until.into(),
        card_scheme: j.card_scheme.clone().into(),
        card_last4: j.card_last4.clone().into(),
        reason: j.reason.clone().into(),
        reported_at: j.reported_at.into(),
        created_at: j.created_at,
    }
}

/// A print job as the API returns it, with its receipt.
pub(super) fn print(j: &print_job::Model, r: &printer::Receipt) -> PrintJob {
    PrintJob {
        object: PrintJobObject::PrintJob,
        id: j.id,
        order_id: j.purchase_id,
        facility_id: j.facility_id,
        state: j.state.into(),
        receipt: Receipt {
            number: r.number,
            gym_name: r.gym_name.clone(),
            order_id: r.order_id,
            lines: r
                .lines
                .iter()
                .map(|l| ReceiptLine {
                    description: l.description.clone(),
                    quantity: l.quantity,
                    unit_amount: l.unit_amount,
                    line_amount: l.line_amount,
                })
                .collect(),
            total: money(r.total, &r.currency),
            paid_at: r.paid_at,
            local_time: r.local_time.clone(),
            timezone: r.timezone.clone(),
            facility_id: r.facility_id,
            facility_name: r.facility_name.clone().into(),
        },
        device_id: j.device_id.into(),
        delivered_at: j.delivered_at.into(),
        reason: j.reason.clone().into(),
        reported_at: j.reported_at.into(),
        created_at: j.created_at,
    }
}

/// An order as the API returns it, for the `gym` its receipts name.
pub(super) fn order(s: &Sale, gym: &printer::GymLabel, at: DateTime<Utc>) -> Order {
    let p = &s.purchase;
    Order {
        object: OrderObject::Order,
        id: p.id,
        device_id: p.device_id.into(),
        facility_id: p.facility_id.unwrap_or_default(),
        member_id: p.member_id.map(MemberId::uuid).into(),
        lines: s
            .lines
            .iter()
            .map(|l| OrderLine {
                product_id: l.product_id.into(),
                description: l.description.clone(),
                quantity: l.quantity,
                unit_price: money(l.unit_amount, &p.currency),
                total: money(l.line_amount, &p.currency),
            })
            .collect(),
        total: money(p.total_amount, &p.currency),
        payment_status: p.payment_status.into(),
        receipt_number: p.receipt_number.into(),
        payments: s.payments.iter().map(|j| payment(j, at)).collect(),
        receipts: s.receipts.iter().map(|j| print(j, &printer::receipt(gym, p, &s.lines, j))).collect(),
        created_at: p.created_at,
        updated_at: p.updated_at,
    }
}

impl DeviceHandlers {
    /// An order as the API returns it (the gym's name and time zone read for its receipts).
    async fn answer(&self, ctx: &RequestContext, sale: &Sale) -> Result<Order, ApiError> {
        let gym = match sale.receipts.is_empty() {
            true => printer::GymLabel::unnamed(ctx.tenant.timezone.name()),
            false => self.gym_label(ctx).await?,
        };
        Ok(order(sale, &gym, now()))
    }
}

impl OrdersApi for DeviceHandlers {
    async fn list_orders(&self, ctx: &RequestContext, p: ListOrdersParams) -> Result<ListOrdersResponse, ApiError> {
        use entity::states::PaymentStatus;
        use purchase::Column as C;
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("open", p.open.map(|o| o.to_string()));
        page.filter("facility_id", p.facility_id.map(|f| f.to_string()));
        let mut select = purchase::Entity::find().filter(C::FacilityId.is_not_null());
        let open = [PaymentStatus::Pending, PaymentStatus::Failed];
        select = match p.open {
            Some(true) => select.filter(C::PaymentStatus.is_in(open)),
            Some(false) => select.filter(C::PaymentStatus.is_not_in(open)),
            None => select,
        };
        if let Some(f) = p.facility_id {
            select = select.filter(C::FacilityId.eq(f));
        }
        let rows =
            list_page(self.db(), ctx, &mut page, select, listing!(purchase, CreatedAt, None), None, Total::Counted)
                .await?;
        let sales = sales::sales_of(self.db(), ctx.tenant.gym_id, rows).await?;
        let gym = self.gym_label(ctx).await?;
        let at = now();
        let orders = sales.iter().map(|s| order(s, &gym, at));
        Ok(ListOrdersResponse::Ok(Json(OrderList::of(&page, orders))))
    }

    async fn create_order(&self, ctx: &RequestContext, p: CreateOrderParams) -> Result<CreateOrderResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let b = p.body;
        let new = NewOrder {
            device_id: b.device_id.take(),
            facility_id: b.facility_id.take(),
            member_id: b.member_id.take().map(MemberId::from),
            lines: b.lines.iter().map(|l| (l.product_id, l.quantity)).collect(),
        };
        if let Some(kiosk) = new.device_id {
            self.state.heartbeats.seen(db.orm(), ctx.tenant.gym_id, kiosk);
        }
        let (sale, queued) = sales::order(&db, &self.state.wakes, &ctx.tenant, new).await?;
        crate::webhooks::wake_if(&db, &self.state.webhooks, queued).await;
        Ok(CreateOrderResponse::Created(Json(self.answer(ctx, &sale).await?)))
    }

    async fn get_order(&self, ctx: &RequestContext, p: GetOrderParams) -> Result<GetOrderResponse, ApiError> {
        let sale = sales::find(self.db(), ctx.tenant.gym_id, &p.order_id).await?;
        Ok(GetOrderResponse::Ok(Json(self.answer(ctx, &sale).await?)))
    }

    async fn retry_payment(
        &self,
        ctx: &RequestContext,
        p: RetryPaymentParams,
    ) -> Result<RetryPaymentResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let (sale, queued) = sales::retry(&db, &self.state.wakes, ctx.tenant.gym_id, &p.order_id).await?;
        crate::webhooks::wake_if(&db, &self.state.webhooks, queued).await;
        Ok(RetryPaymentResponse::Ok(Json(self.answer(ctx, &sale).await?)))
    }

    async fn cancel_order(&self, ctx: &RequestContext, p: CancelOrderParams) -> Result<CancelOrderResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let (sale, queued) = sales::cancel(&db, ctx.tenant.gym_id, &p.order_id).await?;
        crate::webhooks::wake_if(&db, &self.state.webhooks, queued).await;
        Ok(CancelOrderResponse::Ok(Json(self.answer(ctx, &sale).await?)))
    }

    async fn reprint_receipt(
        &self,
        ctx: &RequestContext,
        p: ReprintReceiptParams,
    ) -> Result<ReprintReceiptResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let sale = sales::reprint(&db, &self.state.wakes, ctx.tenant.gym_id, &p.order_id).await?;
        Ok(ReprintReceiptResponse::Ok(Json(self.answer(ctx, &sale).await?)))
    }
}
