//! Warnings that many requests would repeat at once (a store that stopped answering is met by
//! every request): each is logged at most once an interval, with how often it happened since.

use std::{
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

/// How often a repeated warning is logged at most.
pub const EVERY: Duration = Duration::from_secs(10);

/// One repeated warning's place in the log: a `static` beside the `tracing::warn!` it throttles.
pub struct Repeated {
    /// Occurrences since the last one logged.
    since: AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl Repeated {
    pub const fn new() -> Self {
        Self { since: AtomicU64::new(0), last: Mutex::new(None) }
    }

    /// Counts an occurrence; `Some(n)` when it is to be logged, `n` the occurrences since the last
    /// one logged, this one included (the first is logged at once).
    pub fn due(&self) -> Option<u64> {
        let n = self.since.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|t| now.duration_since(t) < EVERY) {
            return None;
        }
        *last = Some(now);
        self.since.fetch_sub(n, Ordering::Relaxed);
        Some(n)
    }
}

impl Default for Repeated {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_warning_is_due_once_an_interval_with_its_count() {
        let r = Repeated::new();
        assert_eq!(r.due(), Some(1), "the first at once");
        assert!((0..999).all(|_| r.due().is_none()), "then none within the interval");
        *r.last.lock().unwrap() = Some(Instant::now() - EVERY);
        assert_eq!(r.due(), Some(1000), "the next tells how many happened since");
    }
}
