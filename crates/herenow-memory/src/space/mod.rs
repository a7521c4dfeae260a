//! One space of the in-memory engine: a synchronous, clock-free data
//! structure. Every method takes `now` from its caller, so the engine is
//! deterministic and can be benchmarked and model-tested without a runtime.
//!
//! # Layout
//!
//! - `entries`: a slab of 48-byte entries (id inline up to 24 bytes, last
//!   seen, sequence number and flags, two list links). Freed slots are
//!   reused.
//! - `index`: a [`SlotIndex`] of slots keyed by (kind, id), one cache
//!   line of index per lookup.
//! - `lists`: one intrusive doubly-linked list per kind, ordered by key =
//!   (last seen, sequence) from newest (head) to oldest (tail).
//!   Heartbeats at the store's clock go to the head in O(1); the oldest are
//!   at the tail, where expiry pops them; top-N is a walk from the head.
//! - `blocks`: for spaces above [`INDEX_ABOVE`] members, a block index of
//!   1024 ms blocks, so window counts and the place of an old timestamp
//!   need no walk from the head.
//!
//! # Events and watermarks
//!
//! `away_mark` and `gone_mark` are keys: every member whose key is at or
//! below `away_mark` has been announced `away`, and at or below `gone_mark`
//! has been announced gone (`leave`). [`Space::tick`] moves them up to
//! `now - online_ms` and `now - away_ms`, walking only the members in
//! between, in bounded steps. A heartbeat compares the member's old and new
//! keys with the marks to decide between `join`, `back` and `update`, so
//! subscribers always see a consistent sequence.
//!
//! # Modules
//!
//! Each file but `entry` adds an `impl Space` block, and they build on each
//! other in one direction (a module uses only those listed before it):
//!
//! - `entry`: the slab entry, the key and the list ends (no behaviour);
//! - `index`: the hash index of slots, and the prefetch hint (no `Space`);
//! - `blocks`: the block index: seeking a key, window counts;
//! - `slab`: allocating, finding and freeing members, linking them into
//!   their lists (and telling the block index);
//! - `walk`: [`NewestFirst`](walk::NewestFirst) and
//!   [`OldestFirst`](walk::OldestFirst), the one merge of the two lists;
//! - `events`: presence by the watermarks, and sending events;
//! - `write`: heartbeats and leaves; `connections`: attach and detach;
//! - `read`: statuses, counts, pages, subscription snapshots, exports;
//! - `background`: `tick` (connection expiry, watermarks, member expiry,
//!   compaction);
//! - `check`: the invariants, for tests.

mod background;
mod blocks;
mod check;
mod connections;
mod entry;
mod events;
mod index;
mod read;
mod slab;
#[cfg(test)]
mod tests;
mod walk;
mod write;

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::broadcast;

use herenow_core::event::Event;
use herenow_core::follow::FollowTap;
use herenow_core::id::SpaceName;
use herenow_core::limits;
use herenow_core::meta::Metadata;
use herenow_core::outbox::OutboxKind;
use herenow_core::policy::SpaceConfig;
use herenow_core::store::Counts;
use herenow_core::time::Millis;

pub use self::background::{Retired, TickWork};
use self::blocks::BlockIndex;
pub use self::blocks::INDEX_ABOVE;
use self::entry::{Entry, Key, List, SEQ_MASK};
use self::index::SlotIndex;
pub use self::read::Recency;
pub(super) use self::read::online_among_in;
use super::conns::ConnTable;
use super::occupancy::Occupancy;
use super::seen::SightingNote;

