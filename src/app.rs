//! Assembles the service: the routes and the layers around them. Tests start exactly this on port 0.

use std::sync::Arc;

use poem::{Endpoint, EndpointExt, Response, Route, error::ResponseError, get, middleware::CatchPanic};
use poem_openapi::OpenApiService;

use crate::{
    api::Handlers,
    contract::{API_BASE, DEVICES_BASE, Family, Rules},
    device_api::DeviceHandlers,
    errors::ApiError,
    health, middleware, openapi,
    state::AppState,
};

/// The poem-openapi service generated from openapi.yaml, with the hand-written handlers.
pub fn openapi_service(state: &AppState) -> OpenApiService<openapi::Api<Handlers>, ()> {
    OpenApiService::new(openapi::Api(Handlers::new(state.clone())), "gymapi", "1.0.0").server(API_BASE)
}

/// The poem-openapi service generated from openapi-devices.yaml, with the device handlers.
pub fn devices_service(state: &AppState) -> OpenApiService<openapi::device_api::Api<DeviceHandlers>, ()> {
    OpenApiService::new(openapi::device_api::Api(DeviceHandlers::new(state.clone())), "gymapi devices", "1.0.0")
        .server(DEVICES_BASE)
}

/// The whole HTTP application.
pub fn app(state: AppState) -> impl Endpoint<Output = Response> {
    let (api_state, devices_state) = (state.clone(), state.clone());
    let limits =
        Arc::new(middleware::EdgeLimits { body_timeout: state.config.body_timeout, metrics: state.metrics.clone() });
    let rules: Arc<dyn Rules> = Arc::new(crate::api::WriteRules::new(state.clone()));
    let api = openapi_service(&state)
        .around(move |ep, req| middleware::gate(ep, req, api_state.clone(), Family::Integration, Some(rules.clone())));
    let devices = devices_service(&state)
        .around(move |ep, req| middleware::gate(ep, req, devices_state.clone(), Family::Devices, None));
    Route::new()
        .at("/healthz", get(health::healthz))
        .at("/readyz", get(health::readyz))
        .at("/metrics", get(health::metrics))
        .nest(DEVICES_BASE, devices)
        .nest(API_BASE, api)
        .nest("/settings", crate::settings::routes(state.clone()))
        .data(state)
        // A bug must still answer JSON; the panic itself is printed by the panic hook.
        .with(CatchPanic::new().with_handler(|_| ApiError::internal(anyhow::anyhow!("handler panicked")).as_response()))
        .around(move |ep, req| middleware::edge(ep, req, limits.clone()))
}
