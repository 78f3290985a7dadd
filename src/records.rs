//! What every stored record gets: a UUIDv7 id and times kept to the microsecond, written in one
//! RFC 3339 form.

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

/// Now, to the microsecond: the precision both databases store, so a time read back equals the
/// one written.
pub fn now() -> DateTime<Utc> {
    to_micros(Utc::now())
}

/// `t` kept to the microsecond, as every stored time is (a client may send nanoseconds; the wire
/// says six fractional digits, and a list's cursor names a record's place to the microsecond).
pub fn to_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

/// A new record id: UUIDv7, so ids sort by creation time.
pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

/// The IANA time zone `name`, or why it is none: the one message every writer of a time zone
/// (a gym's, a facility's) gives.
pub fn timezone(name: &str) -> Result<chrono_tz::Tz, String> {
    name.parse().map_err(|_| format!("unknown time zone {name:?} (use an IANA name such as Europe/Berlin)"))
}

/// RFC 3339 with microseconds and `Z`, as the API writes every time it puts in a link or an event
/// envelope.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}
