//! `Document`: openapi-devices.yaml, served by the API it describes.

use super::DeviceHandlers;
use crate::openapi::devices::*;
use crate::{context::RequestContext, contract::Family, errors::ApiError, types::Yaml};

impl DocumentApi for DeviceHandlers {
    async fn get_devices_open_api_document(
        &self,
        _ctx: &RequestContext,
    ) -> Result<GetDevicesOpenApiDocumentResponse, ApiError> {
        Ok(GetDevicesOpenApiDocumentResponse::Ok(Yaml(Family::Devices.document())))
    }
}
