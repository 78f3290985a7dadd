//! `Import`: bulk import from a previous gym system; the rules live in `crate::import`.

use super::Handlers;
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{context::RequestContext, errors::ApiError, import};

impl Handlers {
    /// A written batch may have queued an `import.completed` delivery: wake the dispatcher.
    async fn written(&self, db: &crate::db::Db, dry_run: bool) {
        if !dry_run {
            crate::webhooks::wake(db, &self.state.webhooks).await;
        }
    }
}

impl ImportApi for Handlers {
    async fn import_plans(&self, ctx: &RequestContext, p: ImportPlansParams) -> Result<ImportPlansResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::plans(&db, ctx.tenant.gym_id, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportPlansResponse::Ok(Json(r)))
    }

    async fn import_facilities(
        &self,
        ctx: &RequestContext,
        p: ImportFacilitiesParams,
    ) -> Result<ImportFacilitiesResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::facilities(&db, ctx.tenant.gym_id, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportFacilitiesResponse::Ok(Json(r)))
    }

    async fn import_members(
        &self,
        ctx: &RequestContext,
        p: ImportMembersParams,
    ) -> Result<ImportMembersResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::members(&db, ctx.tenant.gym_id, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportMembersResponse::Ok(Json(r)))
    }

    async fn import_memberships(
        &self,
        ctx: &RequestContext,
        p: ImportMembershipsParams,
    ) -> Result<ImportMembershipsResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::memberships(&db, ctx.tenant.gym_id, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportMembershipsResponse::Ok(Json(r)))
    }

    async fn import_attendance(
        &self,
        ctx: &RequestContext,
        p: ImportAttendanceParams,
    ) -> Result<ImportAttendanceResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::attendance(&db, ctx.tenant.gym_id, ImportEntity::Attendance, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportAttendanceResponse::Ok(Json(r)))
    }

    async fn import_access_logs(
        &self,
        ctx: &RequestContext,
        p: ImportAccessLogsParams,
    ) -> Result<ImportAccessLogsResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::attendance(&db, ctx.tenant.gym_id, ImportEntity::AccessLogs, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportAccessLogsResponse::Ok(Json(r)))
    }

    async fn import_products(
        &self,
        ctx: &RequestContext,
        p: ImportProductsParams,
    ) -> Result<ImportProductsResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::products(&db, ctx.tenant.gym_id, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportProductsResponse::Ok(Json(r)))
    }

    async fn import_purchases(
        &self,
        ctx: &RequestContext,
        p: ImportPurchasesParams,
    ) -> Result<ImportPurchasesResponse, ApiError> {
        // The keyed write's handle: what this handler writes commits with its response's record.
        let db = ctx.db(self.db());
        let r = import::purchases(&db, ctx.tenant.gym_id, p.body.rows, p.dry_run).await?;
        self.written(&db, p.dry_run).await;
        Ok(ImportPurchasesResponse::Ok(Json(r)))
    }

    async fn get_import_status(&self, ctx: &RequestContext) -> Result<GetImportStatusResponse, ApiError> {
        Ok(GetImportStatusResponse::Ok(Json(import::status(self.db(), ctx.tenant.gym_id).await?)))
    }
}
