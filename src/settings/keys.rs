//! The API integration page: the gym's keys (create, roll, revoke, each shown once) and its sandbox.

use entity::api_key;
use poem::{
    Request, Response, handler,
    http::StatusCode,
    web::{Data, Path},
};
use serde::Deserialize;
use uuid::Uuid;

use super::{Button, Flash, KeyRow, Signed, SignedForm, error_page, html, internal, pages, redirect, refused, signed};
use crate::{
    accounts::{self, AccountError, KeyStatus},
    context::Environment,
    records::now,
    sandbox::Contents,
    state::AppState,
};

/// Renders the API integration page, with an optional message and a key shown once.
async fn render_api(state: &AppState, s: &Signed, flash: Option<Flash>, status: StatusCode) -> Response {
    let keys = match accounts::list_keys(&state.db, &s.actor(), s.gym.id).await {
        Ok(k) => k,
        Err(e) => return refused(e),
    };
    let sandbox = match accounts::sandbox_of(&state.db, s.gym.id).await {
        Ok(sb) => sb,
        Err(e) => return refused(e),
    };
    // The chart shows this instance's latest counts too.
    if let Err(e) = state.usage.flush(&state.db).await {
        tracing::warn!(error = %e, "cannot store key usage counts");
    }
    let usage = match crate::usage::daily(&state.db, s.gym.id, 14).await {
        Ok(u) => u,
        Err(e) => return internal(e),
    };
    let at = now();
    let requests: Vec<pages::KeyUsage> = keys
        .iter()
        .filter_map(|k| {
            usage
                .get(&k.id)
                .map(|days| pages::KeyUsage { label: format!("{} ({}…)", k.name, k.prefix), days: days.clone() })
        })
        .collect();
    let rows: Vec<KeyRow> = keys
        .iter()
        .map(|k: &api_key::Model| {
            let status = KeyStatus::of(k, at);
            KeyRow {
                id: k.id,
                name: k.name.clone(),
                environment: if k.environment == Environment::Test { "Test" } else { "Live" },
                prefix: k.prefix.clone(),
                last_used: k.last_used_at.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string()),
                status: status.label(at),
                can_roll: status.can_roll(),
                can_revoke: !matches!(status, KeyStatus::Revoked | KeyStatus::Expired),
            }
        })
        .collect();
    let view = pages::ApiView {
        gym_name: &s.gym.name,
        user_email: &s.user.email,
        csrf: &s.session.csrf_token,
        can_manage: s.can_manage(),
        api_access: s.gym.api_access,
        sandbox_since: sandbox.map(|sb| sb.created_at.format("%Y-%m-%d").to_string()),
        keys: rows,
        requests,
        flash,
    };
    html(status, pages::api(&view))
}

#[handler]
pub(super) async fn api_page(req: &Request, state: Data<&AppState>) -> Response {
    match signed(&state, req).await {
        Ok(s) => render_api(&state, &s, None, StatusCode::OK).await,
        Err(r) => r,
    }
}

#[derive(Deserialize)]
struct NewKeyForm {
    name: String,
    environment: String,
}

#[handler]
pub(super) async fn create_key(state: Data<&AppState>, SignedForm(s, f): SignedForm<NewKeyForm>) -> Response {
    let Some(env) = Environment::parse(&f.environment) else {
        return error_page(StatusCode::UNPROCESSABLE_ENTITY, "Choose Live or Test.");
    };
    let name = f.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        let flash = Flash::Error("Give the key a name (up to 100 characters).".into());
        return render_api(&state, &s, Some(flash), StatusCode::UNPROCESSABLE_ENTITY).await;
    }
    if !s.gym.api_access {
        let flash = Flash::Error("Your plan does not include API access.".into());
        return render_api(&state, &s, Some(flash), StatusCode::FORBIDDEN).await;
    }
    match accounts::create_key(&state.db, &s.actor(), s.gym.id, env, name).await {
        Ok(k) => {
            render_api(&state, &s, Some(Flash::NewKey { name: name.to_string(), key: k.key }), StatusCode::OK).await
        }
        Err(AccountError::SandboxRequired) => {
            let flash = Flash::Error(accounts::SANDBOX_REQUIRED.into());
            render_api(&state, &s, Some(flash), StatusCode::UNPROCESSABLE_ENTITY).await
        }
        Err(e) => refused(e),
    }
}

