//! The settings area for gym users: server-rendered pages under `/settings` to manage API keys,
//! the sandbox and webhooks (Integrations) and the front desk's devices.
//!
//! - Sign-in with email and password (argon2), sessions in an HttpOnly, SameSite=Lax cookie (Secure
//!   over https), throttled failed sign-ins, sign-out.
//! - Every form carries a CSRF token (the session's; on the sign-in form a double-submit cookie);
//!   a POST without the right one is refused with 403 and does nothing. Every action takes its
//!   form as a [`SignedForm`], which checks the session and the token before the handler runs.
//! - Every action goes through the same domain code as the CLI (`accounts`, `webhooks`) with
//!   `Actor::User`; a user without `settings.manage` sees the pages without actions, and a direct
//!   POST is refused by the domain.
//! - No logic in the markup ([`pages`]): handlers gather what a page shows, pages only render it.
//!
//! One file a page family: [`sign_in`], [`keys`] (the API integration page), [`webhooks`],
//! [`facilities`], [`devices`]; this file keeps the routes and what they share (the signed-in
//! user, CSRF, error pages).

mod devices;
mod facilities;
mod keys;
mod pages;
pub mod session;
mod sign_in;
mod webhooks;

use entity::{user, user_session};
use poem::{
    Endpoint, EndpointExt, FromRequest, IntoResponse, Request, RequestBody, Response, Route,
    error::ParseFormError,
    get, handler,
    http::{StatusCode, header},
    post,
    web::Form,
};
use serde::{Deserialize, de::DeserializeOwned};

use crate::{
    accounts::{self, AccountError, Actor, Permission},
    state::AppState,
};

pub use pages::{Flash, KeyRow, NewSecret};

/// The routes of the settings area, to be nested at `/settings`.
pub fn routes(state: AppState) -> impl Endpoint {
    Route::new()
        .at("/", get(sign_in::index))
        .at("/sign-in", get(sign_in::sign_in_page).post(sign_in::sign_in))
        .at("/sign-out", post(sign_in::sign_out))
        .at("/assets/app.css", get(css))
        .at("/assets/app.js", get(js))
        .at("/integrations/api", get(keys::api_page))
        .at("/integrations/api/keys", post(keys::create_key))
        .at("/integrations/api/keys/:id/roll", get(keys::confirm_roll).post(keys::roll_key))
        .at("/integrations/api/keys/:id/revoke", get(keys::confirm_revoke).post(keys::revoke_key))
        .at("/integrations/api/sandbox", post(keys::provision_sandbox))
        .at("/integrations/api/sandbox/reset", post(keys::reset_sandbox))
        .at("/integrations/api/sandbox/fixtures", post(keys::reset_sandbox_to_fixtures))
        .at("/integrations/webhooks", get(webhooks::webhooks_page))
        .at("/integrations/webhooks/endpoints", post(webhooks::create_endpoint))
        .at("/integrations/webhooks/endpoints/:id/:action", post(webhooks::endpoint_action))
        .at("/integrations/webhooks/deliveries/:id/redeliver", post(webhooks::redeliver))
        .at("/facilities", get(facilities::list).post(facilities::create))
        .at("/facilities/:id", get(facilities::show).post(facilities::rename))
        .at("/facilities/:id/archive", post(facilities::archive))
        .at("/devices", get(devices::list))
        .at("/devices/:id", get(devices::show).post(devices::update))
        .at("/devices/:id/remove", post(devices::remove))
        .data(state)
        .around(|ep, req| async move {
            // The framework's own refusals (no such page, a form that does not parse) as pages too.
            let mut resp = match ep.call(req).await {
                Ok(r) => r.into_response(),
                // An extractor's own answer (`SignedForm`: the sign-in redirect, the 403 page).
                Err(e) if e.is_from_response() => e.into_response(),
                Err(e) => {
                    let status = e.status();
                    let message = match status {
                        StatusCode::NOT_FOUND => "There is no such page.",
                        StatusCode::METHOD_NOT_ALLOWED => "This page cannot be used that way.",
                        s if s.is_client_error() => "The form could not be read. Reload the page and try again.",
                        _ => "Something went wrong on our side. Try again in a moment.",
                    };
                    error_page(status, message)
                }
            };
            let h = resp.headers_mut();
            for (name, value) in [
                (
                    "content-security-policy",
                    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; form-action 'self'; \
                     frame-ancestors 'none'; base-uri 'none'",
                ),
                ("x-frame-options", "DENY"),
                ("x-content-type-options", "nosniff"),
                ("referrer-policy", "no-referrer"),
                ("cache-control", "no-store"),
            ] {
                if let Ok(v) = value.parse() {
                    h.insert(name, v);
                }
            }
            Ok(resp)
        })
}

// --- plumbing ------------------------------------------------------------------------------------

/// A signed-in user on a request.
struct Signed {
    session: user_session::Model,
    user: user::Model,
    gym: entity::gym::Model,
}

