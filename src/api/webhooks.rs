//! `Webhooks`: documented, answered 501 until deliveries are built (nothing is written).

use super::{Handlers, generated::*};
use crate::{context::RequestContext, errors::ApiError};

impl WebhooksApi for Handlers {
    async fn redeliver_webhook_delivery(
        &self,
        _: &RequestContext,
        _: RedeliverWebhookDeliveryParams,
    ) -> Result<RedeliverWebhookDeliveryResponse, ApiError> {
        Err(ApiError::NotImplemented)
    }
}