/// One space's presence: its members in recency order, their
/// connections, and its subscribers. Not synchronised itself:
/// [`MemoryStore`](super::MemoryStore) keeps each behind its own mutex. See
/// the module documentation.
pub struct Space {
    name: SpaceName,
    config: SpaceConfig,
    entries: Vec<Entry>,
    /// Slots of removed members, reused before the slab grows.
    free: Vec<u32>,
    index: SlotIndex,
    hasher: foldhash::fast::RandomState,
    /// By [`herenow_core::id::MemberKind::index`]: users, then guests.
    lists: [List; 2],
    /// `None` at or below [`INDEX_ABOVE`] members.
    blocks: Option<BlockIndex>,
    /// By slot: most members show none, so it is not in the entry.
    meta: hashbrown::HashMap<u32, Metadata, foldhash::fast::RandomState>,
    /// The last sequence number given to a heartbeat.
    seq: u64,
    /// What each heartbeat adds to `seq`: the number of stripes the space
    /// is split over (1 for a whole space). A stripe `k` of `n` starts at
    /// `k`, so the stripes' sequence numbers never meet and keys stay
    /// unique across them (see `stripes.rs`).
    seq_step: u64,
    away_mark: Key,
    gone_mark: Key,
    events: broadcast::Sender<Arc<Event>>,
    conns: ConnTable,
    /// The slab and index a compaction replaced, until the owner takes
    /// them ([`Space::take_retired`]).
    retired: Option<Retired>,
    /// This space's id in the store's [`Seen`](super::seen::Seen) table;
    /// `None` until registered (or when every id is taken).
    seen_id: Option<u32>,
    /// What happened to members that the store's `Seen` table must learn,
    /// drained by the store under this space's lock
    /// ([`Space::take_sightings`]).
    sightings: Vec<SightingNote>,
    /// The store's followed users ([`herenow_core::follow`]): whose status
    /// changes are kept in `followed`; `None` for a space outside a store.
    follow: Option<Arc<FollowTap>>,
    /// Status events of followed users, drained by the store under this
    /// space's lock ([`Space::take_followed`]) *after* `sightings` (why:
    /// `Shared::absorb`). A cell, since events are sent while the sweep
    /// walks the slab.
    followed: RefCell<Vec<Arc<Event>>>,
    /// Members present (announced `join` and not yet `leave`): kept by
    /// the events themselves, so `occupied` / `vacated` agree with them.
    present: Cell<u64>,
    /// The store's webhook outbox is capturing ([`herenow_core::outbox`]);
    /// `None` for a space outside a store.
    outbox: Option<Arc<AtomicBool>>,
    /// What the outbox must learn, drained by the store under this
    /// space's lock ([`Space::take_outboxed`]): a member event, or the
    /// space's own `occupied` / `vacated` (no event).
    outboxed: RefCell<Vec<(OutboxKind, Option<Arc<Event>>)>>,
    /// For a stripe of a striped space: the space's occupancy and this
    /// stripe's number, through which its `occupied` / `vacated` become
    /// the space's (`occupancy.rs`); `None` for a whole space.
    occupancy: Option<(Arc<Occupancy>, usize)>,
}

impl Space {
    /// An empty space with the given policy, created at `now`: its
    /// watermarks start at `now`'s thresholds, so nothing older is ever
    /// announced.
    pub fn new(name: SpaceName, config: SpaceConfig, now: Millis) -> Self {
        Self::new_stripe(name, config, now, 0, 1, None)
    }

    /// Stripe `stripe` of `stripes` of one space: its sequence numbers are
    /// `stripe` modulo `stripes`, and it sends its events on `events` (the
    /// channel of the space's first stripe) when given, so a subscriber
    /// hears every stripe on one receiver.
    pub fn new_stripe(
        name: SpaceName,
        config: SpaceConfig,
        now: Millis,
        stripe: u64,
        stripes: u64,
        events: Option<broadcast::Sender<Arc<Event>>>,
    ) -> Self {
        assert!(stripe < stripes, "stripe {stripe} of {stripes}");
        let events = events.unwrap_or_else(|| broadcast::channel(limits::EVENT_QUEUE).0);
        let mut space = Space {
            name,
            config,
            entries: Vec::new(),
            free: Vec::new(),
            index: SlotIndex::new(),
            hasher: foldhash::fast::RandomState::default(),
            lists: [List::EMPTY; 2],
            blocks: None,
            meta: hashbrown::HashMap::default(),
            seq: stripe,
            seq_step: stripes,
            away_mark: (0, 0),
            gone_mark: (0, 0),
            events,
            conns: ConnTable::default(),
            retired: None,
            seen_id: None,
            sightings: Vec::new(),
            follow: None,
            followed: RefCell::new(Vec::new()),
            present: Cell::new(0),
            outbox: None,
            outboxed: RefCell::new(Vec::new()),
            occupancy: None,
        };
        space.reset_marks(now);
        space
    }

    /// This space's id in the store's `Seen` table.
    pub fn seen_id(&self) -> Option<u32> {
        self.seen_id
    }

    /// Keeps the status changes of the users `tap` follows, for
    /// [`Space::take_followed`].
    pub fn set_follow_tap(&mut self, tap: Arc<FollowTap>) {
        self.follow = Some(tap);
    }

