//! [`TokenBucket`]: the rate limit on what a client sends, one per socket
//! (herenow's messages, Pusher's client events).

use tokio::time::Instant;

/// A token bucket: `burst` at once, `per_second` sustained.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    tokens: f64,
    burst: f64,
    per_second: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub(crate) fn new(burst: u32, per_second: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            at: now,
        }
    }

    /// Takes a token if there is one.
    pub(crate) fn allow(&mut self, now: Instant) -> bool {
        self.settle(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// From `now` on, `burst` at once and `per_second` sustained (a
    /// reload changed the limit): what was saved up stays, up to the new
    /// burst.
    pub(crate) fn set_rate(&mut self, burst: u32, per_second: u32, now: Instant) {
        // Settled at the old rate up to now.
        self.settle(now);
        self.burst = f64::from(burst);
        self.per_second = f64::from(per_second);
        self.tokens = self.tokens.min(self.burst);
    }

    /// Refills for the time since the last look, up to the burst.
    fn settle(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut r = TokenBucket::new(20, 10, t0);
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
    fn a_new_rate_applies_from_when_it_is_set() {
        let t = Instant::now();
        let mut b = TokenBucket::new(10, 10, t);
        b.set_rate(2, 2, t);
        // The burst is the new rate's.
        assert_eq!((0..5).filter(|_| b.allow(t)).count(), 2);
        b.set_rate(20, 20, t);
        // Nothing saved up; refilled at the new rate.
        assert!(!b.allow(t));
        let later = t + Duration::from_millis(100);
        assert_eq!((0..5).filter(|_| b.allow(later)).count(), 2);
    }
}
