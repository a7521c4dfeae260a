//! [`Hub`], the server's live WebSocket connections as a whole, and the
//! [`Liveness`] probe of both protocols' sockets.
//!
//! [`crate::state::AppState`] holds one and both protocols use it; it
//! knows neither.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herenow_core::ConnId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

/// The WebSocket side of the server: the connection bound, the tracker
/// every connection task runs under (so shutdown can wait for them),
/// connection ids, and the timing told to clients.
pub struct Hub {
    permits: Arc<Semaphore>,
    max: usize,
    tracker: TaskTracker,
    prefix: String,
    next: AtomicU64,
    ttl: Duration,
    ping: Duration,
    liveness: Liveness,
}

/// How the server finds a socket that stopped answering (a laptop that
/// slept, a network that vanished without a close), the same for both
/// protocols: [`Config::ping_interval`](crate::Config::ping_interval) and
/// [`Config::pong_wait`](crate::Config::pong_wait) say how. Socket timers
/// on real time, as every socket timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Liveness {
    /// Silence after which the socket is pinged.
    pub(crate) ping_interval: Duration,
    /// How long a pinged socket has to send anything.
    pub(crate) pong_wait: Duration,
}

impl Hub {
    /// A hub for at most `max` connections (`--ws-max-connections`),
    /// telling clients `ttl` and `ping` (`--ws-ttl`), probing them by
    /// `liveness`.
    pub(crate) fn new(max: usize, ttl: Duration, ping: Duration, liveness: Liveness) -> Self {
        let max = max.max(1);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            tracker: TaskTracker::new(),
            prefix: conn_prefix(),
            next: AtomicU64::new(1),
            ttl,
            ping,
            liveness,
        }
    }

    /// WebSocket connections open now: permits taken from the bound of
    /// `--ws-max-connections`.
    pub fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// The tracker of connection tasks: closed and waited for at shutdown.
    pub fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    /// A place for one more connection, held until it closes; `None` when
    /// the server holds its maximum already.
    pub(crate) fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }

    /// The presence TTL, and how often clients are asked to ping (`ping_ms`
    /// in `welcome`; not the server's own ping, see [`Hub::liveness`]).
    pub(crate) fn timing(&self) -> (Duration, Duration) {
        (self.ttl, self.ping)
    }

    /// When sockets are pinged and how long they have to answer.
    pub(crate) fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// A connection id unique across servers: this process's random
    /// prefix and a counter.
    pub(crate) fn next_conn(&self) -> ConnId {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // Hex digits, a dash and a decimal number: always a valid id.
        ConnId::new(&format!("{}-{n}", self.prefix))
            .unwrap_or_else(|_| unreachable!("prefix and counter make a valid connection id"))
    }
}

/// 48 random bits as 12 hex digits: servers sharing a Redis store (and a
/// restarted server) never hand out the same connection id.
fn conn_prefix() -> String {
    random_bytes::<6>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `N` random bytes for the ids a process hands out (both protocols'),
/// so that servers sharing a store never hand out the same. Without
/// system randomness (only exotic platforms), the time and the process
/// id, so they at least differ between processes.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = nanos
            .to_le_bytes()
            .into_iter()
            .chain(std::process::id().to_le_bytes());
        for (i, b) in seed.enumerate() {
            bytes[i % N] ^= b;
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_ids_are_valid_and_distinct() {
        let second = Duration::from_secs(1);
        let liveness = Liveness {
            ping_interval: second,
            pong_wait: second,
        };
        let hub = Hub::new(8, second, second, liveness);
        let a = hub.next_conn();
        let b = hub.next_conn();
        assert_ne!(a, b);
        assert!(a.as_str().len() <= herenow_core::limits::MAX_CONN_ID_BYTES);
        assert_eq!(hub.open(), 0);
        let held = hub.admit().expect("room for one");
        assert_eq!(hub.open(), 1);
        drop(held);
        assert_eq!(hub.open(), 0);
    }
}
