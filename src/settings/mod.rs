//! The settings area for gym users: server-rendered pages under `/settings` to manage API keys,
//! the sandbox and webhooks (Integrations) and the front desk's devices.
//!
//! - Sign-in with email and password (argon2), sessions in an HttpOnly, SameSite=Lax cookie (Secure
//!   over https), throttled failed sign-ins, sign-out.
//! - Every form carries a CSRF token (the session's; on the sign-in form a double-submit cookie);
//!   a POST without the right one is refused with 403 and does nothing.
//! - Every action goes through the same domain code as the CLI (`accounts`, `webhooks`) with
//!   `Actor::User`; a user without `settings.manage` sees the pages without actions, and a direct
//!   POST is refused by the domain.
//! - No logic in the markup ([`pages`]): handlers gather what a page shows, pages only render it.

mod devices;
mod facilities;
mod pages;
pub mod session;

use std::{collections::HashMap, time::Duration};

use entity::{api_key, user, user_session, webhook_delivery, webhook_endpoint};
use poem::{
    Endpoint, EndpointExt, IntoResponse, Request, Response, Route, get, handler,
    http::{StatusCode, header},
    post,
    web::{Data, Form, Path},
};
use serde::Deserialize;
use uuid::Uuid;

use crate::{
    accounts::{self, AccountError, Actor, KeyStatus, Permission},
    context::Environment,
    limits::{Attempt, Backoff},
    records::now,
    state::AppState,
    webhooks,
};

pub use pages::{Flash, KeyRow, NewSecret};

