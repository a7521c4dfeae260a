//! The bounded send queue of one connection, and what happens when a
//! client does not read fast enough.
//!
//! The queue holds [`SEND_QUEUE`] messages, plus a reserve of a few slots
//! that only replies, `lagged` notices and the close frame may use. The
//! drop policy (a slow reader catches up, it is not cut):
//!
//! - a subscription message (an event or a snapshot page) that does not
//!   fit makes that subscription *lagging*: a `lagged` notice is queued at
//!   once (in the reserve), and the subscription's further messages are
//!   dropped, unqueued and uncounted: the fresh snapshot supersedes them;
//! - the watch lags the same way, as a whole, without a notice;
//! - once the queue is half empty again ([`Room`]), each lagging
//!   subscription restarts with a fresh snapshot marked `resync`, and the
//!   watch sends a fresh picture;
//! - only a reader that stops reading is cut: the session closes the
//!   socket with `4009` when the queue has had no room for the stall
//!   limit since the lag began ([`SendQueue::lagging_since`]), or when a
//!   reply (`ok`, `pong`, `error`) does not fit even in the reserve
//!   ([`Outcome::TooSlow`]).
//!
//! The send queue decides; the session acts on the [`Outcome`] (closing,
//! restarting a subscription), so the policy reads in one place.

use std::collections::HashSet;

use herenow_core::SpaceName;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;

use super::limits::{MAX_SUBSCRIBED, SEND_QUEUE};
use crate::socket::queue::Sender;
use crate::socket::{Inlet, Out};
use crate::ws::wire::ServerMessage;

/// Queue slots kept for `lagged` notices and the close frame, beyond the
/// [`SEND_QUEUE`] messages: a notice is queued when nothing else fits.
const RESERVE: usize = 2 * MAX_SUBSCRIBED;

/// The slots of a connection's queue: [`SEND_QUEUE`] and the reserve.
pub(super) const CAPACITY: usize = SEND_QUEUE + RESERVE;

/// Free slots the queue must have before a lagging subscription restarts:
/// half of it, so the fresh snapshot has room.
const LAG_ROOM: usize = SEND_QUEUE / 2 + RESERVE;

/// What became of a message handed to the [`SendQueue`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// In the queue.
    Queued,
    /// Not queued, and nothing to do about it now: the subscription lags
    /// (a fresh snapshot follows once there is room), or the writer is
    /// gone ([`SendQueue::is_gone`]).
    Dropped,
    /// Only from [`SendQueue::overflowed`]: the `lagged` notice is queued and
    /// there is room for a fresh snapshot at once.
    Restart,
    /// The client does not keep up: close the socket with `4009`, for this
    /// reason.
    TooSlow(&'static str),
}

/// The session's end of the send queue, with the lag bookkeeping.
pub(super) struct SendQueue {
    inlet: Inlet,
    /// Lagging subscriptions: told, waiting for room to start over.
    lagging: HashSet<SpaceName>,
    /// The watch lags: waiting for room to send a fresh picture.
    watch_lagging: bool,
    /// When the first of the current lags began: the stall limit runs
    /// from here.
    lag_since: Option<Instant>,
    /// The writer is gone: the socket failed.
    gone: bool,
}

impl SendQueue {
    /// The policy over a socket's [`Inlet`] of [`CAPACITY`] slots.
    pub(super) fn new(inlet: Inlet) -> SendQueue {
        SendQueue {
            inlet,
            lagging: HashSet::new(),
            watch_lagging: false,
            lag_since: None,
            gone: false,
        }
    }

    /// The writer is gone: nothing queued from now on is sent.
    pub(super) fn mark_gone(&mut self) {
        self.gone = true;
    }

    /// Whether the writer is gone (see `mark_gone`).
    pub(super) fn is_gone(&self) -> bool {
        self.gone
    }

    /// Whether some subscription waits for [`Room`] to start over.
    pub(super) fn is_lagging(&self) -> bool {
        !self.lagging.is_empty() || self.watch_lagging
    }

    /// Queues a reply (`welcome`, `ok`, `pong`, `error`), in the reserve
    /// if need be. A reply is never dropped: one that does not fit even
    /// there means the client stopped reading.
    pub(super) fn push_reply(&mut self, msg: &ServerMessage<'_>) -> Outcome {
        let Some(text) = msg.to_text() else {
            return Outcome::Dropped;
        };
        match self.inlet.try_send(Out::Text(text.into())) {
            Ok(()) => Outcome::Queued,
            Err(TrySendError::Full(_)) => Outcome::TooSlow("too slow: the send queue is full"),
            Err(TrySendError::Closed(_)) => {
                self.gone = true;
                Outcome::Dropped
            }
        }
    }

    /// Queues a message of `sub`'s subscription (an event or a snapshot
    /// page), unless the subscription lags; one that does not fit starts
    /// the lag.
    pub(super) fn push_event(&mut self, sub: &SpaceName, msg: &ServerMessage<'_>) -> Outcome {
        if self.lagging.contains(sub) {
            return Outcome::Dropped;
        }
        self.push_or_lag(msg, |queue| queue.lag(sub, 1))
    }

