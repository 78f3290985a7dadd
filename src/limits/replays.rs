//! The embedded default's idempotency records: keyed writes' responses, kept in process for the
//! idempotency window (24 h by default), [`MOST`] at the most. Each record is kept small: the scope
//! and the request's fingerprint as 32-byte digests, the body deflated when that makes it smaller
//! (a member's 443-byte JSON keeps 262 bytes), the content type shared between records. Expired
//! records are swept whenever the map has doubled since the last sweep, so a sweep's cost is
//! spread over the writes that made it due. At the bound, the tenth of the kept responses closest
//! to expiring goes: this store is the fast path only, and a repeat of a key it no longer holds is
//! answered from the key's database record, as after a restart.

use std::{collections::HashMap, sync::Arc, time::Instant};

use sha2::{Digest as _, Sha256};

use super::{IdempotencyState, StoreError, StoredResponse};

pub(super) type Digest = [u8; 32];

/// A scope or a fingerprint as the map keeps it; taken before the store's lock.
pub(super) fn digest(s: &str) -> Digest {
    Sha256::digest(s.as_bytes()).into()
}

/// Fewest records at which expired ones are swept.
const FIRST_SWEEP: usize = 1_024;

/// Most records held (a member's response is about 400 bytes in all: some 20 MB).
const MOST: usize = 50_000;

/// Deflate level: the fastest; a response's field names are most of what it repeats.
const LEVEL: u8 = 1;

pub(super) struct Replays {
    records: HashMap<Digest, Box<Record>>,
    /// The map's size at which expired records are next swept.
    sweep_at: usize,
    /// Most records held ([`MOST`]; smaller in tests).
    most: usize,
    /// The content types of the responses kept (in practice one or two), each held once.
    content_types: Vec<Arc<str>>,
}

struct Record {
    fingerprint: Digest,
    expires: Instant,
    /// `None` while the first request with the key runs.
    response: Option<Kept>,
}

#[derive(Clone)]
pub(super) struct Kept {
    status: u16,
    content_type: Option<Arc<str>>,
    body: Body,
}

#[derive(Clone)]
enum Body {
    Plain(Box<[u8]>),
    /// Raw deflate of a body of `len` bytes.
    Deflated {
        bytes: Box<[u8]>,
        len: u32,
    },
}

impl Default for Replays {
    fn default() -> Self {
        Self { records: HashMap::new(), sweep_at: FIRST_SWEEP, most: MOST, content_types: Vec::new() }
    }
}

/// What a key stands for, as found under the store's lock. A kept response is a copy of its
/// deflated form, inflated by [`Found::state`] after the lock is let go.
pub(super) enum Found {
    State(IdempotencyState),
    Kept(Kept),
}

impl Found {
    pub fn state(self) -> Result<IdempotencyState, StoreError> {
        match self {
            Found::State(state) => Ok(state),
            Found::Kept(kept) => Ok(IdempotencyState::Replay(kept.restore()?)),
        }
    }
}

/// A started request's response, made ready to keep before the store's lock is taken: deflating a
/// large body (an import batch's answer) must not hold up every other keyed write.
pub(super) struct Completed<'a> {
    fingerprint: Digest,
    status: u16,
    content_type: Option<&'a str>,
    body: Body,
}

impl<'a> Completed<'a> {
    pub fn new(fingerprint: &str, response: &'a StoredResponse) -> Self {
        Self {
            fingerprint: digest(fingerprint),
            status: response.status,
            content_type: response.content_type.as_deref(),
            body: Body::new(&response.body),
        }
    }
}

impl Replays {
    /// What `key` stands for at `now`; reserves it until `lock_until` when it is new.
    pub fn begin(&mut self, key: Digest, fingerprint: Digest, now: Instant, lock_until: Instant) -> Found {
        if self.records.len() >= self.sweep_at.min(self.most) {
            self.sweep(now);
        }
        if self.records.len() >= self.most {
            self.drop_closest_to_expiring();
        }
        match self.records.get(&key).filter(|r| r.expires > now) {
            None => {
                self.records.insert(key, Box::new(Record { fingerprint, expires: lock_until, response: None }));
                Found::State(IdempotencyState::Started)
            }
            Some(r) if r.fingerprint != fingerprint => Found::State(IdempotencyState::Mismatch),
            Some(r) => match &r.response {
                None => Found::State(IdempotencyState::Running),
                Some(kept) => Found::Kept(kept.clone()),
            },
        }
    }

