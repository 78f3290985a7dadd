//! A circuit breaker in front of Redis: once Redis has failed `THRESHOLD` calls in a row (a
//! timeout, a lost connection), calls fail at once for a cooldown instead of each waiting out its
//! own timeout; then one call probes (half-open) while the others keep failing fast, and its
//! answer closes the breaker or opens it again for twice as long (at most `MAX_COOLDOWN`).
//! Callers treat a failing store as they always have: the limiter fails open, keyed writes are
//! kept by the database alone. One breaker stands in front of one Redis: the limits store owns it
//! and lends it to the long polls' wake-ups (`wake::Wakes`), which call the same server.

use std::{
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

/// Failures in a row that open the breaker.
const THRESHOLD: u32 = 2;
/// The first cooldown, doubled after each failed probe up to `MAX_COOLDOWN`.
const FIRST_COOLDOWN: Duration = Duration::from_secs(1);
const MAX_COOLDOWN: Duration = Duration::from_secs(8);
/// A probe that has not reported after this long (its request went away) lets another one go.
const PROBE_STALE: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant, cooldown: Duration },
    Probing { since: Instant, cooldown: Duration },
}

/// Whether a call may go to Redis, and as what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Normal,
    Probe,
}

#[derive(Debug)]
pub struct Breaker {
    state: Mutex<State>,
    opened: AtomicU64,
}

impl Default for Breaker {
    fn default() -> Self {
        Self { state: Mutex::new(State::Closed { failures: 0 }), opened: AtomicU64::new(0) }
    }
}

impl Breaker {
    /// `Some` when the call may go to Redis now; `None` while the breaker is open (or another
    /// call is probing).
    pub fn pass(&self) -> Option<Pass> {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let cooldown = match *state {
            State::Closed { .. } => return Some(Pass::Normal),
            State::Open { until, cooldown } if now >= until => cooldown,
            State::Probing { since, cooldown } if now >= since + PROBE_STALE => cooldown,
            _ => return None,
        };
        *state = State::Probing { since: now, cooldown };
        Some(Pass::Probe)
    }

    /// What a call that was let through came to.
    pub fn record(&self, pass: Pass, ok: bool) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let next = match (*state, pass, ok) {
            (_, Pass::Probe, true) => {
                tracing::info!("Redis answers again; its breaker is closed");
                State::Closed { failures: 0 }
            }
            (State::Probing { cooldown, .. }, Pass::Probe, false) => {
                let cooldown = (cooldown * 2).min(MAX_COOLDOWN);
                State::Open { until: now + cooldown, cooldown }
            }
            (State::Closed { .. }, Pass::Normal, true) => State::Closed { failures: 0 },
            (State::Closed { failures }, Pass::Normal, false) if failures + 1 >= THRESHOLD => {
                self.opened.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "Redis failed {THRESHOLD} calls in a row; its breaker is open, calls skip it for {FIRST_COOLDOWN:?}"
                );
                State::Open { until: now + FIRST_COOLDOWN, cooldown: FIRST_COOLDOWN }
            }
            (State::Closed { failures }, Pass::Normal, false) => State::Closed { failures: failures + 1 },
            // A call let through before the breaker opened, answering late: the state stands.
            (current, _, _) => current,
        };
        *state = next;
    }

    /// Whether calls go to Redis (closed), and how many times the breaker has opened.
    pub fn health(&self) -> (bool, u64) {
        let state = *self.state.lock().unwrap_or_else(|e| e.into_inner());
        (matches!(state, State::Closed { .. }), self.opened.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_failures_in_a_row_and_lets_one_probe_through() {
        let b = Breaker::default();
        b.record(Pass::Normal, false);
        assert_eq!(b.pass(), Some(Pass::Normal), "one failure does not open it");
        b.record(Pass::Normal, true);
        b.record(Pass::Normal, false);
        b.record(Pass::Normal, false);
        assert_eq!(b.pass(), None, "two in a row do");
        assert_eq!(b.health(), (false, 1));
        *b.state.lock().unwrap() = State::Open { until: Instant::now(), cooldown: FIRST_COOLDOWN };
        assert_eq!(b.pass(), Some(Pass::Probe));
        assert_eq!(b.pass(), None, "one probe at a time");
        b.record(Pass::Probe, false);
        assert!(matches!(*b.state.lock().unwrap(), State::Open { cooldown, .. } if cooldown == FIRST_COOLDOWN * 2));
        *b.state.lock().unwrap() = State::Open { until: Instant::now(), cooldown: FIRST_COOLDOWN };
        assert_eq!(b.pass(), Some(Pass::Probe));
        b.record(Pass::Probe, true);
        assert_eq!(b.pass(), Some(Pass::Normal));
        assert_eq!(b.health(), (true, 1));
    }
}
