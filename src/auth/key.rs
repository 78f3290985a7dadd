//! An API key as text: its shape (`svc_live_` or `svc_test_`, 32 random characters, a checksum of
//! six), its fingerprint (the only form stored), the part shown to tell keys apart, and where a
//! request presents it.

use rand::{Rng, distributions::Alphanumeric, rngs::OsRng};
use sha2::{Digest, Sha256};

use crate::context::Environment;

pub const LIVE_PREFIX: &str = "svc_live_";
pub const TEST_PREFIX: &str = "svc_test_";
/// Random characters after the environment prefix.
pub const KEY_RANDOM_LEN: usize = 32;
/// Characters of the checksum that ends a key issued since 2026-11-28.
pub const KEY_CHECKSUM_LEN: usize = 6;
/// Random characters shown in the display prefix (`svc_live_AbCd`).
pub const DISPLAY_RANDOM_LEN: usize = 4;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A new key for an environment: the prefix, 32 base62 characters from the OS RNG, and the
/// checksum of both.
pub fn generate_key(env: Environment) -> String {
    let random: String = OsRng.sample_iter(&Alphanumeric).take(KEY_RANDOM_LEN).map(char::from).collect();
    let body = format!("{}{random}", env_prefix(env));
    let checksum = checksum(&body);
    format!("{body}{checksum}")
}

/// The CRC-32 of the prefix and random part, as six base62 characters (most significant first).
fn checksum(body: &str) -> String {
    let mut n = u64::from(crc32fast::hash(body.as_bytes()));
    let mut out = [b'0'; KEY_CHECKSUM_LEN];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    out.iter().map(|&b| char::from(b)).collect()
}

pub fn env_prefix(env: Environment) -> &'static str {
    match env {
        Environment::Live => LIVE_PREFIX,
        Environment::Test => TEST_PREFIX,
    }
}

/// How a well-formed key was made: with a checksum (every key issued since 2026-11-28), or before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyShape {
    Checksummed,
    Legacy,
}

/// The environment and shape of a well-formed key, `None` for anything else: a key of today's
/// length whose checksum does not match is not well formed.
pub fn parse_key(key: &str) -> Option<(Environment, KeyShape)> {
    let (env, rest) = if let Some(rest) = key.strip_prefix(LIVE_PREFIX) {
        (Environment::Live, rest)
    } else if let Some(rest) = key.strip_prefix(TEST_PREFIX) {
        (Environment::Test, rest)
    } else {
        return None;
    };
    if !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    match rest.len() {
        KEY_RANDOM_LEN => Some((env, KeyShape::Legacy)),
        n if n == KEY_RANDOM_LEN + KEY_CHECKSUM_LEN => {
            let (body, sum) = key.split_at(key.len() - KEY_CHECKSUM_LEN);
            (checksum(body) == sum).then_some((env, KeyShape::Checksummed))
        }
        _ => None,
    }
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

/// The key a request presents (openapi.yaml, "Authentication"): the token of `Authorization:
/// Bearer <token>` when there is one, whatever it is; otherwise `X-Api-Key`. An `Authorization`
/// header of another scheme, or a `Bearer` without a token, presents nothing.
pub fn key_from_headers(headers: &poem::http::HeaderMap) -> Option<String> {
    let present = |k: &str| Some(k.trim()).filter(|k| !k.is_empty()).map(str::to_string);
    let bearer = headers.get(poem::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| {
        let (scheme, token) = v.trim().split_once(' ').unwrap_or((v.trim(), ""));
        scheme.eq_ignore_ascii_case("bearer").then(|| present(token)).flatten()
    });
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()).and_then(present))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_documented_shape() {
        let live = generate_key(Environment::Live);
        assert_eq!(parse_key(&live), Some((Environment::Live, KeyShape::Checksummed)));
        assert_eq!(live.len(), LIVE_PREFIX.len() + KEY_RANDOM_LEN + KEY_CHECKSUM_LEN);
        let test = generate_key(Environment::Test);
        assert_eq!(parse_key(&test), Some((Environment::Test, KeyShape::Checksummed)));
        assert_ne!(generate_key(Environment::Live), live);
        assert_eq!(display_prefix(&live).len(), "svc_live_AbCd".len());
        // A key of before the checksum: the prefix and 32 characters.
        assert_eq!(parse_key(&live[..live.len() - KEY_CHECKSUM_LEN]), Some((Environment::Live, KeyShape::Legacy)));
    }

    #[test]
    fn malformed_keys_are_rejected_by_shape() {
        let live = generate_key(Environment::Live);
        let mut typo = live.clone().into_bytes();
        typo[12] = if typo[12] == b'a' { b'b' } else { b'a' };
        let typo = String::from_utf8(typo).unwrap_or_default();
        for k in [
            "",
            "svc_live_",
            "svc_live_short",
            "sk_live_abcdefghijklmnopqrstuvwxyz012345",
            "svc_live_abcdefghijklmnopqrstuvwxyz01234-",
            &typo,
            &live.replacen(LIVE_PREFIX, TEST_PREFIX, 1),
            &format!("{live}0"),
        ] {
            assert_eq!(parse_key(k), None, "{k}");
        }
    }
}