    /// Keeps the response of a started request until `expires`.
    pub fn complete(&mut self, key: Digest, done: Completed<'_>, expires: Instant) {
        let content_type = done.content_type.map(|ct| self.content_type(ct));
        let kept = Kept { status: done.status, content_type, body: done.body };
        let record = Record { fingerprint: done.fingerprint, expires, response: Some(kept) };
        self.records.insert(key, Box::new(record));
    }

    /// Frees a started request's key.
    pub fn abort(&mut self, key: Digest) {
        self.records.remove(&key);
    }

    /// How many records are held, expired or not.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.records.len()
    }

    fn sweep(&mut self, now: Instant) {
        self.records.retain(|_, r| r.expires > now);
        let live = self.records.len();
        if self.records.capacity() > 4 * live.max(FIRST_SWEEP) {
            self.records.shrink_to(2 * live);
        }
        self.sweep_at = (2 * live).max(FIRST_SWEEP);
    }

    /// Drops the tenth of the kept responses closest to expiring (the oldest). A running request's
    /// reservation stays: it ends with its request.
    fn drop_closest_to_expiring(&mut self) {
        let mut ends: Vec<Instant> =
            self.records.values().filter(|r| r.response.is_some()).map(|r| r.expires).collect();
        if ends.is_empty() {
            return;
        }
        let cut = (self.most / 10).min(ends.len() - 1);
        let bar = *ends.select_nth_unstable(cut).1;
        self.records.retain(|_, r| r.response.is_none() || r.expires > bar);
    }

    fn content_type(&mut self, ct: &str) -> Arc<str> {
        if let Some(known) = self.content_types.iter().find(|known| known.as_ref() == ct) {
            return known.clone();
        }
        let new: Arc<str> = ct.into();
        // A bound, in case responses ever carried many: past it, each record holds its own.
        if self.content_types.len() < 16 {
            self.content_types.push(new.clone());
        }
        new
    }
}

impl Kept {
    fn restore(&self) -> Result<StoredResponse, StoreError> {
        Ok(StoredResponse {
            status: self.status,
            content_type: self.content_type.as_deref().map(str::to_string),
            body: self.body.bytes()?,
        })
    }
}

impl Body {
    fn new(body: &[u8]) -> Self {
        if let Ok(len) = u32::try_from(body.len()) {
            let deflated = miniz_oxide::deflate::compress_to_vec(body, LEVEL);
            if deflated.len() < body.len() {
                // Copied rather than shrunk in place: an allocator may keep a shrunk block whole
                // (mimalloc does down to half its size), and the point is the smaller block.
                return Body::Deflated { bytes: Box::from(deflated.as_slice()), len };
            }
        }
        Body::Plain(body.into())
    }

