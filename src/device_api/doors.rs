//! `Doors`: the door's access decisions, and its commands by long poll.

use chrono_tz::Tz;
use entity::ids::MemberId;
use entity::states::{CommandState, DeviceKind};

use super::{DeviceHandlers, gym, wait};
use crate::{
    context::RequestContext,
    errors::{ApiError, FieldErrors},
    frontdesk::{
        bell, devices,
        door::{self, Denial, Who},
    },
    openapi::device_api::*,
    records::{self, now},
    types::wire::Json,
};

fn reason(d: Denial) -> AccessDecisionReason {
    match d {
        Denial::UnknownCard => AccessDecisionReason::UnknownCard,
        Denial::UnknownMember => AccessDecisionReason::UnknownMember,
        Denial::MemberInactive => AccessDecisionReason::MemberInactive,
        Denial::WrongFacility => AccessDecisionReason::WrongFacility,
        Denial::NoActiveMembership => AccessDecisionReason::NoActiveMembership,
        Denial::VisitLimitReached => AccessDecisionReason::VisitLimitReached,
    }
}

/// A command as the API returns it, its state as it reads at `at`.
pub(super) fn command(c: entity::door_command::Model, at: chrono::DateTime<chrono::Utc>) -> DoorCommand {
    DoorCommand {
        object: DoorCommandObject::DoorCommand,
        state: bell::command_state(&c, at).into(),
        id: c.id,
        device_id: c.device_id,
        ring_id: c.ring_id.into(),
        action: c.action.into(),
        expires_at: c.expires_at,
        delivered_at: c.delivered_at.into(),
        reported_at: c.reported_at.into(),
        detail: c.detail.into(),
        created_at: c.created_at,
    }
}

impl DoorsApi for DeviceHandlers {
    async fn decide_access(
        &self,
        ctx: &RequestContext,
        p: DecideAccessParams,
    ) -> Result<DecideAccessResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        // Boxed as `DeviceHandlers::device` boxes its lookup (docs/performance.md).
        let (door, facility_tz) = Box::pin(devices::find_door(&db, ctx.tenant.gym_id, &p.device_id)).await?;
        self.state.heartbeats.seen(db.orm(), door.gym_id, door.id);
        let who = match (p.body.member_id, p.body.card) {
            (Some(id), None) => Who::Member(id),
            (None, Some(card)) => Who::Card(card),
            _ => {
                let mut errors = FieldErrors::new();
                errors.add("body", "Give either member_id or card, not both and not neither.");
                return Err(ApiError::Validation(errors));
            }
        };
        let tz: Tz = facility_tz.and_then(|name| records::timezone(&name).ok()).unwrap_or(ctx.tenant.timezone);
        let (decision, queued) = door::decide(&db, &door, tz, &who).await?;
        crate::webhooks::wake_if(&db, &self.state.webhooks, queued).await;
        let e = decision.entry;
        Ok(DecideAccessResponse::Ok(Json(AccessDecision {
            object: AccessDecisionObject::AccessDecision,
            id: e.id,
            device_id: door.id,
            facility_id: e.facility_id,
            member_id: e.member_id.map(MemberId::uuid).into(),
            decision: match decision.denial {
                None => AccessOutcome::Granted,
                Some(_) => AccessOutcome::Denied,
            },
            reason: decision.denial.map(reason).into(),
            occurred_at: e.occurred_at,
        })))
    }

    async fn poll_door_commands(
        &self,
        ctx: &RequestContext,
        p: PollDoorCommandsParams,
    ) -> Result<PollDoorCommandsResponse, ApiError> {
        let door = self.device(ctx, &p.device_id, Some(DeviceKind::Door)).await?;
        let topic = bell::door_topic(gym(ctx), door.id);
        let key = ctx.tenant.key_id;
        let claimed = self
            .poll(ctx, &topic, wait(p.wait), || async { Ok((bell::claim(self.db(), &door, key).await?, None)) })
            .await?;
        let at = now();
        Ok(PollDoorCommandsResponse::Ok(Json(DoorCommandBatch {
            data: claimed.into_iter().map(|c| command(c, at)).collect(),
        })))
    }

    async fn acknowledge_door_command(
        &self,
        ctx: &RequestContext,
        p: AcknowledgeDoorCommandParams,
    ) -> Result<AcknowledgeDoorCommandResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let door = self.device(ctx, &p.device_id, Some(DeviceKind::Door)).await?;
        let outcome = match p.body.outcome {
            CommandOutcome::Executed => CommandState::Executed,
            CommandOutcome::Failed => CommandState::Failed,
        };
        let c = bell::report(&db, &door, &p.command_id, outcome, p.body.detail.take()).await?;
        Ok(AcknowledgeDoorCommandResponse::Ok(Json(command(c, now()))))
    }
}
