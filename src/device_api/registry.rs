//! `Devices`: registering the gym's devices, listing them, and their heartbeat.

use entity::{device, states::DeviceKind};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use super::{DeviceHandlers, record};
use crate::{
    context::RequestContext,
    db::begin_writing,
    errors::ApiError,
    frontdesk::devices,
    listing::{Envelope, Total, list_page, listing},
    openapi::device_api::*,
    pagination::{Page, ask},
    records::now,
    types::wire::Json,
};

impl DevicesApi for DeviceHandlers {
    async fn list_devices(&self, ctx: &RequestContext, p: ListDevicesParams) -> Result<ListDevicesResponse, ApiError> {
        let mut page = Page::new(ctx, &self.state.walks, ask!(p));
        page.filter("kind", p.kind.map(|k| k.as_str().to_string()));
        page.filter("facility_id", p.facility_id.map(|f| f.to_string()));
        let mut select = device::Entity::find();
        if let Some(k) = p.kind {
            select = select.filter(device::Column::Kind.eq(DeviceKind::from(k)));
        }
        if let Some(f) = p.facility_id {
            select = select.filter(device::Column::FacilityId.eq(f));
        }
        let rows =
            list_page(self.db(), ctx, &mut page, select, listing!(device, CreatedAt, None), None, Total::Counted)
                .await?;
        let at = now();
        Ok(ListDevicesResponse::Ok(Json(DeviceList::of(&page, rows.into_iter().map(|d| record(d, at))))))
    }

    async fn register_device(
        &self,
        ctx: &RequestContext,
        p: RegisterDeviceParams,
    ) -> Result<RegisterDeviceResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let b = p.body;
        let txn = begin_writing(&db).await?;
        let d = devices::register(&txn, ctx.tenant.gym_id, b.kind.into(), &b.name, b.facility_id.take()).await?;
        txn.commit().await?;
        Ok(RegisterDeviceResponse::Created(Json(record(d, now()))))
    }

    async fn get_device(&self, ctx: &RequestContext, p: GetDeviceParams) -> Result<GetDeviceResponse, ApiError> {
        // The front desk looking at a device: not the device's own request, so not its heartbeat.
        let d = devices::find(self.db(), ctx.tenant.gym_id, &p.device_id, None).await?;
        Ok(GetDeviceResponse::Ok(Json(record(d, now()))))
    }

    async fn update_device(
        &self,
        ctx: &RequestContext,
        p: UpdateDeviceParams,
    ) -> Result<UpdateDeviceResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        // The front desk changing a device: not the device's own request, so not its heartbeat.
        let b = p.body;
        let txn = begin_writing(&db).await?;
        let d = devices::find(&txn, ctx.tenant.gym_id, &p.device_id, None).await?;
        let change = devices::DeviceChange { name: b.name, facility_id: b.facility_id };
        let d = devices::apply(&txn, d, change).await?;
        txn.commit().await?;
        Ok(UpdateDeviceResponse::Ok(Json(record(d, now()))))
    }

    async fn heartbeat(&self, ctx: &RequestContext, p: HeartbeatParams) -> Result<HeartbeatResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let mut d = devices::find(&db, ctx.tenant.gym_id, &p.device_id, None).await?;
        let at = now();
        let txn = begin_writing(&db).await?;
        devices::mark_seen(&txn, d.gym_id, d.id, at).await?;
        txn.commit().await?;
        if d.last_seen_at.is_none_or(|t| t < at - chrono::Duration::from_std(devices::SEEN_EVERY).unwrap_or_default()) {
            d.last_seen_at = Some(at);
        }
        Ok(HeartbeatResponse::Ok(Json(record(d, at))))
    }
}
