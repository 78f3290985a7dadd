//! API keys on the wire: their shape, their fingerprint, and the one query that turns a key into the
//! tenant a request acts on.

use chrono::{DateTime, Utc};
use rand::{Rng, distributions::Alphanumeric, rngs::OsRng};
use sea_orm::{ConnectionTrait, DatabaseConnection, FromQueryResult, Statement};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{
    context::{Environment, Tenant},
    errors::{ApiError, NO_API_ACCESS_MESSAGE},
};

pub const LIVE_PREFIX: &str = "svc_live_";
pub const TEST_PREFIX: &str = "svc_test_";
/// Random characters after the environment prefix.
pub const KEY_RANDOM_LEN: usize = 32;
/// Random characters shown in the display prefix (`svc_live_AbCd`).
pub const DISPLAY_RANDOM_LEN: usize = 4;

/// A new key for an environment: the prefix plus 32 base62 characters from the OS RNG.
pub fn generate_key(env: Environment) -> String {
    let random: String = OsRng.sample_iter(&Alphanumeric).take(KEY_RANDOM_LEN).map(char::from).collect();
    format!("{}{random}", env_prefix(env))
}

pub fn env_prefix(env: Environment) -> &'static str {
    match env {
        Environment::Live => LIVE_PREFIX,
        Environment::Test => TEST_PREFIX,
    }
}

