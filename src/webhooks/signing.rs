//! Signing per Standard Webhooks: an endpoint's secrets and the `webhook-signature` header.

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use entity::webhook_endpoint;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::records::now;

/// A new signing secret: `whsec_` and 32 random bytes in base64.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("whsec_{}", B64.encode(bytes))
}

/// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under `secret` (`whsec_<base64 key>`).
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = B64.decode(secret.strip_prefix("whsec_").unwrap_or(secret)).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!("v1,{}", B64.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: one signature per valid secret, space separated.
pub fn signature_header(endpoint: &webhook_endpoint::Model, id: &str, timestamp: i64, body: &[u8]) -> String {
    let at = now();
    let mut sigs: Vec<String> = sign(&endpoint.secret, id, timestamp, body).into_iter().collect();
    if let (Some(previous), Some(until)) = (&endpoint.previous_secret, endpoint.previous_secret_expires_at)
        && until > at
    {
        sigs.extend(sign(previous, id, timestamp, body));
    }
    sigs.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn signatures_match_the_standard_webhooks_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
