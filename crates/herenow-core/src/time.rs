//! Time: millisecond timestamps and the injected clock.
//!
//! Stores never read the system clock themselves; they ask a [`Clock`]. Tests
//! use [`ManualClock`] and move time by hand, so expiry and status tests are
//! exact and never sleep.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the UNIX epoch.
pub type Millis = u64;

/// A source of "now".
pub trait Clock: Send + Sync + 'static {
    /// The current time, in milliseconds since the UNIX epoch.
    fn now_ms(&self) -> Millis;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock that reads `start_ms`.
    pub fn new(start_ms: Millis) -> Self {
        Self(Arc::new(AtomicU64::new(start_ms)))
    }

    /// Moves the clock forward by `by` (whole milliseconds; the rest is
    /// dropped).
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }

    /// Sets the clock to `ms`; unlike [`advance`](Self::advance) it may
    /// move time backwards.
    pub fn set(&self, ms: Millis) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}
