//! `Events`: the gym's webhook events, listed and read as their deliveries carry them. Writing
//! them is `crate::webhooks::outbox`; removing them after their time, `crate::webhooks::retention`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use entity::webhook_event::{self, Column, Entity};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde::Deserialize;
use uuid::Uuid;

use super::{Handlers, attendance::Period, find_in_gym, webhooks::event_type};
use crate::listing::{Envelope, Listing, Total, list_page};
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{
    context::RequestContext,
    errors::ApiError,
    pagination::{Page, ask},
    webhooks::EventType,
};

const KIND: &str = "event";

/// An event's envelope as it was written and delivered.
#[derive(Deserialize)]
struct Stored {
    created_at: DateTime<Utc>,
    data: BTreeMap<String, serde_json::Value>,
    id: Uuid,
    r#type: String,
}

/// The event of a stored row: its envelope read back, which writes the same bytes again (the
/// document lists `Event`'s fields in the order of the envelope's keys).
fn event(row: webhook_event::Model) -> Result<Event, ApiError> {
    let broken = |what: String| ApiError::internal(anyhow::anyhow!("event {}: {what}", row.id));
    let stored: Stored = serde_json::from_str(&row.payload).map_err(|e| broken(e.to_string()))?;
    let kind = EventType::parse(&stored.r#type).ok_or_else(|| broken(format!("unknown type {:?}", stored.r#type)))?;
    Ok(Event {
        created_at: stored.created_at,
        data: stored.data,
        id: stored.id,
        object: EventObject::Event,
        r#type: event_type(kind),
    })
}

impl EventsApi for Handlers {
    async fn list_events(&self, ctx: &RequestContext, p: ListEventsParams) -> Result<ListEventsResponse, ApiError> {
        let period = Period::read(p.from.as_deref(), p.to.as_deref(), ctx.tenant.timezone)?;
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("event_type", p.event_type.map(|t| t.as_str().to_string()));
        page.filter("from", p.from.clone());
        page.filter("to", p.to.clone());
        let mut select = Entity::find();
        if let Some(t) = p.event_type {
            select = select.filter(Column::EventType.eq(t.as_str()));
        }
        let select = period.narrow(select, Column::CreatedAt);
        // Events never change: their creation is their last update, and their order.
        let listing = Listing {
            gym: Column::GymId,
            created: Column::CreatedAt,
            updated: Column::CreatedAt,
            order: Column::CreatedAt,
            id: Column::Id,
            counted: None,
        };
        let rows = list_page(self.db(), ctx, &mut page, select, listing, None, Total::Counted).await?;
        let data = rows.into_iter().map(event).collect::<Result<Vec<_>, _>>()?;
        Ok(ListEventsResponse::Ok(Json(EventList::of(&page, data))))
    }

    async fn get_event(&self, ctx: &RequestContext, p: GetEventParams) -> Result<GetEventResponse, ApiError> {
        let row = find_in_gym::<Entity>(self.db(), ctx.tenant.gym_id, KIND, &p.id).await?;
        Ok(GetEventResponse::Ok(Json(event(row)?)))
    }
}
