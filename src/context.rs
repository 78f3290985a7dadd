//! What the middleware learnt about a request, handed to every handler.

use entity::ids::GymId;
use uuid::Uuid;

use crate::db::{Db, Unit};

pub use entity::states::Environment;

/// The gym a request acts on, resolved from its API key. Handlers receive it from the middleware and
/// never from the request itself, so no query can forget the tenant.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tenant {
    /// The gym whose data the request reads and writes: the production gym for a live key, its
    /// sandbox for a test key.
    pub gym_id: GymId,
    /// The production gym that owns the key.
    pub owner_gym_id: GymId,
    pub key_id: Uuid,
    pub environment: Environment,
    /// The gym's time zone (its IANA name on the wire and in the key cache), parsed once, when the
    /// key is resolved.
    pub timezone: chrono_tz::Tz,
    /// The gym's first facility, where a member created without one goes (facilities are never
    /// removed, so the first stays the first). Resolved with the key; `None` when the gym had none
    /// then, or from a grant cached before it was kept.
    #[serde(default)]
    pub first_facility_id: Option<Uuid>,
}

/// Per-request context for handlers.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub tenant: Tenant,
    /// Absolute base of this API as the client addressed it, e.g. `http://localhost:8080/api/v1`.
    pub base_url: String,
    /// Path of the request below the base, e.g. `/members`.
    pub path: String,
    /// The request's `Accept`, for the one operation that answers in more than one media type
    /// (the documents serving themselves, `types::Yaml`).
    pub accept: Option<poem::http::HeaderValue>,
    /// The keyed write the request is, when it carries an `Idempotency-Key` (set by the
    /// middleware that keeps the key): see [`Self::db`].
    pub unit: Option<Unit>,
}

impl RequestContext {
    /// The database as this request's handler uses it. For a keyed write, the write's handle:
    /// every transaction begun through it is a part of the write's one transaction, every
    /// statement runs in it once begun, and the write commits with the record of its response
    /// (`db::Unit`). Otherwise the database as it is.
    pub fn db(&self, db: &Db) -> Db {
        db.keyed(self.unit.as_ref())
    }

    pub fn accept(&self) -> Option<&str> {
        self.accept.as_ref().and_then(|a| a.to_str().ok())
    }
}
