//! `Document`: openapi-devices.yaml, served by the API it describes, and its OpenAPI 3.1 copy.

use super::DeviceHandlers;
use crate::openapi::device_api::*;
use crate::{context::RequestContext, contract::Family, errors::ApiError, types::Yaml};

impl DocumentApi for DeviceHandlers {
    async fn get_devices_open_api_document(
        &self,
        ctx: &RequestContext,
    ) -> Result<GetDevicesOpenApiDocumentResponse, ApiError> {
        Ok(GetDevicesOpenApiDocumentResponse::Ok(Yaml::negotiated(Family::Devices.document(), ctx.accept())))
    }

    async fn get_devices_open_api31_document(
        &self,
        ctx: &RequestContext,
    ) -> Result<GetDevicesOpenApi31DocumentResponse, ApiError> {
        Ok(GetDevicesOpenApi31DocumentResponse::Ok(Yaml::negotiated(Family::Devices.document_3_1(), ctx.accept())))
    }
}