/// A key of the signed-in user's gym.
async fn own_key(state: &AppState, s: &Signed, id: Uuid) -> Result<api_key::Model, Response> {
    match accounts::find_key(&state.db, id).await {
        Ok(k) if k.gym_id == s.gym.id => Ok(k),
        Ok(_) | Err(AccountError::NotFound(_)) => Err(error_page(StatusCode::NOT_FOUND, "This key does not exist.")),
        Err(e) => Err(refused(e)),
    }
}

async fn confirm(req: &Request, state: &AppState, id: Uuid, action: pages::KeyAction) -> Response {
    let s = match signed(state, req).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let key = match own_key(state, &s, id).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    html(
        StatusCode::OK,
        pages::confirm_key(&s.gym.name, &s.user.email, &s.session.csrf_token, &key, action, s.can_manage()),
    )
}

#[handler]
pub(super) async fn confirm_roll(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>) -> Response {
    confirm(req, &state, id, pages::KeyAction::Roll).await
}

#[handler]
pub(super) async fn confirm_revoke(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>) -> Response {
    confirm(req, &state, id, pages::KeyAction::Revoke).await
}

#[handler]
pub(super) async fn roll_key(
    state: Data<&AppState>,
    Path(id): Path<Uuid>,
    SignedForm(s, _): SignedForm<Button>,
) -> Response {
    if let Err(r) = own_key(&state, &s, id).await {
        return r;
    }
    match accounts::roll_key(&state.db, &*state.store, &s.actor(), id, state.config.key_roll_grace).await {
        Ok(r) => {
            state.wakes.signal(&crate::wake::key_topic(id)).await;
            let flash = Flash::NewKey { name: r.new.model.name.clone(), key: r.new.key };
            render_api(&state, &s, Some(flash), StatusCode::OK).await
        }
        Err(e) => refused(e),
    }
}

#[handler]
pub(super) async fn revoke_key(
    state: Data<&AppState>,
    Path(id): Path<Uuid>,
    SignedForm(s, _): SignedForm<Button>,
) -> Response {
    if let Err(r) = own_key(&state, &s, id).await {
        return r;
    }
    match accounts::revoke_key(&state.db, &*state.store, &s.actor(), id).await {
        Ok(_) => {
            state.wakes.signal(&crate::wake::key_topic(id)).await;
            redirect("/settings/integrations/api")
        }
        Err(e) => refused(e),
    }
}

/// Empties the gym's sandbox (`sandbox::reset`).
#[handler]
pub(super) async fn reset_sandbox(state: Data<&AppState>, SignedForm(s, _): SignedForm<Button>) -> Response {
    reset_sandbox_to(&state, &s, Contents::Empty).await
}

/// Resets the gym's sandbox to the fixtures (`sandbox::reset`).
#[handler]
pub(super) async fn reset_sandbox_to_fixtures(
    state: Data<&AppState>,
    SignedForm(s, _): SignedForm<Button>,
) -> Response {
    reset_sandbox_to(&state, &s, Contents::Fixtures).await
}

async fn reset_sandbox_to(state: &AppState, s: &Signed, contents: Contents) -> Response {
    match crate::sandbox::reset(&state.db, &s.actor(), s.gym.id, contents).await {
        Ok(_) => redirect("/settings/integrations/api"),
        Err(e) => refused(e),
    }
}

#[handler]
pub(super) async fn provision_sandbox(state: Data<&AppState>, SignedForm(s, _): SignedForm<Button>) -> Response {
    match accounts::provision_sandbox(&state.db, &s.actor(), s.gym.id).await {
        Ok(_) => redirect("/settings/integrations/api"),
        Err(e) => refused(e),
    }
}
