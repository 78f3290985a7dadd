//! `Import`: documented, answered 501 until bulk import is built (nothing is written).

use super::{Handlers, generated::*};
use crate::{context::RequestContext, errors::ApiError};

impl ImportApi for Handlers {
    async fn import_plans(&self, _: &RequestContext, _: ImportPlansParams) -> Result<ImportPlansResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
    async fn import_members(
        &self,
        _: &RequestContext,
        _: ImportMembersParams,
    ) -> Result<ImportMembersResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
    async fn import_memberships(
        &self,
        _: &RequestContext,
        _: ImportMembershipsParams,
    ) -> Result<ImportMembershipsResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
    async fn import_attendance(
        &self,
        _: &RequestContext,
        _: ImportAttendanceParams,
    ) -> Result<ImportAttendanceResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
    async fn import_access_logs(
        &self,
        _: &RequestContext,
        _: ImportAccessLogsParams,
    ) -> Result<ImportAccessLogsResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
    async fn import_products(
        &self,
        _: &RequestContext,
        _: ImportProductsParams,
    ) -> Result<ImportProductsResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
    async fn import_purchases(
        &self,
        _: &RequestContext,
        _: ImportPurchasesParams,
    ) -> Result<ImportPurchasesResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
    async fn get_import_status(&self, _: &RequestContext) -> Result<GetImportStatusResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
}
