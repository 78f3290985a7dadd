//! Webhooks, one job a file: the event types (here); the outbox, events written in the
//! transaction of the change that caused them (`outbox`); signing (`signing`); where a webhook may
//! go (`urls`); endpoints, managed by gym users and operators (`endpoints`); deliveries sent again
//! and counted (`deliveries`); the dispatcher that sends them ([`dispatch`], through `proxy` when
//! one is named); events removed after the time they are kept ([`retention`]).
//!
//! A new kind of event needs only a [`EventType`] variant and a call to [`emit`] in the writing
//! transaction; the delivery machinery never looks inside `data`.

mod deliveries;
pub mod dispatch;
mod endpoints;
mod outbox;
mod proxy;
pub mod retention;
mod signing;
mod urls;

pub use deliveries::{daily_outcomes, recent_deliveries, redeliver};
pub use endpoints::{
    NewEndpoint, create_endpoint, delete_endpoint, find_endpoint, list_endpoints, ping, ping_data, rotate_secret,
    set_enabled,
};
pub use outbox::{
    Audience, NewEvent, Queued, audience, emit, emit_counted, emit_to, emit_to_audience, envelope, oldest_pending_age,
    wake, wake_if,
};
pub use signing::{new_secret, sign, signature_header};
pub use urls::{check_url, is_public};

use chrono::Duration;

/// The `User-Agent` of every webhook attempt, direct or through a proxy.
const USER_AGENT: &str = concat!("gymapi-webhooks/", env!("CARGO_PKG_VERSION"));

/// How long a rotated-out secret keeps signing (both signatures are sent meanwhile).
pub const SECRET_OVERLAP: Duration = Duration::hours(24);

/// The events a gym can receive. Their payload schemas are in openapi.yaml (`WebhookEvent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    MemberCreated,
    MemberUpdated,
    AttendanceCreated,
    PurchaseCreated,
    PurchaseUpdated,
    ImportCompleted,
    Ping,
}

impl EventType {
    pub const ALL: [EventType; 7] = [
        Self::MemberCreated,
        Self::MemberUpdated,
        Self::AttendanceCreated,
        Self::PurchaseCreated,
        Self::PurchaseUpdated,
        Self::ImportCompleted,
        Self::Ping,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MemberCreated => "member.created",
            Self::MemberUpdated => "member.updated",
            Self::AttendanceCreated => "attendance.created",
            Self::PurchaseCreated => "purchase.created",
            Self::PurchaseUpdated => "purchase.updated",
            Self::ImportCompleted => "import.completed",
            Self::Ping => "ping",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}
