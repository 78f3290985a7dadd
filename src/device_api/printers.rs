//! `Printers`: a fiscal printer takes the next receipt of its facility and reports it.

use entity::states::DeviceKind;

use super::{DeviceHandlers, orders::print, wait};
use crate::{
    context::RequestContext,
    errors::{ApiError, FieldErrors},
    frontdesk::{
        printer::{self, Report},
        sales::{self, receipts_topic},
    },
    openapi::device_api::*,
    types::wire::Json,
};

impl DeviceHandlers {
    /// A print job as the API returns it, its receipt read from its sale.
    async fn print_job(&self, ctx: &RequestContext, j: &entity::print_job::Model) -> Result<PrintJob, ApiError> {
        let missing = || ApiError::not_found("order", &j.purchase_id.to_string());
        let sale = sales::with_items(self.db(), ctx.tenant.gym_id, j.purchase_id).await?.ok_or_else(missing)?;
        let gym = self.gym_label(ctx).await?;
        let receipt = printer::receipt(&gym, &sale.purchase, &sale.lines, j);
        Ok(print(j, &receipt))
    }
}

impl PrintersApi for DeviceHandlers {
    async fn poll_print_jobs(
        &self,
        ctx: &RequestContext,
        p: PollPrintJobsParams,
    ) -> Result<PollPrintJobsResponse, ApiError> {
        let printer_device = self.device(ctx, &p.device_id, Some(DeviceKind::FiscalPrinter)).await?;
        let topic = receipts_topic(printer_device.gym_id, printer_device.facility_id);
        let key = ctx.tenant.key_id;
        let taken = self
            .poll(ctx, &topic, wait(p.wait), || async {
                Ok((printer::take(self.db(), &printer_device, key).await?, None))
            })
            .await?;
        let mut data = Vec::with_capacity(taken.len());
        for j in &taken {
            data.push(self.print_job(ctx, j).await?);
        }
        Ok(PollPrintJobsResponse::Ok(Json(PrintJobBatch { data })))
    }

    async fn report_print(&self, ctx: &RequestContext, p: ReportPrintParams) -> Result<ReportPrintResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let printer_device = self.device(ctx, &p.device_id, Some(DeviceKind::FiscalPrinter)).await?;
        let b = p.body;
        let report = match b.outcome {
            PrintOutcome::Printed => Report::Printed,
            PrintOutcome::Failed => match b.reason.take() {
                Some(reason) => Report::Failed { reason },
                None => {
                    let mut errors = FieldErrors::new();
                    errors.add("reason", "A failed receipt says why.");
                    return Err(ApiError::Validation(errors));
                }
            },
        };
        let job = printer::report(&db, &printer_device, &p.job_id, report).await?;
        Ok(ReportPrintResponse::Ok(Json(self.print_job(ctx, &job).await?)))
    }
}