/// The routes of the settings area, to be nested at `/settings`.
pub fn routes(state: AppState) -> impl Endpoint {
    Route::new()
        .at("/", get(index))
        .at("/sign-in", get(sign_in_page).post(sign_in))
        .at("/sign-out", post(sign_out))
        .at("/assets/app.css", get(css))
        .at("/assets/app.js", get(js))
        .at("/integrations/api", get(api_page))
        .at("/integrations/api/keys", post(create_key))
        .at("/integrations/api/keys/:id/roll", get(confirm_roll).post(roll_key))
        .at("/integrations/api/keys/:id/revoke", get(confirm_revoke).post(revoke_key))
        .at("/integrations/api/sandbox", post(provision_sandbox))
        .at("/integrations/webhooks", get(webhooks_page))
        .at("/integrations/webhooks/endpoints", post(create_endpoint))
        .at("/integrations/webhooks/endpoints/:id/:action", post(endpoint_action))
        .at("/integrations/webhooks/deliveries/:id/redeliver", post(redeliver))
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

/// The signed-in user of a form whose CSRF token is the session's; else the redirect or the 403.
async fn signed_form(state: &AppState, req: &Request, csrf: &str) -> Result<Signed, Response> {
    let s = signed(state, req).await?;
    match bad_csrf(&s, csrf) {
        Some(refusal) => Err(refusal),
        None => Ok(s),
    }
}

/// The refusal of a form whose CSRF token is not the session's.
fn bad_csrf(s: &Signed, sent: &str) -> Option<Response> {
    (!session::same(&s.session.csrf_token, sent)).then(|| {
        error_page(
            StatusCode::FORBIDDEN,
            "This form has expired or did not come from this site. Reload the page and try again.",
        )
    })
}

/// An error of the domain as a page: bad input and refusals get their status, the rest is ours.
/// A refusal's reason as the sentence a page shows: capitalised, with a full stop.
fn sentence(mut reason: String) -> String {
    if let Some(first) = reason.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    format!("{reason}.")
}

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

// --- sign-in -------------------------------------------------------------------------------------

#[handler]
async fn index(req: &Request, state: Data<&AppState>) -> Response {
    match signed(&state, req).await {
        Ok(_) => redirect("/settings/integrations/api"),
        Err(r) => r,
    }
}

/// The key of the sign-in form's tokens (`session::form_token`).
async fn sign_in_key(state: &AppState) -> Result<&[u8], sea_orm::DbErr> {
    let key = state.sign_in_key.get_or_try_init(|| session::server_secret(state.db.orm(), "sign_in_form"));
    key.await.map(Vec::as_slice)
}

#[handler]
async fn sign_in_page(req: &Request, state: Data<&AppState>) -> Response {
    let key = match sign_in_key(&state).await {
        Ok(key) => key,
        Err(e) => return internal(e),
    };
    let nonce = session::token();
    let secure = session::is_https(req, state.config.public_url.as_deref());
    let mut resp = html(StatusCode::OK, pages::sign_in(&session::form_token(key, &nonce), None));
    if let Ok(v) = session::set_cookie(session::SIGNIN_COOKIE, &nonce, 3600, secure).parse() {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[derive(Deserialize)]
struct SignInForm {
    email: String,
    password: String,
    /// Missing is refused like wrong (403), not as a malformed form.
    #[serde(default)]
    csrf: String,
}

#[handler]
async fn sign_in(req: &Request, state: Data<&AppState>, Form(f): Form<SignInForm>) -> Response {
    let nonce = session::cookie(req, session::SIGNIN_COOKIE).unwrap_or_default();
    let key = match sign_in_key(&state).await {
        Ok(key) => key,
        Err(e) => return internal(e),
    };
    if nonce.is_empty() || !session::same(&session::form_token(key, nonce), &f.csrf) {
        return error_page(StatusCode::FORBIDDEN, "This form has expired. Reload the sign-in page and try again.");
    }
    let email = f.email.trim().to_lowercase();
    let address = req.remote_addr().as_socket_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let device = known_device(key, &email);
    let known = session::cookie(req, session::DEVICE_COOKIE).is_some_and(|c| session::same(c, &device));
    let buckets = sign_in_buckets(&email, &address, known);
    let wait = sign_in_begins(&state, &buckets).await;
    if !wait.is_zero() {
        let wait = match u64::try_from(wait.as_millis().div_ceil(1000)).unwrap_or(u64::MAX) {
            s if s < 60 => format!("{s} s"),
            s => format!("{} min", s.div_ceil(60)),
        };
        return html(
            StatusCode::TOO_MANY_REQUESTS,
            pages::sign_in(&f.csrf, Some(&format!("Too many sign-in attempts. Try again in {wait}."))),
        );
    }
    let user = match accounts::verify_user(&state.db, &email, &f.password).await {
        Ok(Some(u)) => u,
        Ok(None) => {
            // Counted already, when it began.
            return html(
                StatusCode::UNAUTHORIZED,
                pages::sign_in(&f.csrf, Some("The email or the password is wrong.")),
            );
        }
        Err(e) => return refused(e),
    };
    sign_in_attempts(&state, &buckets[..1], Attempt::Clear).await;
    sign_in_attempts(&state, &buckets[1..], Attempt::Undo).await;
    let (token, _) = match session::start(&state.db, &user).await {
        Ok(s) => s,
        Err(e) => return internal(e),
    };
    let secure = session::is_https(req, state.config.public_url.as_deref());
    let mut resp = redirect("/settings/integrations/api");
    let h = resp.headers_mut();
    for c in [
        session::set_cookie(session::SESSION_COOKIE, &token, session::LIFETIME.num_seconds(), secure),
        session::set_cookie(session::SIGNIN_COOKIE, "", 0, secure),
        session::set_cookie(session::DEVICE_COOKIE, &device, KNOWN_DEVICE_SECS, secure),
    ] {
        if let Ok(v) = c.parse() {
            h.append(header::SET_COOKIE, v);
        }
    }
    resp
}

/// Failed sign-ins are counted per email and address together (a guesser elsewhere never slows the
/// owner's own device down, and a success clears them), per address across emails (one address
/// trying many accounts) and per account ([`SIGN_IN_ACCOUNT`]); past the free ones each waits twice
/// as long as the one before.
const SIGN_IN_PAIR: Backoff = Backoff {
    free: 5,
    base: Duration::from_secs(5),
    max: Duration::from_secs(15 * 60),
    window: Duration::from_secs(3600),
};
const SIGN_IN_ADDRESS: Backoff = Backoff {
    free: 50,
    base: Duration::from_secs(5),
    max: Duration::from_secs(15 * 60),
    window: Duration::from_secs(3600),
};

/// Failed sign-ins of one account from every address together (many addresses guessing one
/// password): past 20 an hour the next waits 10 s, each after twice as long as the one before, at
/// most a minute, so guesses are slowed to one a minute and the account is never locked. A device the account has
/// signed in on before (its cookie, [`known_device`]) is not slowed by them; the owner on a fresh
/// device waits a minute at most.
const SIGN_IN_ACCOUNT: Backoff =
    Backoff { free: 20, base: Duration::from_secs(2), max: Duration::from_secs(60), window: Duration::from_secs(3600) };
/// How long a device stays known to an account after a sign-in on it.
const KNOWN_DEVICE_SECS: i64 = 180 * 24 * 3600;

/// The cookie that makes a device known to the account `email`: a keyed digest of the address
/// (no one makes it without the server's key, and it names no one).
fn known_device(key: &[u8], email: &str) -> String {
    session::form_token(key, &format!("device:{email}"))
}

/// The buckets a sign-in counts in: the email and address together, the address, and, unless the
/// device is known to the account, the account.
fn sign_in_buckets(email: &str, address: &str, known_device: bool) -> Vec<(String, Backoff)> {
    let mut buckets =
        vec![(format!("signin:{address}:{email}"), SIGN_IN_PAIR), (format!("signin:{address}"), SIGN_IN_ADDRESS)];
    if !known_device {
        buckets.push((format!("signin:account:{email}"), SIGN_IN_ACCOUNT));
    }
    buckets
}

/// Begins a sign-in on every bucket, each counted as a failure until it succeeds (`Attempt::Begin`,
/// one step of the store: sign-ins sent at once cannot all pass a check made before any is
/// counted). The wait due when a bucket refuses it; the buckets that counted it take it back.
async fn sign_in_begins(state: &AppState, buckets: &[(String, Backoff)]) -> Duration {
    for i in 0..buckets.len() {
        let wait = sign_in_attempts(state, &buckets[i..=i], Attempt::Begin).await;
        if !wait.is_zero() {
            sign_in_attempts(state, &buckets[..i], Attempt::Undo).await;
            return wait;
        }
    }
    Duration::ZERO
}

/// Does `attempt` on each bucket; the longest wait due. A store that does not answer slows no one
/// down (it fails open, as the rate limit does).
async fn sign_in_attempts(state: &AppState, buckets: &[(String, Backoff)], attempt: Attempt) -> Duration {
    let mut wait = Duration::ZERO;
    for (bucket, policy) in buckets {
        match state.store.attempts(bucket, attempt, *policy).await {
            Ok(w) => wait = wait.max(w),
            Err(e) => tracing::warn!(error = %e, "sign-in attempts could not be counted"),
        }
    }
    wait
}

#[derive(Deserialize)]
struct CsrfForm {
    /// Missing is refused like wrong (403), not as a malformed form.
    #[serde(default)]
    csrf: String,
}

#[handler]
async fn sign_out(req: &Request, state: Data<&AppState>, Form(f): Form<CsrfForm>) -> Response {
    if let Err(r) = signed_form(&state, req, &f.csrf).await {
        return r;
    }
    if let Some(token) = session::cookie(req, session::SESSION_COOKIE)
        && let Err(e) = session::end(&state.db, token).await
    {
        return internal(e);
    }
    let secure = session::is_https(req, state.config.public_url.as_deref());
    let mut resp = redirect("/settings/sign-in");
    if let Ok(v) = session::set_cookie(session::SESSION_COOKIE, "", 0, secure).parse() {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[handler]
fn css() -> Response {
    Response::builder().content_type("text/css; charset=utf-8").body(pages::CSS)
}

#[handler]
fn js() -> Response {
    Response::builder().content_type("text/javascript; charset=utf-8").body(pages::JS)
}

// --- API integration -----------------------------------------------------------------------------

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
async fn api_page(req: &Request, state: Data<&AppState>) -> Response {
    match signed(&state, req).await {
        Ok(s) => render_api(&state, &s, None, StatusCode::OK).await,
        Err(r) => r,
    }
}

#[derive(Deserialize)]
struct NewKeyForm {
    /// Missing is refused like wrong (403), not as a malformed form.
    #[serde(default)]
    csrf: String,
    name: String,
    environment: String,
}

#[handler]
async fn create_key(req: &Request, state: Data<&AppState>, Form(f): Form<NewKeyForm>) -> Response {
    let s = match signed_form(&state, req, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
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
async fn confirm_roll(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>) -> Response {
    confirm(req, &state, id, pages::KeyAction::Roll).await
}

#[handler]
async fn confirm_revoke(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>) -> Response {
    confirm(req, &state, id, pages::KeyAction::Revoke).await
}

#[handler]
async fn roll_key(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>, Form(f): Form<CsrfForm>) -> Response {
    let s = match signed_form(&state, req, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
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
async fn revoke_key(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>, Form(f): Form<CsrfForm>) -> Response {
    let s = match signed_form(&state, req, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
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

#[handler]
async fn provision_sandbox(req: &Request, state: Data<&AppState>, Form(f): Form<CsrfForm>) -> Response {
    let s = match signed_form(&state, req, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    match accounts::provision_sandbox(&state.db, &s.actor(), s.gym.id).await {
        Ok(_) => redirect("/settings/integrations/api"),
        Err(e) => refused(e),
    }
}

// --- webhooks ------------------------------------------------------------------------------------

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
async fn webhooks_page(req: &Request, state: Data<&AppState>) -> Response {
    match signed(&state, req).await {
        Ok(s) => render_webhooks(&state, &s, None, StatusCode::OK).await,
        Err(r) => r,
    }
}

/// The endpoint form: URL, Live or Sandbox, and event types (checkboxes, repeated `events`).
fn endpoint_form(body: &str) -> (HashMap<String, String>, Vec<String>) {
    let mut fields = HashMap::new();
    let mut events = Vec::new();
    for (k, v) in url::form_urlencoded::parse(body.as_bytes()) {
        if k == "events" {
            events.push(v.into_owned());
        } else {
            fields.insert(k.into_owned(), v.into_owned());
        }
    }
    (fields, events)
}

#[handler]
async fn create_endpoint(req: &Request, state: Data<&AppState>, body: String) -> Response {
    let s = match signed(&state, req).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (fields, events) = endpoint_form(&body);
    if let Some(r) = bad_csrf(&s, fields.get("csrf").map(String::as_str).unwrap_or_default()) {
        return r;
    }
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
async fn endpoint_action(
    req: &Request,
    state: Data<&AppState>,
    Path((id, action)): Path<(Uuid, String)>,
    Form(f): Form<CsrfForm>,
) -> Response {
    let s = match signed_form(&state, req, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
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
async fn redeliver(req: &Request, state: Data<&AppState>, Path(id): Path<Uuid>, Form(f): Form<CsrfForm>) -> Response {
    let s = match signed_form(&state, req, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
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
