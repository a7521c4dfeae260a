//! A connection's clocks: the deadline for `hello`, the idle deadline,
//! and when its joined spaces were last written to the store (the
//! liveness probe is the socket core's, [`crate::socket`]).
//!
//! These are socket timers on real time (tokio's [`Instant`], which tests
//! may pause); presence expiry is the store's and runs on the store's
//! clock.

use std::time::Duration;

use tokio::time::Instant;

use super::limits::{HELLO_TIMEOUT, MAX_STALL, MIN_STORE_PING};
use crate::socket::Liveness;

/// The timing a connection is told (in `welcome`) and held to.
#[derive(Clone, Copy, Debug)]
pub(super) struct Settings {
    /// Silence after which the connection is dropped, here and, should the
    /// server vanish, by the store.
    pub(super) ttl: Duration,
    /// How often the client is asked to ping.
    pub(super) ping: Duration,
    /// When the server pings the socket (a WebSocket Ping frame) and how
    /// long it has to answer.
    pub(super) liveness: Liveness,
}

/// When the connection started, last spoke, and last refreshed its
/// presence in the store.
#[derive(Debug)]
pub(super) struct Timers {
    settings: Settings,
    started: Instant,
    /// The last client message (text or binary): the idle deadline.
    last_message: Instant,
    /// When every joined space was last written by a ping or a keepalive.
    last_write: Option<Instant>,
}

impl Timers {
    /// The clocks of a connection that starts at `now`.
    pub(super) fn new(settings: Settings, now: Instant) -> Self {
        Self {
            settings,
            started: now,
            last_message: now,
            last_write: None,
        }
    }

    /// When a connection that has not said `hello` is closed: after
    /// [`HELLO_TIMEOUT`], or the TTL if that is shorter.
    pub(super) fn hello_deadline(&self) -> Instant {
        self.started + HELLO_TIMEOUT.min(self.settings.ttl)
    }

    /// When the connection is closed for silence: a TTL after its last
    /// message.
    pub(super) fn idle_deadline(&self) -> Instant {
        self.last_message + self.settings.ttl
    }

    /// How long a lagging connection's queue may stay without room:
    /// [`MAX_STALL`], or a third of the TTL if shorter.
    pub(super) fn stall(&self) -> Duration {
        MAX_STALL.min(self.settings.ttl / 3)
    }

    /// A message arrived at `now`: the idle deadline moves.
    pub(super) fn heard(&mut self, now: Instant) {
        self.last_message = now;
    }

    /// When the server pings the socket and how long it has to answer.
    pub(super) fn liveness(&self) -> Liveness {
        self.settings.liveness
    }

    /// Whether a ping at `now` should write the joined spaces: not when
    /// the last write is more recent than a second, or half the ping
    /// interval when that is shorter (a TTL of a second or two must still
    /// be refreshed within it); why: [`Ping`](crate::ws::wire::Ping).
    pub(super) fn ping_write_due(&self, now: Instant) -> bool {
        let gap = MIN_STORE_PING.min(self.settings.ping / 2);
        self.last_write
            .is_none_or(|t| now.saturating_duration_since(t) >= gap)
    }

    /// Whether any other message at `now` should write the joined spaces:
    /// once `ping_ms` has passed since the last write (or the
    /// start), so a socket busy with everything but pings is not expired
    /// by the store.
    pub(super) fn keepalive_due(&self, now: Instant) -> bool {
        let since = self.last_write.unwrap_or(self.started);
        now.saturating_duration_since(since) >= self.settings.ping
    }

    /// The joined spaces were written at `now`.
    pub(super) fn wrote(&mut self, now: Instant) {
        self.last_write = Some(now);
    }

    /// The TTL in ms, as `welcome` tells it and every attach asks of the
    /// store.
    pub(super) fn ttl_ms(&self) -> u64 {
        millis(self.settings.ttl)
    }

    /// How often the client is asked to ping, in ms (`ping_ms` in
    /// `welcome`).
    pub(super) fn ping_ms(&self) -> u64 {
        millis(self.settings.ping)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_moves_the_idle_deadline_and_pings_write_at_most_once_a_second() {
        let s = Duration::from_secs;
        let settings = Settings {
            ttl: s(30),
            ping: s(10),
            liveness: Liveness {
                ping_interval: s(20),
                pong_wait: s(10),
            },
        };
        let t0 = Instant::now();
        let mut timers = Timers::new(settings, t0);
        assert_eq!(timers.idle_deadline(), t0 + s(30));
        assert_eq!(timers.hello_deadline(), t0 + HELLO_TIMEOUT);
        timers.heard(t0 + s(26));
        assert_eq!(timers.idle_deadline(), t0 + s(56));
        assert!(timers.ping_write_due(t0));
        timers.wrote(t0 + s(1));
        assert!(!timers.ping_write_due(t0 + Duration::from_millis(1500)));
        assert!(timers.ping_write_due(t0 + s(2)));
        assert!(!timers.keepalive_due(t0 + s(5)));
        assert!(timers.keepalive_due(t0 + s(11)));
    }
}
