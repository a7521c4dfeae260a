//! [`Channels`]: which of this server's sockets subscribe to which
//! channel, and the fan-out of an event to them.
//!
//! An event that does not fit a socket's queue ([`QUEUE`], plus
//! [`RESERVE`] slots only replies and the close may use) is not queued,
//! and the socket is closed through its [`Ender`] (`4100`), so a client
//! never silently misses an event. Presence member events do not pass
//! here: each channel's feed (`members.rs`) queues them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::mpsc::error::TrySendError;

use super::Ender;
use crate::socket::{Out, queue};

/// Messages one socket's queue holds for events and member events.
pub(crate) const QUEUE: usize = 512;

/// Further slots for replies (`pong`, errors, `subscription_succeeded`)
/// and the close frame.
pub(crate) const RESERVE: usize = 16;

/// A socket as its channels see it.
pub(crate) struct Subscriber {
    /// The socket id, to leave out the sender of an event.
    pub(crate) socket_id: Arc<str>,
    pub(crate) queue: queue::Sender<Out>,
    /// Asked to close the socket when an event did not fit the queue.
    pub(crate) ender: Arc<Ender>,
}

impl Subscriber {
    /// Queues `text` unless only the reserve is left; a message that does
    /// not fit tells the socket it overflowed. True when queued.
    pub(crate) fn offer(&self, text: &Arc<str>) -> bool {
        match self
            .queue
            .try_send_leaving(Out::Text(text.clone()), RESERVE)
        {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.ender.end(4100, "too slow: the send queue is full");
                false
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }
}

/// A channel of one app.
type Key = (Arc<str>, Box<str>);

/// Every channel some local socket subscribes to, by app id and name,
/// with its subscribers by socket number.
#[derive(Default)]
pub struct Channels {
    map: Mutex<HashMap<Key, HashMap<u64, Arc<Subscriber>>>>,
    /// Joins and leaves so far, counted under the map's lock.
    changes: AtomicU64,
}

impl Channels {
    /// Adds socket `number` to `channel` of `app`.
    pub(crate) fn join(&self, app: &Arc<str>, channel: &str, number: u64, sub: Subscriber) {
        let mut map = self.map.lock();
        map.entry((app.clone(), channel.into()))
            .or_default()
            .insert(number, Arc::new(sub));
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    /// Removes socket `number` from `channel` of `app`; a channel left
    /// empty is forgotten.
    pub(crate) fn leave(&self, app: &Arc<str>, channel: &str, number: u64) {
        let mut map = self.map.lock();
        let key = (app.clone(), Box::<str>::from(channel));
        if let Some(subs) = map.get_mut(&key) {
            subs.remove(&number);
            if subs.is_empty() {
                map.remove(&key);
            }
        }
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends `text` to every local subscriber of `channel` of `app` but
    /// the socket `except`; returns how many it was queued for.
    pub(crate) fn publish(
        &self,
        app: &Arc<str>,
        channel: &str,
        text: &Arc<str>,
        except: Option<&str>,
    ) -> usize {
        // Copied out, so the lock is not held while queueing.
        let subs: Vec<Arc<Subscriber>> = {
            let map = self.map.lock();
            match map.get(&(app.clone(), Box::<str>::from(channel))) {
                Some(subs) => subs.values().cloned().collect(),
                None => return 0,
            }
        };
        subs.iter()
            .filter(|s| except != Some(&*s.socket_id))
            .filter(|s| s.offer(text))
            .count()
    }

    /// Joins and leaves so far: a number at least that of every change
    /// made before the call.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// How many local sockets subscribe to `channel` of `app`, and
    /// [`changes`](Self::changes) at that moment: the count reflects every
    /// change up to that number.
    pub(crate) fn count_at(&self, app: &str, channel: &str) -> (usize, u64) {
        let map = self.map.lock();
        let n = map
            .get(&(Arc::from(app), Box::<str>::from(channel)))
            .map_or(0, HashMap::len);
        (n, self.changes.load(Ordering::Relaxed))
    }

    /// How many local sockets subscribe to `channel` of `app`.
    pub fn subscription_count(&self, app: &str, channel: &str) -> usize {
        self.count_at(app, channel).0
    }
}
