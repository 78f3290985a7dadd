//! `Terminals`: a card terminal takes the next payment of its facility and reports it.

use entity::states::DeviceKind;

use super::{DeviceHandlers, orders::payment, wait};
use crate::{
    context::RequestContext,
    errors::{ApiError, FieldErrors},
    frontdesk::{
        sales::payments_topic,
        terminal::{self, Report, Reported},
    },
    openapi::device_api::*,
    records::now,
    types::wire::Json,
};

impl TerminalsApi for DeviceHandlers {
    async fn poll_payment_jobs(
        &self,
        ctx: &RequestContext,
        p: PollPaymentJobsParams,
    ) -> Result<PollPaymentJobsResponse, ApiError> {
        let t = self.device(ctx, &p.device_id, Some(DeviceKind::CardTerminal)).await?;
        let s = &self.state;
        let topic = payments_topic(t.gym_id, t.facility_id);
        let reservation = s.config.payment_reservation;
        let key = ctx.tenant.key_id;
        let taken = self
            .poll(ctx, &topic, wait(p.wait), || async {
                let taken = terminal::take(self.db(), &t, key, reservation).await?;
                let again_at = taken.lapses_at.map(|at| {
                    let after = (at - now()).to_std().unwrap_or_default();
                    tokio::time::Instant::now() + after + std::time::Duration::from_millis(5)
                });
                Ok::<_, ApiError>((taken.job.into_iter().collect::<Vec<_>>(), again_at))
            })
            .await?;
        let at = now();
        Ok(PollPaymentJobsResponse::Ok(Json(PaymentJobBatch { data: taken.iter().map(|j| payment(j, at)).collect() })))
    }

    async fn report_payment(
        &self,
        ctx: &RequestContext,
        p: ReportPaymentParams,
    ) -> Result<ReportPaymentResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let t = self.device(ctx, &p.device_id, Some(DeviceKind::CardTerminal)).await?;
        let b = p.body;
        let mut errors = FieldErrors::new();
        let report = match b.outcome {
            PaymentOutcome::Approved => {
                let (scheme, last4) = (b.card_scheme.take(), b.card_last4.take());
                if scheme.is_none() {
                    errors.add("card_scheme", "An approved payment names the card's scheme.");
                }
                if last4.is_none() {
                    errors.add("card_last4", "An approved payment names the card's last four digits.");
                }
                Report::Approved { card_scheme: scheme.unwrap_or_default(), card_last4: last4.unwrap_or_default() }
            }
            PaymentOutcome::Declined => {
                let reason = b.reason.take();
                if reason.is_none() {
                    errors.add("reason", "A declined payment says why.");
                }
                Report::Declined { reason: reason.unwrap_or_default() }
            }
        };
        errors.into_result()?;
        let (reported, queued) = terminal::report(&db, &self.state.wakes, &t, &p.job_id, report).await?;
        crate::webhooks::wake_if(&db, &self.state.webhooks, queued).await;
        match reported {
            Reported::Held(job) => Ok(ReportPaymentResponse::Ok(Json(payment(&job, now())))),
            Reported::RefundDue(charge) => Err(ApiError::RefundRequired(terminal::refund_message(&charge))),
        }
    }
}
