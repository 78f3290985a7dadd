//! What the store keeps of an `Idempotency-Key`: the ask that begins it with its request's
//! admission, what it already stands for, and the response kept for replay.

use std::time::Duration;

/// A keyed write's first step, taken in the round trip that admits its request (when the request
/// is allowed): `Store::idempotency_begin` on `key` with `fingerprint`, for `lock`. The key must
/// begin with the API key's fingerprint and a `:` (the store keeps both on one Redis Cluster slot).
#[derive(Clone, Copy, Debug)]
pub struct IdempotencyAsk<'a> {
    pub key: &'a str,
    pub fingerprint: &'a str,
    pub lock: Duration,
}

/// A response kept for replay: what the client saw, byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: Option<String>,
    #[serde(with = "base64_bytes")]
    pub body: Vec<u8>,
}

mod base64_bytes {
    use base64::{Engine as _, engine::general_purpose::STANDARD};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// What an `Idempotency-Key` already stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdempotencyState {
    /// Unknown key: it is now reserved for this request, which must `complete` or `abort` it.
    Started,
    /// A request with this key and fingerprint is still running.
    Running,
    /// The key was used with another method, path or body.
    Mismatch,
    /// The first response, to be sent again.
    Replay(StoredResponse),
}

/// The record kept under an idempotency key.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct IdempotencyRecord {
    pub fingerprint: String,
    pub response: Option<StoredResponse>,
}
