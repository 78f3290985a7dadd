//! `Webhooks`: the gym's deliveries, and sending one again. Sending is `crate::webhooks::dispatch`.

use chrono::{DateTime, Utc};
use entity::webhook_delivery::{self, Column, Entity};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde::Deserialize;

use super::{Handlers, find_in_gym};
use crate::listing::{Envelope, Total, list_page, listing};
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{
    context::RequestContext,
    errors::ApiError,
    pagination::{Page, ask},
    webhooks::EventType,
};

const KIND: &str = "webhook delivery";

/// One attempt as the dispatcher stores it.
#[derive(Deserialize)]
struct StoredAttempt {
    attempted_at: DateTime<Utc>,
    response_status: Option<i32>,
    response_excerpt: Option<String>,
    error: Option<String>,
    duration_ms: i64,
}

/// The document's value of an event type: a type added to `EventType` alone does not compile.
pub(super) fn event_type(t: EventType) -> WebhookEventType {
    match t {
        EventType::MemberCreated => WebhookEventType::MemberCreated,
        EventType::MemberUpdated => WebhookEventType::MemberUpdated,
        EventType::AttendanceCreated => WebhookEventType::AttendanceCreated,
        EventType::PurchaseCreated => WebhookEventType::PurchaseCreated,
        EventType::PurchaseUpdated => WebhookEventType::PurchaseUpdated,
        EventType::ImportCompleted => WebhookEventType::ImportCompleted,
        EventType::Ping => WebhookEventType::Ping,
    }
}

fn delivery(d: webhook_delivery::Model) -> Result<WebhookDelivery, ApiError> {
    let stored = d.event_type;
    let event_type = EventType::parse(&stored)
        .map(event_type)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("a delivery holds an unknown event type {stored:?}")))?;
    let attempts: Vec<StoredAttempt> = serde_json::from_str(&d.attempts).unwrap_or_default();
    Ok(WebhookDelivery {
        object: WebhookDeliveryObject::WebhookDelivery,
        id: d.id,
        endpoint_id: d.endpoint_id,
        event_id: d.event_id,
        event_type,
        status: d.status.into(),
        attempts: attempts
            .into_iter()
            .map(|a| WebhookAttempt {
                attempted_at: a.attempted_at,
                response_status: a.response_status.into(),
                response_excerpt: a.response_excerpt.into(),
                error: a.error.into(),
                duration_ms: a.duration_ms.max(0),
            })
            .collect(),
        next_attempt_at: d.next_attempt_at.into(),
        created_at: d.created_at,
        updated_at: d.updated_at,
    })
}

impl WebhooksApi for Handlers {
    async fn list_webhook_deliveries(
        &self,
        ctx: &RequestContext,
        p: ListWebhookDeliveriesParams,
    ) -> Result<ListWebhookDeliveriesResponse, ApiError> {
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("status", p.status.map(|s| s.as_str().to_string()));
        page.filter("event_type", p.event_type.clone());
        page.filter("endpoint_id", p.endpoint_id.map(|id| id.to_string()));
        let mut select = Entity::find();
        if let Some(s) = p.status {
            select = select.filter(Column::Status.eq(s.as_str()));
        }
        if let Some(t) = &p.event_type {
            select = select.filter(Column::EventType.eq(t.as_str()));
        }
        if let Some(id) = p.endpoint_id {
            select = select.filter(Column::EndpointId.eq(id));
        }
        let listing = listing!(webhook_delivery, CreatedAt, None);
        let rows = list_page(self.db(), ctx, &mut page, select, listing, p.updated_since, Total::Counted).await?;
        let data = rows.into_iter().map(delivery).collect::<Result<Vec<_>, _>>()?;
        Ok(ListWebhookDeliveriesResponse::Ok(Json(WebhookDeliveryList::of(&page, data))))
    }

    async fn get_webhook_delivery(
        &self,
        ctx: &RequestContext,
        p: GetWebhookDeliveryParams,
    ) -> Result<GetWebhookDeliveryResponse, ApiError> {
        let d = find_in_gym::<Entity>(self.db(), ctx.tenant.gym_id, KIND, &p.id).await?;
        Ok(GetWebhookDeliveryResponse::Ok(Json(delivery(d)?)))
    }

    async fn redeliver_webhook_delivery(
        &self,
        ctx: &RequestContext,
        p: RedeliverWebhookDeliveryParams,
    ) -> Result<RedeliverWebhookDeliveryResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let id = super::parse_id(KIND, &p.id)?;
        let txn = crate::db::begin_writing(&db).await?;
        let d = crate::webhooks::redeliver(&txn, ctx.tenant.gym_id, id)
            .await?
            .ok_or_else(|| ApiError::not_found(KIND, &p.id))?;
        txn.commit().await?;
        crate::webhooks::wake(&db, &self.state.webhooks).await;
        Ok(RedeliverWebhookDeliveryResponse::Accepted(Json(delivery(d)?)))
    }
}
