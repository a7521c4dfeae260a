//! Per-connection guards: a token bucket on incoming messages, and a count
//! of recent errors that ends an abusive connection.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// A token bucket: `burst` messages at once, `per_second` sustained.
#[derive(Debug)]
pub(super) struct RateLimit {
    tokens: f64,
    burst: f64,
    per_second: f64,
    at: Instant,
}

impl RateLimit {
    pub(super) fn new(burst: u32, per_second: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            at: now,
        }
    }

    /// Takes a token if there is one.
    pub(super) fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The times of the last `max` errors.
#[derive(Debug)]
pub(super) struct ErrorWindow {
    times: VecDeque<Instant>,
    max: usize,
    window: Duration,
}

impl ErrorWindow {
    pub(super) fn new(max: usize, window: Duration) -> Self {
        Self {
            times: VecDeque::with_capacity(max),
            max,
            window,
        }
    }

    /// Records an error; true when `max` errors fell within the window.
    pub(super) fn record(&mut self, now: Instant) -> bool {
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
    fn the_bucket_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(20, 10, t0);
        assert!((0..20).all(|_| r.allow(t0)));
        assert!(!r.allow(t0));
        // A tenth of a second brings one token back, no more.
        let t1 = t0 + Duration::from_millis(100);
        assert!(r.allow(t1));
        assert!(!r.allow(t1));
        // A long pause refills to the burst, not beyond.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!((0..30).filter(|_| r.allow(t2)).count(), 20);
    }

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