/// The environment of a well-formed key, `None` for anything else.
pub fn parse_key(key: &str) -> Option<Environment> {
    let (env, rest) = if let Some(rest) = key.strip_prefix(LIVE_PREFIX) {
        (Environment::Live, rest)
    } else if let Some(rest) = key.strip_prefix(TEST_PREFIX) {
        (Environment::Test, rest)
    } else {
        return None;
    };
    (rest.len() == KEY_RANDOM_LEN && rest.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(env)
}

/// Lowercase hex SHA-256 of the key: the only form in which a key is stored.
pub fn fingerprint(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// What the key list shows to tell keys apart.
pub fn display_prefix(key: &str) -> String {
    let cut = LIVE_PREFIX.len() + DISPLAY_RANDOM_LEN;
    key.chars().take(cut).collect()
}

/// The key from `Authorization: Bearer <key>` or `X-Api-Key: <key>`.
pub fn key_from_headers(headers: &poem::http::HeaderMap) -> Option<String> {
    if let Some(v) = headers.get(poem::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let mut parts = v.trim().splitn(2, ' ');
        let scheme = parts.next().unwrap_or_default();
        if scheme.eq_ignore_ascii_case("bearer") {
            return parts.next().map(|k| k.trim().to_string());
        }
    }
    headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(|k| k.trim().to_string())
}

#[derive(Debug, FromQueryResult)]
struct KeyRow {
    key_id: Uuid,
    gym_id: Uuid,
    environment: String,
    expires_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
    gym_parent_id: Option<Uuid>,
    api_access: bool,
    subscription_status: String,
    grace_ends_at: Option<DateTime<Utc>>,
    timezone: String,
    sandbox_id: Option<Uuid>,
    sandbox_timezone: Option<String>,
}

/// Whether a subscription in this state blocks requests (402): unpaid, or past due beyond the end of
/// the grace period.
pub fn subscription_blocks(status: &str, grace_ends_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    match status {
        "active" => false,
        "past_due" => grace_ends_at.is_some_and(|end| end <= now),
        _ => grace_ends_at.is_none_or(|end| end <= now),
    }
}

/// Resolves a key to its tenant in one indexed query (the key, its gym and the gym's sandbox), then
/// applies the checks of DESIGN.md §5 in order: 401, 402, 403.
pub async fn authenticate(db: &DatabaseConnection, key: Option<&str>, now: DateTime<Utc>) -> Result<Tenant, ApiError> {
    let key = key.ok_or(ApiError::Unauthorized)?;
    let env = parse_key(key).ok_or(ApiError::Unauthorized)?;
    let backend = db.get_database_backend();
    let sql = crate::db::placeholders(
        backend,
        "SELECT k.id AS key_id, k.gym_id, k.environment, k.expires_at, k.revoked_at, \
         g.parent_gym_id AS gym_parent_id, g.api_access, g.subscription_status, g.grace_ends_at, g.timezone, \
         s.id AS sandbox_id, s.timezone AS sandbox_timezone \
         FROM api_keys k JOIN gyms g ON g.id = k.gym_id LEFT JOIN gyms s ON s.parent_gym_id = g.id \
         WHERE k.fingerprint = ?",
    );
    let row = KeyRow::find_by_statement(Statement::from_sql_and_values(backend, sql, [fingerprint(key).into()]))
        .one(db)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let stored_env = Environment::parse(&row.environment).ok_or(ApiError::Unauthorized)?;
    let retired = row.expires_at.is_some_and(|t| t <= now);
    let revoked = row.revoked_at.is_some_and(|t| t <= now);
    // A key belongs to a production gym; a key whose gym is a sandbox never works.
    if stored_env != env || retired || revoked || row.gym_parent_id.is_some() {
        return Err(ApiError::Unauthorized);
    }
    let (gym_id, timezone) = match env {
        Environment::Live => (row.gym_id, row.timezone),
        Environment::Test => match row.sandbox_id {
            Some(id) => (id, row.sandbox_timezone.unwrap_or(row.timezone)),
            None => return Err(ApiError::Unauthorized),
        },
    };
    if subscription_blocks(&row.subscription_status, row.grace_ends_at, now) {
        return Err(ApiError::PaymentRequired);
    }
    if !row.api_access {
        return Err(ApiError::Forbidden(NO_API_ACCESS_MESSAGE.into()));
    }
    Ok(Tenant { gym_id, owner_gym_id: row.gym_id, key_id: row.key_id, environment: env, timezone })
}

/// Records that a key was used, at most once a minute per key: an in-process gate first, then a
/// conditional update, so that many instances together still write at most about once a minute.
/// Runs in a spawned task, never on the request's path.
#[derive(Default)]
pub struct LastUsed {
    seen: std::sync::Mutex<std::collections::HashMap<Uuid, std::time::Instant>>,
}

impl LastUsed {
    pub fn touch(&self, db: &DatabaseConnection, key_id: Uuid) {
        let now = std::time::Instant::now();
        {
            let Ok(mut seen) = self.seen.lock() else {
                return;
            };
            if seen.get(&key_id).is_some_and(|t| now.duration_since(*t).as_secs() < 60) {
                return;
            }
            seen.insert(key_id, now);
            if seen.len() > 100_000 {
                seen.retain(|_, t| now.duration_since(*t).as_secs() < 60);
            }
        }
        let db = db.clone();
        tokio::spawn(async move {
            let backend = db.get_database_backend();
            let at = Utc::now();
            let cutoff = at - chrono::Duration::seconds(60);
            let sql = crate::db::placeholders(
                backend,
                "UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
            );
            let stmt = Statement::from_sql_and_values(backend, sql, [at.into(), key_id.into(), cutoff.into()]);
            if let Err(e) = db.execute(stmt).await {
                tracing::warn!(error = %e, "could not record last_used_at");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_documented_shape() {
        let live = generate_key(Environment::Live);
        assert_eq!(parse_key(&live), Some(Environment::Live));
        assert_eq!(live.len(), LIVE_PREFIX.len() + 32);
        let test = generate_key(Environment::Test);
        assert_eq!(parse_key(&test), Some(Environment::Test));
        assert_ne!(generate_key(Environment::Live), live);
        assert_eq!(display_prefix(&live).len(), "svc_live_AbCd".len());
    }

    #[test]
    fn malformed_keys_are_rejected_by_shape() {
        for k in [
            "",
            "svc_live_",
            "svc_live_short",
            "sk_live_abcdefghijklmnopqrstuvwxyz012345",
            "svc_live_abcdefghijklmnopqrstuvwxyz01234-",
        ] {
            assert_eq!(parse_key(k), None, "{k}");
        }
    }

    #[test]
    fn grace_period_decides_payment_required() {
        let now = Utc::now();
        let past = now - chrono::Duration::hours(1);
        let future = now + chrono::Duration::hours(1);
        assert!(!subscription_blocks("active", Some(past), now));
        assert!(!subscription_blocks("past_due", None, now));
        assert!(!subscription_blocks("past_due", Some(future), now));
        assert!(subscription_blocks("past_due", Some(past), now));
        assert!(subscription_blocks("unpaid", None, now));
        assert!(!subscription_blocks("unpaid", Some(future), now));
    }
}
