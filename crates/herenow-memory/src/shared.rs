//! What a space's writes hand their results to, under that space's lock:
//! the clock, the journal, the `Seen` table, the follow tap and the
//! webhook outbox.
//!
//! Kept apart from [`MemoryStore`](super::MemoryStore)'s space map so that
//! a write borrows only these while it holds a stripe's lock.

use std::sync::{Arc, OnceLock};

use herenow_core::error::Result;
use herenow_core::follow::{FollowTap, UserChange};
use herenow_core::time::Clock;

use super::outbox::Outbox;
use super::seen::Seen;
use super::space::Space;
use crate::changes::{ChangeLog, ChangeRef, Durable};

/// The store's parts that every write of a space reaches.
pub(super) struct Shared {
    pub(super) clock: Arc<dyn Clock>,
    /// Where changes are journaled, once the server has replayed the
    /// journal (see [`crate::changes`]). A `OnceLock`: the hot path reads
    /// it without a lock.
    pub(super) log: OnceLock<Arc<dyn ChangeLog>>,
    pub(super) seen: Seen,
    /// The users this store's watchers follow ([`herenow_core::follow`]).
    pub(super) follow: Arc<FollowTap>,
    /// The webhook outbox ([`herenow_core::outbox`]), capturing once opened.
    pub(super) outbox: Outbox,
}

impl Shared {
    /// Parts reading time from `clock`, with no journal yet.
    pub(super) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            log: OnceLock::new(),
            seen: Seen::default(),
            follow: Arc::default(),
            outbox: Outbox::default(),
        }
    }

    /// Journals `change` if a log is set, under the lock it was applied
    /// under (the journal's order: [`crate::changes`]).
    pub(super) fn record(&self, change: ChangeRef<'_>) -> Result<Option<Durable>> {
        self.log.get().map_or(Ok(None), |log| log.record(change))
    }

    /// Hands what `space` noted about its members to the `Seen` table,
    /// then its followed users' status changes to the follow tap, then
    /// its events to the outbox (journaled), under the space's lock: a
    /// watcher that reads a user on its change (as `seen_anywhere` does)
    /// finds the table already up to date.
    pub(super) fn absorb(&self, space: &mut Space) {
        let notes = space.take_sightings();
        if let Some(id) = space.seen_id() {
            self.seen.absorb(id, &space.config(), notes);
        }
        self.tell_followers(space);
        self.to_outbox(space);
    }

    /// Moves `space`'s captured events into the outbox and journals them;
    /// a stripe's through its space's occupancy (`occupancy.rs`).
    pub(super) fn to_outbox(&self, space: &mut Space) {
        let captured = space.take_outboxed();
        let add = |events| {
            let now = self.clock.now_ms();
            self.outbox.add(space.name(), events, now, |events| {
                // Lazy, like the change that caused them: an error here is
                // the journal's failure, which that change reported.
                let _ = self.record(ChangeRef::OutboxAdd { events });
            });
        };
        match space.occupancy() {
            Some((occupancy, stripe)) => {
                occupancy.hand_over(stripe, space.present(), captured, add);
            }
            None if captured.is_empty() => {}
            None => add(captured),
        }
    }

    /// Sends `space`'s followed users' status changes to the feed.
    pub(super) fn tell_followers(&self, space: &mut Space) {
        for event in space.take_followed() {
            self.follow.send(UserChange::Presence(event));
        }
    }
}
