//! The write buffer: heartbeats and leaves that could not reach Redis wait
//! here, coalesced per (space, member), until the background replayer
//! writes them.
//!
//! One entry per member whatever the number of heartbeats, so an outage
//! costs memory in members, not in requests. Its cap on members
//! ([`RedisOptions::buffer_cap`](crate::RedisOptions::buffer_cap)) refuses
//! the newest arrivals, so what is buffered is never rewritten behind a
//! caller's back.
//!
//! The buffer also says whether writes are *held*: from the first failure
//! until the replayer has drained everything and Redis answers again, every
//! write goes through the buffer, so a member's writes reach Redis in the
//! order they were made. Both the "holding" decision and the insert happen
//! under one lock, so a write can never slip past the buffer while the
//! replayer declares it empty.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use herenow_core::{MemberKey, Metadata, Millis, SpaceName};

/// How often, at most, dropped writes are logged (with a count, never one
/// line per write).
const DROP_LOG_EVERY: Duration = Duration::from_secs(10);

/// A heartbeat waiting in the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferedBeat {
    /// The newest time seen for the member.
    pub at: Millis,
    /// The latest metadata that came with a heartbeat, if any.
    pub meta: Option<Metadata>,
}

/// What is waiting for one member: an optional leave, then an optional
/// heartbeat that came after it. Replayed in that order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// A leave, removing the member if its stored time is at or before this
    /// (so a replayed leave never removes a newer heartbeat that reached
    /// Redis directly).
    pub leave: Option<Millis>,
    /// A heartbeat made after the leave (or without one).
    pub beat: Option<BufferedBeat>,
}

impl Pending {
    /// A heartbeat made at `at`; `meta` `None` keeps the member's stored
    /// metadata, as a heartbeat without metadata does.
    pub fn beat(at: Millis, meta: Option<Metadata>) -> Self {
        Pending {
            leave: None,
            beat: Some(BufferedBeat { at, meta }),
        }
    }

    /// A leave made at `at`.
    pub fn leave(at: Millis) -> Self {
        Pending {
            leave: Some(at),
            beat: None,
        }
    }

    /// `self` followed by the later write `newer`: a leave discards the
    /// heartbeats before it, heartbeats keep the newest time and the latest
    /// metadata (a heartbeat older than the one buffered is ignored, as the
    /// heartbeat script ignores it).
    pub fn then(self, newer: Pending) -> Pending {
        match newer.leave {
            Some(l) => {
                // The leave must also cover the discarded heartbeat, in
                // case it reached Redis after all (a timed-out call that
                // the server did run).
                let covered = self.beat.map_or(0, |b| b.at);
                Pending {
                    leave: Some(l.max(self.leave.unwrap_or(0)).max(covered)),
                    beat: newer.beat,
                }
            }
            None => Pending {
                leave: self.leave,
                beat: match (self.beat, newer.beat) {
                    (Some(o), Some(n)) if n.at >= o.at => Some(BufferedBeat {
                        at: n.at,
                        meta: n.meta.or(o.meta),
                    }),
                    (Some(o), _) => Some(o),
                    (None, n) => n,
                },
            },
        }
    }
}

/// Counters of a [`WriteBuffer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferCounts {
    /// Members with writes waiting now: one entry per member, however many
    /// writes it coalesces.
    pub buffered: u64,
    /// Writes refused by the cap since the start.
    pub dropped: u64,
}

struct Inner {
    spaces: HashMap<SpaceName, HashMap<MemberKey, Pending>>,
    /// Members over all spaces.
    len: usize,
    /// Whether writes go through the buffer.
    holding: bool,
    dropped_since_log: u64,
    last_drop_log: Option<Instant>,
}

/// The coalescing, bounded buffer. See the module documentation.
pub struct WriteBuffer {
    inner: Mutex<Inner>,
    cap: usize,
    dropped: AtomicU64,
}

/// The buffer, locked for adding writes. Obtained from
/// [`WriteBuffer::hold`].
pub struct Holding<'a> {
    inner: MutexGuard<'a, Inner>,
    buffer: &'a WriteBuffer,
}

impl WriteBuffer {
    /// An empty buffer holding at most `cap` members.
    pub fn new(cap: usize) -> Self {
        WriteBuffer {
            inner: Mutex::new(Inner {
                spaces: HashMap::new(),
                len: 0,
                holding: false,
                dropped_since_log: 0,
                last_drop_log: None,
            }),
            cap,
            dropped: AtomicU64::new(0),
        }
    }

