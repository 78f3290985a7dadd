//! A rate limit: its policy, the two budgets of a key, and the verdict for one request.

use std::time::Duration;

/// A rate limit as a value, so that other endpoint families can have their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RatePolicy {
    /// Requests allowed in any rolling `window`.
    pub limit: u32,
    pub window: Duration,
}

/// What a request is counted against: its key's `budget` (each API family has its own), under
/// that family's `policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub budget: Budget,
    pub policy: RatePolicy,
}

impl RatePolicy {
    pub fn per_minute(limit: u32) -> Self {
        Self { limit, window: Duration::from_secs(60) }
    }

    /// The window in whole seconds (at least 1).
    pub fn window_secs(&self) -> u64 {
        self.window.as_secs().max(1)
    }
}

/// Which of a key's two budgets a request counts against: the integration API's, or the device
/// API's, counted apart (one key's device traffic never eats its integration budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    Integration,
    Devices,
}

impl Budget {
    /// What a budget's bucket adds to the key's fingerprint.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Integration => "",
            Self::Devices => ":devices",
        }
    }
}

/// The verdict for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
    /// Requests left in the window after this one.
    pub remaining: u32,
    /// Whole seconds until the oldest request counted leaves the window, and `remaining` grows
    /// (at least 1).
    pub reset_secs: u64,
}

impl Decision {
    /// The verdict when the store cannot be asked: allowed. An unreachable limiter must not take
    /// the API down with it.
    pub fn fail_open(policy: RatePolicy) -> Self {
        Self { allowed: true, limit: policy.limit, remaining: policy.limit, reset_secs: policy.window_secs() }
    }

    /// When refused: whole seconds until a request is allowed again (at least 1); else 0.
    pub fn retry_after_secs(&self) -> u64 {
        if self.allowed { 0 } else { self.reset_secs }
    }
}