impl Signed {
    fn actor(&self) -> Actor {
        Actor::User(self.user.clone())
    }
    fn can_manage(&self) -> bool {
        accounts::user_has(&self.user, Permission::SettingsManage)
    }
}

fn html(status: StatusCode, body: String) -> Response {
    Response::builder().status(status).content_type("text/html; charset=utf-8").body(body)
}

fn redirect(to: &str) -> Response {
    Response::builder().status(StatusCode::SEE_OTHER).header(header::LOCATION, to).finish()
}

fn error_page(status: StatusCode, message: &str) -> Response {
    html(status, pages::error(status.as_u16(), message))
}

fn internal(err: impl std::fmt::Display) -> Response {
    tracing::error!(error = %err, "settings: internal error");
    error_page(StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong on our side. Try again in a moment.")
}

/// The signed-in user, or a redirect to the sign-in page.
async fn signed(state: &AppState, req: &Request) -> Result<Signed, Response> {
    let Some(token) = session::cookie(req, session::SESSION_COOKIE) else { return Err(redirect("/settings/sign-in")) };
    let (session, user) = match session::find(&state.db, token).await {
        Ok(Some(found)) => found,
        Ok(None) => return Err(redirect("/settings/sign-in")),
        Err(e) => return Err(internal(e)),
    };
    let gym = accounts::find_gym(&state.db, user.gym_id).await.map_err(internal)?;
    Ok(Signed { session, user, gym })
}

/// A form posted by the signed-in user with the session's CSRF token (its field `csrf`): what every
/// settings action takes, with the form's other fields as `T` (which ignores `csrf`). A body that
/// is not a form is poem's refusal (415 for another content type, 400 for one that does not
/// decode); no session, the redirect to sign-in; a missing or wrong token, 403. The handler runs
/// only once all three pass.
struct SignedForm<T>(Signed, T);

impl<'a, T: DeserializeOwned + Send> FromRequest<'a> for SignedForm<T> {
    async fn from_request(req: &'a Request, body: &mut RequestBody) -> poem::Result<Self> {
        let Form(pairs) = Form::<Vec<(String, String)>>::from_request(req, body).await?;
        // `T` from the same pairs, written out again: serde_urlencoded reads a struct from text.
        let fields = serde_urlencoded::to_string(&pairs)
            .map_err(poem::error::BadRequest)
            .and_then(|text| serde_urlencoded::from_str(&text).map_err(|e| ParseFormError::UrlDecode(e).into()))?;
        let state = req.data::<AppState>().ok_or_else(|| poem::Error::from_response(internal("no state")))?;
        let s = signed(state, req).await.map_err(poem::Error::from_response)?;
        let sent = pairs.iter().find(|(name, _)| name == "csrf").map_or("", |(_, v)| v.as_str());
        if !session::same(&s.session.csrf_token, sent) {
            return Err(poem::Error::from_response(error_page(
                StatusCode::FORBIDDEN,
                "This form has expired or did not come from this site. Reload the page and try again.",
            )));
        }
        if pairs.iter().any(|(name, value)| holds_nul(name) || holds_nul(value)) {
            return Err(poem::Error::from_response(nul_refused()));
        }
        Ok(Self(s, fields))
    }
}

/// Whether a form's text holds a NUL character: no store keeps one (PostgreSQL refuses it in
/// text), so a form that sends one is refused before anything reads or writes it.
fn holds_nul(text: &str) -> bool {
    text.contains('\0')
}

/// The page of a form refused for a NUL character (422).
fn nul_refused() -> Response {
    error_page(
        StatusCode::UNPROCESSABLE_ENTITY,
        "A field of this form holds a NUL character, which cannot be stored. Remove it and try again.",
    )
}

/// A form of no fields but its CSRF token (a button).
#[derive(Deserialize)]
struct Button {}

/// A refusal's reason as the sentence a page shows: capitalised, with a full stop.
fn sentence(mut reason: String) -> String {
    if let Some(first) = reason.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    format!("{reason}.")
}

/// An error of the domain as a page: bad input and refusals get their status, the rest is ours.
fn refused(e: AccountError) -> Response {
    match e {
        AccountError::PermissionDenied(_) => error_page(
            StatusCode::FORBIDDEN,
            "You need the settings.manage permission to change these settings. Ask the gym's owner.",
        ),
        AccountError::NotFound(what) => error_page(StatusCode::NOT_FOUND, &format!("This {what} does not exist.")),
        AccountError::Db(e) => internal(e),
        other => error_page(StatusCode::UNPROCESSABLE_ENTITY, &other.to_string()),
    }
}

#[handler]
fn css() -> Response {
    Response::builder().content_type("text/css; charset=utf-8").body(pages::CSS)
}

#[handler]
fn js() -> Response {
    Response::builder().content_type("text/javascript; charset=utf-8").body(pages::JS)
}
