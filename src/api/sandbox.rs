//! `Sandbox`: a test key resets its sandbox, empty or to the fixtures (`sandbox::empty`); a live
//! key never resets anything.

use entity::states::Environment;

use super::Handlers;
use crate::openapi::*;
use crate::types::wire::Json;
use crate::{context::RequestContext, errors::ApiError, sandbox::Contents};

/// The 403 of a live key (openapi.yaml, `POST /sandbox/reset`).
const LIVE_KEY: &str = "Only a test key resets its sandbox; a live key never resets anything.";

impl SandboxApi for Handlers {
    async fn reset_sandbox(
        &self,
        ctx: &RequestContext,
        // The keyed write's handle is the context's (`ctx.db`).
        p: ResetSandboxParams,
    ) -> Result<ResetSandboxResponse, ApiError> {
        let tenant = &ctx.tenant;
        if tenant.environment != Environment::Test || tenant.gym_id == tenant.owner_gym_id {
            return Err(ApiError::Forbidden(LIVE_KEY.into()));
        }
        let (contents, answered) = match p.contents {
            Some(ResetSandboxContents::Fixtures) => (Contents::Fixtures, SandboxResetContents::Fixtures),
            Some(ResetSandboxContents::Empty) | None => (Contents::Empty, SandboxResetContents::Empty),
        };
        let at = crate::sandbox::empty(&ctx.db(self.db()), tenant.gym_id, contents).await?;
        Ok(ResetSandboxResponse::Ok(Json(SandboxReset {
            object: SandboxResetObject::SandboxReset,
            reset_at: at,
            contents: answered,
        })))
    }
}
