//! `Doorbells`: a visitor rings.

use entity::states::DeviceKind;

use super::{DeviceHandlers, rings::record};
use crate::{
    context::RequestContext, errors::ApiError, frontdesk::bell, openapi::device_api::*, records::now, types::wire::Json,
};

impl DoorbellsApi for DeviceHandlers {
    async fn ring(&self, ctx: &RequestContext, p: RingParams) -> Result<RingResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let doorbell = self.device(ctx, &p.device_id, Some(DeviceKind::Doorbell)).await?;
        let r = bell::ring(&db, &self.state.wakes, &doorbell, p.body.message.take()).await?;
        Ok(RingResponse::Created(Json(record(r, now()))))
    }
}