    fn bytes(&self) -> Result<Vec<u8>, StoreError> {
        match self {
            Body::Plain(b) => Ok(b.to_vec()),
            Body::Deflated { bytes, len } => {
                let len = *len as usize;
                let body = miniz_oxide::inflate::decompress_to_vec_with_limit(bytes, len)
                    .map_err(|e| StoreError::Backend(format!("a kept response does not inflate: {e}")))?;
                if body.len() == len {
                    Ok(body)
                } else {
                    Err(StoreError::Backend(format!("a kept response inflated to {} bytes, not {len}", body.len())))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn begin(r: &mut Replays, key: &str, fingerprint: &str, now: Instant, lock: Instant) -> IdempotencyState {
        r.begin(digest(key), digest(fingerprint), now, lock).state().unwrap()
    }

    fn complete(r: &mut Replays, key: &str, fingerprint: &str, response: &StoredResponse, expires: Instant) {
        r.complete(digest(key), Completed::new(fingerprint, response), expires);
    }

    fn response(body: &[u8]) -> StoredResponse {
        StoredResponse {
            status: 201,
            content_type: Some("application/json; charset=utf-8".into()),
            body: body.to_vec(),
        }
    }

    #[test]
    fn a_kept_response_comes_back_byte_for_byte_deflated_or_not() {
        let member = br#"{"object":"member","id":"01a20c25-b1c9-711e-bb9d-9475e4ff5a38","first_name":"Load","last_name":"Test","email":null,"phone":null,"gender":null,"date_of_birth":null,"city":null,"country":null,"status":"active"}"#;
        let noise: Vec<u8> = (0u32..300).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert!(matches!(Body::new(member), Body::Deflated { .. }), "JSON deflates");
        assert!(matches!(Body::new(&noise), Body::Plain(_)), "what does not shrink is kept as it is");
        let now = Instant::now();
        let lock = now + Duration::from_secs(60);
        let mut r = Replays::default();
        for (key, body) in [("json", &member[..]), ("noise", &noise[..]), ("empty", &[][..])] {
            assert_eq!(begin(&mut r, key, "fp", now, lock), IdempotencyState::Started);
            assert_eq!(begin(&mut r, key, "fp", now, lock), IdempotencyState::Running);
            complete(&mut r, key, "fp", &response(body), now + Duration::from_secs(3600));
            assert_eq!(begin(&mut r, key, "fp", now, lock), IdempotencyState::Replay(response(body)));
            assert_eq!(begin(&mut r, key, "other", now, lock), IdempotencyState::Mismatch);
        }
        assert_eq!(r.content_types.len(), 1, "one content type, held once");
        r.abort(digest("json"));
        assert_eq!(begin(&mut r, "json", "other", now, lock), IdempotencyState::Started);
    }

    /// At its bound the store drops the tenth of its kept responses closest to expiring, and keeps
    /// a running request's reservation.
    #[test]
    fn at_its_bound_the_responses_closest_to_expiring_go() {
        let now = Instant::now();
        let lock = now + Duration::from_secs(60);
        let mut r = Replays { most: 100, ..Replays::default() };
        assert_eq!(begin(&mut r, "running", "fp", now, lock), IdempotencyState::Started);
        let body = response(b"{}");
        for i in 0..99u64 {
            let key = format!("k-{i}");
            begin(&mut r, &key, "fp", now, lock);
            complete(&mut r, &key, "fp", &body, now + Duration::from_secs(3600 + i));
        }
        assert_eq!(r.len(), 100);
        assert_eq!(begin(&mut r, "new", "fp", now, lock), IdempotencyState::Started);
        assert_eq!(r.len(), 90, "eleven of the kept went, the newest key came");
        assert_eq!(begin(&mut r, "k-0", "fp", now, lock), IdempotencyState::Started, "the oldest went");
        assert_eq!(begin(&mut r, "k-10", "fp", now, lock), IdempotencyState::Started, "the eleventh went");
        assert_eq!(begin(&mut r, "k-11", "fp", now, lock), IdempotencyState::Replay(body.clone()));
        assert_eq!(begin(&mut r, "k-98", "fp", now, lock), IdempotencyState::Replay(body));
        assert_eq!(begin(&mut r, "running", "fp", now, lock), IdempotencyState::Running);
    }

    #[test]
    fn expired_records_are_swept_once_the_map_has_doubled() {
        let start = Instant::now();
        let mut r = Replays::default();
        let body = response(b"{}");
        for i in 0..FIRST_SWEEP {
            let key = format!("old-{i}");
            begin(&mut r, &key, "fp", start, start + Duration::from_secs(60));
            complete(&mut r, &key, "fp", &body, start + Duration::from_secs(10));
        }
        let later = start + Duration::from_secs(11);
        assert_eq!(
            begin(&mut r, "old-0", "fp", later, later + Duration::from_secs(60)),
            IdempotencyState::Started,
            "an expired key runs again"
        );
        assert_eq!(r.len(), 1, "the records that had expired were swept");
        for i in 0..FIRST_SWEEP {
            let key = format!("new-{i}");
            begin(&mut r, &key, "fp", later, later + Duration::from_secs(60));
            complete(&mut r, &key, "fp", &body, later + Duration::from_secs(10));
        }
        // The last of them found the map full again: a sweep that kept every record.
        assert_eq!(r.len(), FIRST_SWEEP + 1, "live records are kept by a sweep");
        assert_eq!(r.sweep_at, 2 * FIRST_SWEEP, "the next sweep waits for the map to double");
    }
}
