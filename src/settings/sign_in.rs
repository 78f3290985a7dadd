//! Signing in and out of the settings area: the sign-in form (its token a double-submit cookie),
//! the throttling of failed sign-ins per account, per address and per account and address, and
//! the session cookie.

use std::time::Duration;

use poem::{
    Request, Response, handler,
    http::{StatusCode, header},
    web::{Data, Form},
};
use serde::Deserialize;

use super::{
    Button, SignedForm, error_page, holds_nul, html, internal, nul_refused, pages, redirect, refused, session, signed,
};
use crate::{
    accounts,
    limits::{Attempt, Backoff},
    state::AppState,
};

#[handler]
pub(super) async fn index(req: &Request, state: Data<&AppState>) -> Response {
    match signed(&state, req).await {
        Ok(_) => redirect("/settings/integrations/api"),
        Err(r) => r,
    }
}

/// The key of the sign-in form's tokens (`session::form_token`).
async fn sign_in_key(state: &AppState) -> Result<&[u8], sea_orm::DbErr> {
    let key = state.sign_in_key.get_or_try_init(|| crate::db::server_secret(state.db.orm(), "sign_in_form"));
    key.await.map(Vec::as_slice)
}

#[handler]
pub(super) async fn sign_in_page(req: &Request, state: Data<&AppState>) -> Response {
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
pub(super) async fn sign_in(req: &Request, state: Data<&AppState>, Form(f): Form<SignInForm>) -> Response {
    let nonce = session::cookie(req, session::SIGNIN_COOKIE).unwrap_or_default();
    let key = match sign_in_key(&state).await {
        Ok(key) => key,
        Err(e) => return internal(e),
    };
    if nonce.is_empty() || !session::same(&session::form_token(key, nonce), &f.csrf) {
        return error_page(StatusCode::FORBIDDEN, "This form has expired. Reload the sign-in page and try again.");
    }
    if holds_nul(&f.email) || holds_nul(&f.password) {
        return nul_refused();
    }
    let email = f.email.trim().to_lowercase();
    let address = req.remote_addr().as_socket_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let known = known_device(key, session::cookie(req, session::DEVICE_COOKIE), &email);
    let buckets = sign_in_buckets(&email, &address, known.is_some());
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
    let slot = match state.password_hashes.try_acquire() {
        Ok(slot) => Ok(slot),
        Err(_) => {
            state.metrics.sign_in_hash_waits.inc();
            state.password_hashes.acquire().await
        }
    };
    let Ok(_slot) = slot else { return internal("the password hash slots are closed") };
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
    let device = device_cookie(key, &known.map_or_else(new_device, str::to_string), &email);
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

/// The cookie that makes the device `device` known to the account `email`: the device's id and a
/// keyed digest of the id with the email (no one makes one without the server's key, it names no
/// one, and no two devices share one).
fn device_cookie(key: &[u8], device: &str, email: &str) -> String {
    format!("{device}.{}", session::form_token(key, &format!("device:{device}:{email}")))
}

/// The id of a device that has not signed in before: 128 random bits, in hex.
fn new_device() -> String {
    use rand::Rng;
    hex::encode(rand::rngs::OsRng.r#gen::<[u8; 16]>())
}

/// The device's id, if `cookie` makes it known to the account `email` ([`device_cookie`]).
fn known_device<'c>(key: &[u8], cookie: Option<&'c str>, email: &str) -> Option<&'c str> {
    let cookie = cookie?;
    let (device, _) = cookie.split_once('.')?;
    let id = device.len() == 32 && device.bytes().all(|b| b.is_ascii_hexdigit());
    (id && session::same(cookie, &device_cookie(key, device, email))).then_some(device)
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

#[handler]
pub(super) async fn sign_out(req: &Request, state: Data<&AppState>, _: SignedForm<Button>) -> Response {
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
