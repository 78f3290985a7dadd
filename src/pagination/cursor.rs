//! A page's place in its walk, carried from the page before it: the `cursor` of a list's
//! `links.next` and `links.prev`, and what a walk by page number finds kept in the store.
//!
//! A cursor is signed with the deployment's key over the walk it belongs to (the gym, the list,
//! its filters, `as_of`, `per_page` and the page it leads to), so a cursor of another walk, an
//! edited one or a made-up one is not this page's and is ignored: the page is then found by its
//! number, as it would be without a cursor. A cursor only ever makes a page cheaper to find.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

/// A record's place in a list's order: its order column's time, then its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub at: DateTime<Utc>,
    pub id: Uuid,
}

/// Which side of a record a page lies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// The page holds the records after this one, newest first (the next page of a walk).
    After(Position),
    /// The page holds the records before this one (the previous page).
    Before(Position),
}

/// Where a page is and the walk's total, as the page next to it found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    pub anchor: Anchor,
    pub total: i64,
}

/// Bytes of the signature kept in a cursor (of HMAC-SHA256's 32).
const TAG: usize = 16;
/// Bytes of what a cursor says: the side, the time in microseconds, the id, the total.
const BODY: usize = 1 + 8 + 16 + 8;
/// The longest cursor text that can be one (base64 of `BODY + TAG` bytes is 66 characters).
const MAX_TEXT: usize = 66;

impl Resume {
    /// The cursor of this place in `walk` (see [`super::Page`]'s walk identity), signed with `key`.
    pub fn encode(&self, key: &[u8], walk: &str) -> String {
        let body = self.body();
        let mut bytes = body.to_vec();
        // HMAC takes a key of any length: `mac` is always there.
        let signature = mac(key, walk, &body).map(|m| m.finalize().into_bytes().to_vec()).unwrap_or_default();
        bytes.extend_from_slice(signature.get(..TAG).unwrap_or(&[0; TAG]));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The place a cursor names, when it was made for `walk` with `key`; `None` for anything else.
    pub fn decode(cursor: &str, key: &[u8], walk: &str) -> Option<Self> {
        if cursor.len() > MAX_TEXT {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        if bytes.len() != BODY + TAG {
            return None;
        }
        let (body, tag) = bytes.split_at(BODY);
        mac(key, walk, body)?.verify_truncated_left(tag).ok()?;
        Self::parse(body)
    }

    fn body(&self) -> [u8; BODY] {
        let (side, p) = match self.anchor {
            Anchor::After(p) => (0u8, p),
            Anchor::Before(p) => (1u8, p),
        };
        let mut body = [0u8; BODY];
        body[0] = side;
        body[1..9].copy_from_slice(&p.at.timestamp_micros().to_be_bytes());
        body[9..25].copy_from_slice(p.id.as_bytes());
        body[25..33].copy_from_slice(&self.total.to_be_bytes());
        body
    }

    fn parse(body: &[u8]) -> Option<Self> {
        let micros = i64::from_be_bytes(body.get(1..9)?.try_into().ok()?);
        let id = Uuid::from_slice(body.get(9..25)?).ok()?;
        let total = i64::from_be_bytes(body.get(25..33)?.try_into().ok()?);
        let p = Position { at: DateTime::from_timestamp_micros(micros)?, id };
        let anchor = match body.first()? {
            0 => Anchor::After(p),
            1 => Anchor::Before(p),
            _ => return None,
        };
        Some(Self { anchor, total })
    }
}

/// The signature of a cursor's `body` in `walk`, under `key`, before it is finished.
fn mac(key: &[u8], walk: &str, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).ok()?;
    mac.update(walk.as_bytes());
    mac.update(&[0]);
    mac.update(body);
    Some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resume() -> Resume {
        let at = DateTime::from_timestamp_micros(1_795_000_000_123_456).unwrap();
        Resume { anchor: Anchor::After(Position { at, id: Uuid::now_v7() }), total: 1_234_567 }
    }

    #[test]
    fn a_cursor_reads_back_only_in_its_own_walk_under_its_own_key() {
        let r = resume();
        let cursor = r.encode(b"key", "walk-a");
        assert!(cursor.len() <= MAX_TEXT);
        assert_eq!(Resume::decode(&cursor, b"key", "walk-a"), Some(r));
        assert_eq!(Resume::decode(&cursor, b"key", "walk-b"), None, "another walk");
        assert_eq!(Resume::decode(&cursor, b"other", "walk-a"), None, "another deployment");
        let before = Resume { anchor: Anchor::Before(Position { at: Utc::now(), id: Uuid::nil() }), total: 0 };
        let at_micros = |r: Resume| match r.anchor {
            Anchor::Before(p) | Anchor::After(p) => p.at.timestamp_micros(),
        };
        let back = Resume::decode(&before.encode(b"key", "w"), b"key", "w").unwrap();
        assert_eq!(at_micros(back), at_micros(before));
    }

    #[test]
    fn an_edited_or_made_up_cursor_is_nobodys() {
        let cursor = resume().encode(b"key", "w");
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[20] ^= 1;
        assert_eq!(Resume::decode(&URL_SAFE_NO_PAD.encode(&bytes), b"key", "w"), None);
        for junk in ["", "x", "%%%", &"A".repeat(66), &"A".repeat(10_000)] {
            assert_eq!(Resume::decode(junk, b"key", "w"), None, "{junk}");
        }
    }
}
