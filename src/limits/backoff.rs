//! Failed attempts (sign-ins) spaced out instead of locked out.

use std::time::Duration;

/// What to do with a bucket of failed attempts (`Store::attempts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// One attempt, counted as a failure before its outcome is known, in one step of the store: so
    /// any number of attempts at once are let through only as far as the free ones go. Answers the
    /// wait due; an attempt refused so (a wait above zero) is not counted.
    Begin,
    /// Takes back one counted attempt (it succeeded).
    Undo,
    /// Forget the failures (a success).
    Clear,
    /// The wait due before the next attempt, counting nothing (for failures counted only once
    /// they are known, with `Begin` then).
    Check,
}

impl Attempt {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Begin => "begin",
            Self::Undo => "undo",
            Self::Clear => "clear",
            Self::Check => "check",
        }
    }
}

/// Failed attempts spaced out instead of locked out: the first `free` come at once; after them
/// each must wait `base * 2^(failures - free)`, at most `max`, from the previous failure. The
/// failures are forgotten `window` after the last one.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub free: u32,
    pub base: Duration,
    pub max: Duration,
    pub window: Duration,
}

impl Backoff {
    /// The wait after `failures` failures, from the last one.
    pub fn delay(&self, failures: u32) -> Duration {
        if failures < self.free {
            return Duration::ZERO;
        }
        let doublings = (failures - self.free).min(30);
        self.base.saturating_mul(1 << doublings).min(self.max)
    }
}