    /// Keeps what the store's outbox must learn while `capturing` is set,
    /// for [`Space::take_outboxed`].
    pub fn set_outbox_flag(&mut self, capturing: Arc<AtomicBool>) {
        self.outbox = Some(capturing);
    }

    /// Makes this space stripe `stripe` of a striped space whose
    /// occupancy is `occupancy`.
    pub(crate) fn set_occupancy(&mut self, occupancy: Arc<Occupancy>, stripe: usize) {
        self.occupancy = Some((occupancy, stripe));
    }

    /// The striped space's occupancy and this stripe's number, if striped.
    pub(crate) fn occupancy(&self) -> Option<(&Occupancy, usize)> {
        self.occupancy.as_ref().map(|(o, k)| (&**o, *k))
    }

    /// Takes the outbox's events since the last call, in the order they
    /// happened.
    pub fn take_outboxed(&mut self) -> Vec<(OutboxKind, Option<Arc<Event>>)> {
        self.outboxed.take()
    }

    /// Whether the store's outbox is capturing.
    fn outboxing(&self) -> bool {
        self.outbox
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// Members present, as the events told.
    pub fn present(&self) -> u64 {
        self.present.get()
    }

    /// Sets the id the store registered this space under.
    pub fn set_seen_id(&mut self, id: Option<u32>) {
        self.seen_id = id;
    }

    /// Takes what happened to members since the last call: joins, ends of
    /// presence and old sightings, for the store's `Seen` table.
    pub fn take_sightings(&mut self) -> Vec<SightingNote> {
        std::mem::take(&mut self.sightings)
    }

    /// Takes the status events of followed users since the last call, in
    /// the order they happened, for the store to hand to its follow tap.
    pub fn take_followed(&mut self) -> Vec<Arc<Event>> {
        self.followed.take()
    }

    /// The name every event of this space carries.
    pub fn name(&self) -> &SpaceName {
        &self.name
    }

    /// The thresholds, window and retention this space answers with.
    pub fn config(&self) -> SpaceConfig {
        self.config
    }

    /// Changes the policy. Watermarks jump to the new thresholds without
    /// emitting events for members whose status the change alone moved.
    pub fn set_config(&mut self, config: SpaceConfig, now: Millis) {
        self.config = config;
        self.reset_marks(now);
        // The marks moved without events: count who is present now.
        let present: u64 = (0..2)
            .map(|k| {
                let mut n = 0;
                let mut s = self.lists[k].head;
                while s != entry::NIL && self.entries[s as usize].key() > self.gone_mark {
                    n += 1;
                    s = self.entries[s as usize].next;
                }
                n
            })
            .sum();
        self.present.set(present);
    }

    fn reset_marks(&mut self, now: Millis) {
        self.away_mark = (now.saturating_sub(self.config.online_ms), SEQ_MASK);
        self.gone_mark = (now.saturating_sub(self.config.away_ms), SEQ_MASK);
    }

    /// Members stored, of both kinds, online or not: everyone not yet past
    /// retention.
    pub fn len(&self) -> usize {
        (self.lists[0].len + self.lists[1].len) as usize
    }

    /// Whether no member is stored (connections and subscribers may still
    /// keep the space alive).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Members stored, by kind, regardless of any window: for metrics and
    /// the list of spaces. [`Space::count`] answers within a window.
    pub fn totals(&self) -> Counts {
        Counts {
            users: self.lists[0].len as u64,
            guests: self.lists[1].len as u64,
        }
    }

    /// The channel this space's events go out on, for its other stripes.
    pub fn events_sender(&self) -> broadcast::Sender<Arc<Event>> {
        self.events.clone()
    }

    /// How many subscribers listen to this space; the store keeps a space
    /// that has any, even with no member.
    pub fn subscribers(&self) -> usize {
        self.events.receiver_count()
    }

    /// Bytes of heap this space holds (an estimate that counts capacity).
    pub fn heap_bytes(&self) -> usize {
        let ids: usize = self
            .entries
            .iter()
            .filter(|e| e.id.is_heap_allocated())
            .map(|e| e.id.capacity())
            .sum();
        let blocks = self.blocks.as_ref().map_or(0, BlockIndex::heap_bytes);
        self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.free.capacity() * 4
            + self.index.heap_bytes()
            + self.meta.capacity() * (4 + std::mem::size_of::<Metadata>() + 1)
            + ids
            + blocks
            + self.conns.heap_bytes()
    }
}
