//! Sign-in sessions of gym users: a random token in an HttpOnly cookie, its SHA-256 in
//! `user_sessions`, and a CSRF token per session that every form sends back.

use chrono::Duration;
use entity::{user, user_session};
use poem::Request;
use rand::RngCore;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Set};
use sha2::{Digest, Sha256};

use crate::records::now;

pub const SESSION_COOKIE: &str = "gymapi_session";
/// The sign-in form's pre-session (before there is a session): a random nonce in this cookie, and
/// in the form the nonce's HMAC under the deployment's key (`server_secrets`), so that only a pair
/// the server issued is taken: one chosen by the sender (login CSRF) is refused.
pub const SIGNIN_COOKIE: &str = "gymapi_signin";
/// The cookie of a device an account signed in on (see `settings::sign_in::device_cookie`).
pub const DEVICE_COOKIE: &str = "gymapi_device";
/// How long a session lasts.
pub const LIFETIME: Duration = Duration::hours(12);

/// A random URL-safe token of 32 bytes.
pub fn token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The sign-in form's token for the pre-session `nonce`, under `key`.
pub fn form_token(key: &[u8], nonce: &str) -> String {
    use hmac::{Hmac, Mac};
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else { return String::new() };
    mac.update(b"sign-in:");
    mac.update(nonce.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Compares secrets in time independent of where they differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A cookie of the request.
pub fn cookie<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers()
        .get_all(poem::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether the browser reached us over https (directly or through a proxy that says so).
pub fn is_https(req: &Request, public_url: Option<&str>) -> bool {
    req.uri().scheme_str() == Some("https")
        || req.header("x-forwarded-proto").is_some_and(|p| p.eq_ignore_ascii_case("https"))
        || public_url.is_some_and(|u| u.starts_with("https://"))
}

/// `Set-Cookie` for a cookie of the settings area.
pub fn set_cookie(name: &str, value: &str, max_age_secs: i64, secure: bool) -> String {
    format!(
        "{name}={value}; Path=/settings; Max-Age={max_age_secs}; HttpOnly; SameSite=Lax{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Starts a session for `user`; returns the cookie token and the session.
pub async fn start(db: &impl ConnectionTrait, user: &user::Model) -> Result<(String, user_session::Model), DbErr> {
    let t = token();
    let at = now();
    let session = user_session::ActiveModel {
        id: Set(digest(&t)),
        user_id: Set(user.id),
        gym_id: Set(user.gym_id),
        csrf_token: Set(token()),
        created_at: Set(at),
        expires_at: Set(at + LIFETIME),
    }
    .insert(db)
    .await?;
    Ok((t, session))
}

/// The session and user of a cookie token, if it is current.
pub async fn find(db: &impl ConnectionTrait, token: &str) -> Result<Option<(user_session::Model, user::Model)>, DbErr> {
    let Some(session) = user_session::Entity::find_by_id(digest(token)).one(db).await? else { return Ok(None) };
    if session.expires_at <= now() {
        user_session::Entity::delete_by_id(session.id).exec(db).await?;
        return Ok(None);
    }
    let user = user::Entity::find_by_id(session.user_id).filter(user::Column::GymId.eq(session.gym_id)).one(db).await?;
    Ok(user.map(|u| (session, u)))
}

pub async fn end(db: &impl ConnectionTrait, token: &str) -> Result<(), DbErr> {
    user_session::Entity::delete_by_id(digest(token)).exec(db).await?;
    Ok(())
}