    /// Locks the buffer for adding writes if it is holding them, or
    /// unconditionally (switching holding on) when `force` is set: a write
    /// that just failed. `None`: write to Redis directly.
    pub fn hold(&self, force: bool) -> Option<Holding<'_>> {
        let mut inner = self.inner.lock();
        if !inner.holding && !force {
            return None;
        }
        inner.holding = true;
        Some(Holding {
            inner,
            buffer: self,
        })
    }

    /// Switches holding on without adding anything: Redis failed a call.
    pub fn start_holding(&self) {
        self.inner.lock().holding = true;
    }

    /// Whether writes go through the buffer.
    pub fn holding(&self) -> bool {
        self.inner.lock().holding
    }

    /// Takes up to `max` members of one space out, for writing. Whoever
    /// takes must [`restore`](Self::restore) what it could not write.
    pub fn take(&self, max: usize) -> Option<(SpaceName, Vec<(MemberKey, Pending)>)> {
        let mut inner = self.inner.lock();
        let space = inner.spaces.keys().next()?.clone();
        let members = inner.spaces.get_mut(&space)?;
        let out: Vec<(MemberKey, Pending)> = if members.len() <= max {
            let all = std::mem::take(members);
            inner.spaces.remove(&space);
            all.into_iter().collect()
        } else {
            let keys: Vec<MemberKey> = members.keys().take(max).cloned().collect();
            keys.into_iter()
                .filter_map(|k| members.remove_entry(&k))
                .collect()
        };
        inner.len -= out.len();
        Some((space, out))
    }

    /// Puts back writes that were taken but not written. They are older
    /// than anything buffered since, so newer entries are applied on top.
    pub fn restore(&self, space: &SpaceName, items: Vec<(MemberKey, Pending)>) {
        let mut h = self.hold(true).expect("a forced hold always holds");
        for (member, older) in items {
            h.insert_with(space, member, older, |newer, older| older.then(newer));
        }
    }

    /// Switches holding off if nothing is left: called by the replayer after
    /// a complete drain, with Redis answering. Returns whether it did.
    pub fn settle(&self) -> bool {
        let mut inner = self.inner.lock();
        let drained = inner.len == 0;
        if drained {
            inner.holding = false;
        }
        drained
    }

    /// Counts `n` writes as dropped without buffering them: writes Redis
    /// refused during replay.
    pub fn add_dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// Members waiting and writes dropped so far.
    pub fn counts(&self) -> BufferCounts {
        BufferCounts {
            buffered: self.inner.lock().len as u64,
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// Whether nothing waits and writes go straight to Redis.
    pub fn is_drained(&self) -> bool {
        let inner = self.inner.lock();
        inner.len == 0 && !inner.holding
    }
}

impl Holding<'_> {
    /// Adds a write made now for `member`. Returns `false` when the cap
    /// refused it (it is then counted as dropped).
    pub fn put(&mut self, space: &SpaceName, member: MemberKey, write: Pending) -> bool {
        self.insert_with(space, member, write, |existing, newer| existing.then(newer))
    }

    /// Inserts `incoming`, combining with an entry already there by
    /// `combine(existing, incoming)`.
    fn insert_with(
        &mut self,
        space: &SpaceName,
        member: MemberKey,
        incoming: Pending,
        combine: impl FnOnce(Pending, Pending) -> Pending,
    ) -> bool {
        let full = self.inner.len >= self.buffer.cap;
        let inner = &mut *self.inner;
        if let Some(existing) = inner.spaces.get_mut(space).and_then(|m| m.get_mut(&member)) {
            let old = std::mem::replace(existing, Pending::leave(0));
            *existing = combine(old, incoming);
            return true;
        }
        if !full {
            let members = inner.spaces.entry(space.clone()).or_default();
            members.insert(member, incoming);
            inner.len += 1;
            return true;
        }
        self.buffer.dropped.fetch_add(1, Ordering::Relaxed);
        inner.dropped_since_log += 1;
        let due = inner
            .last_drop_log
            .is_none_or(|at| at.elapsed() >= DROP_LOG_EVERY);
        if due {
            tracing::warn!(
                dropped = inner.dropped_since_log,
                cap = self.buffer.cap,
                "redis unavailable and the write buffer is full: writes of new members dropped"
            );
            inner.dropped_since_log = 0;
            inner.last_drop_log = Some(Instant::now());
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herenow_core::MemberId;

    fn sp(s: &str) -> SpaceName {
        SpaceName::new(s).unwrap()
    }

    fn user(id: &str) -> MemberKey {
        MemberKey::user(MemberId::new(id).unwrap())
    }

    fn meta(json: &str) -> Option<Metadata> {
        Some(Metadata::from_json(json).unwrap())
    }

    fn drain(b: &WriteBuffer) -> HashMap<(SpaceName, MemberKey), Pending> {
        let mut out = HashMap::new();
        while let Some((space, items)) = b.take(2) {
            assert!(items.len() <= 2, "take is bounded");
            for (m, p) in items {
                assert!(
                    out.insert((space.clone(), m), p).is_none(),
                    "one entry per member"
                );
            }
        }
        out
    }

    #[test]
    fn not_holding_means_write_directly() {
        let b = WriteBuffer::new(10);
        assert!(b.hold(false).is_none());
        assert!(b.is_drained());
        b.hold(true)
            .unwrap()
            .put(&sp("a"), user("x"), Pending::beat(1, None));
        assert!(b.hold(false).is_some(), "holding after a forced write");
        assert!(!b.is_drained());
        assert!(!b.settle(), "not empty yet");
        drain(&b);
        assert!(b.settle());
        assert!(b.is_drained());
        assert!(b.hold(false).is_none());
    }

    #[test]
    fn newest_time_wins_and_latest_metadata() {
        let b = WriteBuffer::new(10);
        let mut h = b.hold(true).unwrap();
        h.put(&sp("a"), user("x"), Pending::beat(10, meta(r#"{"v":1}"#)));
        h.put(&sp("a"), user("x"), Pending::beat(30, None));
        h.put(&sp("a"), user("x"), Pending::beat(20, meta(r#"{"v":2}"#)));
        h.put(&sp("a"), user("x"), Pending::beat(30, meta(r#"{"v":3}"#)));
        h.put(&sp("a"), user("x"), Pending::beat(40, None));
        // The same member in another space is another entry.
        h.put(&sp("b"), user("x"), Pending::beat(5, None));
        drop(h);
        assert_eq!(b.counts().buffered, 2);
        let all = drain(&b);
        assert_eq!(
            all[&(sp("a"), user("x"))],
            Pending::beat(40, meta(r#"{"v":3}"#)),
            "newest time, and the metadata of the newest heartbeat that had some"
        );
        assert_eq!(all[&(sp("b"), user("x"))], Pending::beat(5, None));
    }

    #[test]
    fn a_leave_after_a_heartbeat_wins() {
        let b = WriteBuffer::new(10);
        let mut h = b.hold(true).unwrap();
        h.put(&sp("a"), user("x"), Pending::beat(10, meta("{}")));
        h.put(&sp("a"), user("x"), Pending::leave(15));
        // A heartbeat after the leave is kept, after the leave.
        h.put(&sp("a"), user("y"), Pending::leave(15));
        h.put(&sp("a"), user("y"), Pending::beat(16, None));
        // The leave covers a discarded heartbeat that was newer than it
        // (an explicit time slightly ahead).
        h.put(&sp("a"), user("z"), Pending::beat(99, None));
        h.put(&sp("a"), user("z"), Pending::leave(50));
        drop(h);
        let all = drain(&b);
        assert_eq!(all[&(sp("a"), user("x"))], Pending::leave(15));
        assert_eq!(
            all[&(sp("a"), user("y"))],
            Pending {
                leave: Some(15),
                beat: Some(BufferedBeat { at: 16, meta: None })
            }
        );
        assert_eq!(all[&(sp("a"), user("z"))], Pending::leave(99));
    }

    #[test]
    fn the_cap_drops_new_members_and_counts_them() {
        let b = WriteBuffer::new(3);
        let mut h = b.hold(true).unwrap();
        for (i, id) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            let kept = h.put(&sp("s"), user(id), Pending::beat(i as u64, None));
            assert_eq!(kept, i < 3, "{id}");
        }
        // A member already buffered is still updated at the cap.
        assert!(h.put(&sp("s"), user("a"), Pending::beat(100, None)));
        // A new space is a new member too.
        assert!(!h.put(&sp("t"), user("a"), Pending::beat(1, None)));
        drop(h);
        assert_eq!(
            b.counts(),
            BufferCounts {
                buffered: 3,
                dropped: 3
            }
        );
        let all = drain(&b);
        assert_eq!(all.len(), 3);
        assert_eq!(all[&(sp("s"), user("a"))], Pending::beat(100, None));
        assert!(!all.contains_key(&(sp("s"), user("d"))));
        assert_eq!(b.counts().dropped, 3, "the drop count is a running total");
    }

    #[test]
    fn restored_writes_are_older_than_newer_buffered_ones() {
        let b = WriteBuffer::new(10);
        b.hold(true)
            .unwrap()
            .put(&sp("s"), user("x"), Pending::beat(10, meta(r#"{"v":1}"#)));
        let (space, taken) = b.take(100).unwrap();
        assert!(b.take(100).is_none());
        // While the batch was out, a leave and a newer heartbeat came.
        {
            let mut h = b.hold(false).expect("still holding while a batch is out");
            h.put(&sp("s"), user("x"), Pending::leave(20));
            h.put(&sp("s"), user("y"), Pending::beat(25, None));
        }
        assert!(!b.settle());
        b.restore(&space, taken);
        let all = drain(&b);
        assert_eq!(all[&(sp("s"), user("x"))], Pending::leave(20));
        assert_eq!(all[&(sp("s"), user("y"))], Pending::beat(25, None));
    }
}