    /// Queues a message of the watch (a page, a `status`, `unwatched`)
    /// unless the watch lags; one that does not fit starts the lag. No
    /// notice: the fresh picture sent on [`Room`] says `resync`.
    pub(super) fn push_watch(&mut self, msg: &ServerMessage<'_>) -> Outcome {
        if self.watch_lagging {
            return Outcome::Dropped;
        }
        self.push_or_lag(msg, |queue| {
            queue.watch_lagging = true;
            queue.lag_since.get_or_insert_with(Instant::now);
        })
    }

    /// Queues a message that may lag (of a subscription or the watch);
    /// when it does not fit, `lag` starts the lag.
    fn push_or_lag(&mut self, msg: &ServerMessage<'_>, lag: impl FnOnce(&mut Self)) -> Outcome {
        let Some(text) = msg.to_text() else {
            return Outcome::Dropped;
        };
        match self.queue(text) {
            Ok(()) => Outcome::Queued,
            Err(TrySendError::Full(_)) => {
                lag(self);
                Outcome::Dropped
            }
            Err(TrySendError::Closed(_)) => {
                self.gone = true;
                Outcome::Dropped
            }
        }
    }

    /// Whether the watch lagged and must send a fresh picture; the lag
    /// is forgotten (called once there is room).
    pub(super) fn take_watch_lag(&mut self) -> bool {
        let lagged = std::mem::take(&mut self.watch_lagging);
        self.lag_ended();
        lagged
    }

    /// When the current lag began, if the connection lags: the session
    /// cuts a reader whose queue stays without room for the stall limit.
    pub(super) fn lagging_since(&self) -> Option<Instant> {
        self.lag_since
    }

    /// The store's queue for `sub` overflowed: the subscription missed
    /// `missed` events. It lags like one whose message did not fit here,
    /// but may start over at once ([`Outcome::Restart`]) when this queue
    /// has room.
    pub(super) fn overflowed(&mut self, sub: &SpaceName, missed: u64) -> Outcome {
        if self.lagging.contains(sub) {
            // Already told; the fresh snapshot covers these too.
            return Outcome::Dropped;
        }
        self.lag(sub, missed);
        if self.has_room() {
            self.lagging.remove(sub);
            self.lag_ended();
            Outcome::Restart
        } else {
            Outcome::Dropped
        }
    }

    /// A handle that waits for room for the lagging subscriptions to
    /// start over, without borrowing the send queue.
    pub(super) fn room(&self) -> Room {
        Room(self.inlet.sender().clone())
    }

    /// There is room again: the lagging subscriptions, to start over with
    /// fresh snapshots (their notices went out when the lag began).
    pub(super) fn recover(&mut self) -> HashSet<SpaceName> {
        let lagging = std::mem::take(&mut self.lagging);
        self.lag_ended();
        lagging
    }

    /// Forgets `sub`'s lag: the subscription ended, or starts over with a
    /// fresh snapshot that supersedes it.
    pub(super) fn forget(&mut self, sub: &SpaceName) {
        self.lagging.remove(sub);
        self.lag_ended();
    }

    /// Clears the stall clock once nothing lags any more.
    fn lag_ended(&mut self) {
        if !self.is_lagging() {
            self.lag_since = None;
        }
    }

    /// Queues a WebSocket Ping frame (the liveness probe), never in the
    /// reserve. One that does not fit is skipped: a client that stopped
    /// reading could not answer it anyway, and unless it sends something,
    /// the pong wait closes it.
    pub(super) fn ping(&mut self) {
        let queued = self.inlet.sender().try_send_leaving(Out::Ping, RESERVE);
        if let Err(TrySendError::Closed(_)) = queued {
            self.gone = true;
        }
    }

    /// Queues the close ([`Inlet::close`]).
    pub(super) fn close(&mut self, code: u16, reason: String) {
        self.inlet.close(code, reason);
    }

    /// Whether the queue takes another message (beyond the reserve).
    fn has_room(&self) -> bool {
        self.inlet.capacity() > RESERVE
    }

    /// Queues a message unless only the reserve is left.
    fn queue(&mut self, text: String) -> Result<(), TrySendError<Out>> {
        self.inlet
            .sender()
            .try_send_leaving(Out::Text(text.into()), RESERVE)
    }

    /// Marks `sub` lagging and queues its notice, in the reserve if need
    /// be. A notice that does not fit even there is skipped: the fresh
    /// snapshot still follows.
    fn lag(&mut self, sub: &SpaceName, missed: u64) {
        self.lagging.insert(sub.clone());
        self.lag_since.get_or_insert_with(Instant::now);
        let notice = ServerMessage::Lagged { space: sub, missed };
        if let Some(text) = notice.to_text()
            && let Err(TrySendError::Closed(_)) = self.inlet.try_send(Out::Text(text.into()))
        {
            self.gone = true;
        }
    }
}

/// Waits for room for lagging subscriptions to start over; see
/// [`SendQueue::room`].
pub(super) struct Room(Sender<Out>);

impl Room {
    /// Resolves once half the queue is free; false when the writer is gone.
    pub(super) async fn wait(&self) -> bool {
        self.0.room(LAG_ROOM).await
    }
}
