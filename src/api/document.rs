//! `Document`: openapi.yaml, served by the API it describes, and its OpenAPI 3.1 copy.

use super::Handlers;
use crate::openapi::*;
use crate::{context::RequestContext, contract::Family, errors::ApiError, types::Yaml};

impl DocumentApi for Handlers {
    async fn get_open_api_document(&self, ctx: &RequestContext) -> Result<GetOpenApiDocumentResponse, ApiError> {
        Ok(GetOpenApiDocumentResponse::Ok(Yaml::negotiated(Family::Integration.document(), ctx.accept())))
    }

    async fn get_open_api31_document(&self, ctx: &RequestContext) -> Result<GetOpenApi31DocumentResponse, ApiError> {
        Ok(GetOpenApi31DocumentResponse::Ok(Yaml::negotiated(Family::Integration.document_3_1(), ctx.accept())))
    }
}
