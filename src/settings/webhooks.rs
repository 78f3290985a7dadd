//! The webhooks page: the gym's endpoints (add, pause, resume, rotate the secret, remove) and its
//! recent deliveries, any of which can be sent again.

use std::collections::HashMap;

use entity::{webhook_delivery, webhook_endpoint};
use poem::{
    Request, Response, handler,
    http::StatusCode,
    web::{Data, Path},
};
use uuid::Uuid;

use super::{Button, NewSecret, Signed, SignedForm, error_page, html, internal, pages, redirect, refused, signed};
use crate::{
    accounts::{self, AccountError, Permission},
    state::AppState,
    webhooks,
};

async fn render_webhooks(state: &AppState, s: &Signed, secret: Option<NewSecret>, status: StatusCode) -> Response {
    let actor = s.actor();
    let endpoints: Vec<webhook_endpoint::Model> = match webhooks::list_endpoints(&state.db, &actor, s.gym.id).await {
        Ok(e) => e,
        Err(e) => return refused(e),
    };
    let deliveries: Vec<webhook_delivery::Model> =
        match webhooks::recent_deliveries(&state.db, &actor, s.gym.id, 25).await {
            Ok(d) => d,
            Err(e) => return refused(e),
        };
    let daily = match webhooks::daily_outcomes(&state.db, s.gym.id, 14).await {
        Ok(d) => d,
        Err(e) => return refused(e),
    };
    let urls: HashMap<Uuid, String> = endpoints.iter().map(|e| (e.id, e.url.clone())).collect();
    let view = pages::WebhooksView {
        gym_name: &s.gym.name,
        user_email: &s.user.email,
        csrf: &s.session.csrf_token,
        can_manage: s.can_manage(),
        gym_id: s.gym.id,
        endpoints: &endpoints,
        deliveries: &deliveries,
        endpoint_urls: &urls,
        daily: &daily,
        secret,
        event_types: webhooks::EventType::ALL
            .iter()
            .filter(|t| **t != webhooks::EventType::Ping)
            .map(|t| t.as_str())
            .collect(),
    };
    html(status, pages::webhooks(&view))
}

#[handler]
pub(super) async fn webhooks_page(req: &Request, state: Data<&AppState>) -> Response {
    match signed(&state, req).await {
        Ok(s) => render_webhooks(&state, &s, None, StatusCode::OK).await,
        Err(r) => r,
    }
}

/// The endpoint form: URL, Live or Sandbox, and event types (checkboxes, repeated `events`).
fn endpoint_form(pairs: Vec<(String, String)>) -> (HashMap<String, String>, Vec<String>) {
    let mut fields = HashMap::new();
    let mut events = Vec::new();
    for (k, v) in pairs {
        if k == "events" {
            events.push(v);
        } else {
            fields.insert(k, v);
        }
    }
    (fields, events)
}

#[handler]
pub(super) async fn create_endpoint(
    state: Data<&AppState>,
    SignedForm(s, pairs): SignedForm<Vec<(String, String)>>,
) -> Response {
    let (fields, events) = endpoint_form(pairs);
    let sandbox = fields.get("environment").is_some_and(|e| e == "test");
    let url = fields.get("url").map(String::as_str).unwrap_or_default();
    match webhooks::create_endpoint(
        &state.db,
        &s.actor(),
        s.gym.id,
        sandbox,
        url,
        &events,
        state.config.webhook_allow_private,
    )
    .await
    {
        Ok(e) => {
            let secret = NewSecret { url: e.model.url.clone(), secret: e.secret };
            render_webhooks(&state, &s, Some(secret), StatusCode::OK).await
        }
        Err(e) => refused(e),
    }
}

#[handler]
pub(super) async fn endpoint_action(
    state: Data<&AppState>,
    Path((id, action)): Path<(Uuid, String)>,
    SignedForm(s, _): SignedForm<Button>,
) -> Response {
    let actor = s.actor();
    let db = &state.db;
    let done = match action.as_str() {
        "disable" => webhooks::set_enabled(db, &actor, id, false).await.map(|_| None),
        "enable" => webhooks::set_enabled(db, &actor, id, true).await.map(|_| None),
        "delete" => webhooks::delete_endpoint(db, &actor, id).await.map(|_| None),
        "ping" => webhooks::ping(db, &actor, id).await.map(|_| None),
        "rotate" => webhooks::rotate_secret(db, &actor, id)
            .await
            .map(|e| Some(NewSecret { url: e.model.url.clone(), secret: e.secret })),
        _ => return error_page(StatusCode::NOT_FOUND, "There is no such action."),
    };
    match done {
        Ok(Some(secret)) => render_webhooks(&state, &s, Some(secret), StatusCode::OK).await,
        Ok(None) => {
            state.webhooks.notify_one();
            redirect("/settings/integrations/webhooks")
        }
        Err(e) => refused(e),
    }
}

#[handler]
pub(super) async fn redeliver(
    state: Data<&AppState>,
    Path(id): Path<Uuid>,
    SignedForm(s, _): SignedForm<Button>,
) -> Response {
    if !s.can_manage() {
        return refused(AccountError::PermissionDenied(Permission::SettingsManage.as_str()));
    }
    let gyms = match accounts::with_sandbox(&state.db, s.gym.id).await {
        Ok(g) => g,
        Err(e) => return refused(e),
    };
    for gym in gyms {
        match webhooks::redeliver(&state.db, gym, id).await {
            Ok(Some(_)) => {
                state.webhooks.notify_one();
                return redirect("/settings/integrations/webhooks");
            }
            Ok(None) => {}
            Err(e) => return internal(e),
        }
    }
    error_page(StatusCode::NOT_FOUND, "This delivery does not exist.")
}
