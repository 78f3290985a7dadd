//! `Rings`: the front desk's long poll for pending rings, and its answers.

use super::{DeviceHandlers, gym, wait};
use crate::{
    context::RequestContext, errors::ApiError, frontdesk::bell, openapi::device_api::*, records::now, types::wire::Json,
};

/// A ring as the API returns it, its state as it reads at `at`.
pub(super) fn record(r: entity::ring::Model, at: chrono::DateTime<chrono::Utc>) -> Ring {
    Ring {
        object: RingObject::Ring,
        state: bell::ring_state(&r, at).into(),
        id: r.id,
        device_id: r.device_id,
        facility_id: r.facility_id,
        message: r.message.into(),
        door_id: r.door_id.into(),
        command_id: r.command_id.into(),
        expires_at: r.expires_at,
        answered_at: r.answered_at.into(),
        created_at: r.created_at,
    }
}

impl RingsApi for DeviceHandlers {
    async fn pending_rings(
        &self,
        ctx: &RequestContext,
        p: PendingRingsParams,
    ) -> Result<PendingRingsResponse, ApiError> {
        let topic = bell::rings_topic(gym(ctx));
        let found = self
            .poll(ctx, &topic, wait(p.wait), || async {
                Ok((bell::pending(self.db(), gym(ctx), p.facility_id).await?, None))
            })
            .await?;
        let at = now();
        Ok(PendingRingsResponse::Ok(Json(RingBatch { data: found.into_iter().map(|r| record(r, at)).collect() })))
    }

    async fn open_for_ring(&self, ctx: &RequestContext, p: OpenForRingParams) -> Result<OpenForRingResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let ttl = self.state.config.door_command_ttl;
        let r = bell::open(&db, &self.state.wakes, gym(ctx), &p.ring_id, p.body.door_id, ttl).await?;
        Ok(OpenForRingResponse::Ok(Json(record(r, now()))))
    }

    async fn dismiss_ring(&self, ctx: &RequestContext, p: DismissRingParams) -> Result<DismissRingResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = bell::dismiss(&db, gym(ctx), &p.ring_id).await?;
        Ok(DismissRingResponse::Ok(Json(record(r, now()))))
    }
}
