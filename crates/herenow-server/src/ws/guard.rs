//! Per-connection guards: a token bucket on incoming messages, and a count
//! of recent errors that ends an abusive connection.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::limits::{ERROR_WINDOW, MAX_ERRORS, RATE_BURST, RATE_PER_SECOND};
use crate::socket::TokenBucket;
use crate::ws::wire::WsError;

/// The guards of one connection, at the protocol's bounds: [`RATE_BURST`]
/// messages at once and [`RATE_PER_SECOND`] sustained; [`MAX_ERRORS`] of
/// the client's own errors within [`ERROR_WINDOW`] end it.
#[derive(Debug)]
pub(super) struct Guards {
    rate: TokenBucket,
    errors: ErrorWindow,
}

impl Guards {
    /// Fresh guards for a connection that starts at `now`: a full bucket,
    /// no errors.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            rate: TokenBucket::new(RATE_BURST, RATE_PER_SECOND, now),
            errors: ErrorWindow::new(MAX_ERRORS, ERROR_WINDOW),
        }
    }

    /// Whether a message arriving at `now` is within the rate; one that
    /// is not earns [`rate_limited`].
    pub(super) fn allow(&mut self, now: Instant) -> bool {
        self.rate.allow(now)
    }

    /// Counts `e` if it is the client's fault (a store that is down is
    /// nobody's abuse); `Some(reason)` when the connection must be closed
    /// for abuse (`4008`).
    pub(super) fn abuse(&mut self, e: &WsError, now: Instant) -> Option<String> {
        (e.is_clients_fault() && self.errors.record(now))
            .then(|| format!("too many errors: {MAX_ERRORS} within {ERROR_WINDOW:?}"))
    }
}

/// The error for a message beyond the rate.
pub(super) fn rate_limited() -> WsError {
    WsError::new(
        "rate-limited",
        format!(
            "more than {RATE_BURST} messages in a burst ({RATE_PER_SECOND} per second sustained)"
        ),
    )
}

/// The times of the last `max` errors.
#[derive(Debug)]
struct ErrorWindow {
    times: VecDeque<Instant>,
    max: usize,
    window: Duration,
}

impl ErrorWindow {
    fn new(max: usize, window: Duration) -> Self {
        Self {
            // Grown only by a client that errs; bounded by `max`.
            times: VecDeque::new(),
            max,
            window,
        }
    }

    /// Records an error; true when `max` errors fell within the window.
    fn record(&mut self, now: Instant) -> bool {
        while self
            .times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.window)
        {
            self.times.pop_front();
        }
        if self.times.len() == self.max {
            self.times.pop_front();
        }
        self.times.push_back(now);
        self.times.len() >= self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_count_within_the_window_only() {
        let t0 = Instant::now();
        let mut w = ErrorWindow::new(3, Duration::from_secs(10));
        assert!(!w.record(t0));
        assert!(!w.record(t0 + Duration::from_secs(1)));
        // The first has left the window: two within it.
        assert!(!w.record(t0 + Duration::from_secs(10)));
        // Three within ten seconds.
        assert!(w.record(t0 + Duration::from_millis(10_500)));
    }
}
