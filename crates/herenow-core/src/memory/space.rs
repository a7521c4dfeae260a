//! One space of the in-memory engine: a synchronous, clock-free data
//! structure. Every method takes `now` from its caller, so the engine is
//! deterministic and can be benchmarked and model-tested without a runtime.
//!
//! # Layout
//!
//! - `entries`: a slab of 48-byte [`Entry`]s (id inline up to 24 bytes, last
//!   seen, sequence number and flags, two list links). Freed slots are
//!   reused.
//! - `index`: a `hashbrown::HashTable<u32>` of slots keyed by (kind, id):
//!   five bytes per bucket.
//! - `lists`: one intrusive doubly-linked list per kind, ordered by
//!   [`Key`] = (last seen, sequence) from newest (head) to oldest (tail).
//!   Heartbeats at the store's clock go to the head in O(1); the oldest are
//!   at the tail, where expiry pops them; top-N is a walk from the head.
//! - `blocks`: for spaces above [`INDEX_ABOVE`] members, a [`BlockIndex`] of
//!   1024 ms blocks with per-kind counts, the newest member of each block,
//!   and per-millisecond counts for crowded blocks. It answers window counts
//!   exactly without walking the list, and finds the place of an old
//!   timestamp (backfills, cursors, watermarks) without walking from the
//!   head. Small spaces walk instead, like Redis keeps small sorted sets as
//!   a listpack.
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

use std::collections::{BinaryHeap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

use compact_str::CompactString;
use hashbrown::HashTable;
use tokio::sync::broadcast;

use super::conns::{Conn, ConnTable};
use crate::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use crate::cursor::{IdCursor, RecentCursor};
use crate::error::InvalidInput;
use crate::event::{Event, EventKind, EventReceiver, LeaveReason, Subscription};
use crate::id::{MemberId, MemberKey, MemberKind, SpaceName};
use crate::limits;
use crate::meta::Metadata;
use crate::policy::{SpaceConfig, Status};
use crate::store::{
    Counts, Heartbeat, HeartbeatReport, KindFilter, ListQuery, MemberStatus, Order, Page,
    check_batch, sort_most_recent_first,
};
use crate::time::Millis;

const NIL: u32 = u32::MAX;
const GUEST: u64 = 1 << 63;
const FREE: u64 = 1 << 62;
const SEQ_MASK: u64 = (1 << 62) - 1;

/// The slab is rebuilt (memory handed back) only when at most this many
/// members remain, so the rebuild is as short as one step of expiry. A
/// space that shrinks but stays larger keeps its slab's capacity and reuses
/// the free slots.
const COMPACT_AT_MOST: usize = 2_048;
/// Build the block index above this many members...
pub const INDEX_ABOVE: usize = 512;
/// ...and drop it below this many.
const UNINDEX_BELOW: usize = 128;
/// A block gets per-millisecond counts once it holds this many members.
const CELLS_ABOVE: u32 = 64;
const BLOCK_SHIFT: u32 = 10;
const BLOCK_MS: usize = 1 << BLOCK_SHIFT;

/// The order of members: last seen, then the space's heartbeat sequence.
/// Keys are unique: every heartbeat that moves a member takes a new
/// sequence number.
type Key = (Millis, u64);

/// One member. 48 bytes.
struct Entry {
    id: CompactString,
    ts: Millis,
    /// Sequence number in the low 62 bits; `GUEST` and `FREE` flags above.
    seq_flags: u64,
    /// Newer neighbour in its kind's list.
    prev: u32,
    /// Older neighbour.
    next: u32,
}

impl Entry {
    fn key(&self) -> Key {
        (self.ts, self.seq_flags & SEQ_MASK)
    }
    fn kind(&self) -> MemberKind {
        if self.seq_flags & GUEST != 0 {
            MemberKind::Guest
        } else {
            MemberKind::User
        }
    }
    fn is_free(&self) -> bool {
        self.seq_flags & FREE != 0
    }
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// Per-millisecond member counts of one block, by kind.
type Cells = [[u32; 2]; BLOCK_MS];

struct Block {
    /// The newest member of each kind in this block.
    head: [u32; 2],
    count: [u32; 2],
    cells: Option<Box<Cells>>,
}

impl Block {
    const EMPTY: Block = Block {
        head: [NIL, NIL],
        count: [0, 0],
        cells: None,
    };
    fn total(&self) -> u32 {
        self.count[0] + self.count[1]
    }
}

/// 1024 ms blocks covering the populated time range, oldest first.
struct BlockIndex {
    /// Block number (`ts >> 10`) of `blocks[0]`.
    base: u64,
    blocks: VecDeque<Block>,
}

impl BlockIndex {
    fn get(&self, bn: u64) -> Option<&Block> {
        bn.checked_sub(self.base)
            .and_then(|i| self.blocks.get(i as usize))
    }

    fn get_mut(&mut self, bn: u64) -> Option<&mut Block> {
        bn.checked_sub(self.base)
            .and_then(|i| self.blocks.get_mut(i as usize))
    }

    /// The block numbered `bn`, creating it and any gap before it.
    fn ensure(&mut self, bn: u64) -> &mut Block {
        if self.blocks.is_empty() {
            self.base = bn;
        }
        while bn < self.base {
            self.blocks.push_front(Block::EMPTY);
            self.base -= 1;
        }
        let i = (bn - self.base) as usize;
        while self.blocks.len() <= i {
            self.blocks.push_back(Block::EMPTY);
        }
        &mut self.blocks[i]
    }

    /// Drops empty blocks at both ends.
    fn trim(&mut self) {
        while self.blocks.front().is_some_and(|b| b.total() == 0) {
            self.blocks.pop_front();
            self.base += 1;
        }
        while self.blocks.back().is_some_and(|b| b.total() == 0) {
            self.blocks.pop_back();
        }
    }

    fn last(&self) -> Option<u64> {
        (!self.blocks.is_empty()).then(|| self.base + self.blocks.len() as u64 - 1)
    }
}

fn block_of(ts: Millis) -> u64 {
    ts >> BLOCK_SHIFT
}

fn offset_of(ts: Millis) -> usize {
    (ts as usize) & (BLOCK_MS - 1)
}

/// A member's presence as subscribers know it, from the watermarks.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Presence {
    Gone,
    Away,
    Online,
}

impl Presence {
    fn status(self) -> Status {
        match self {
            Presence::Gone => Status::Offline,
            Presence::Away => Status::Away,
            Presence::Online => Status::Online,
        }
    }
}

/// What [`Space::tick`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickWork {
    /// Members forgotten.
    pub expired: u64,
    /// `away` and timeout `leave` transitions.
    pub transitions: u64,
    /// Connections closed because they stopped pinging.
    pub connections_expired: u64,
    /// Whether work remains (the budget ran out).
    pub more: bool,
}

/// The connection behind an event.
#[derive(Clone, Copy)]
struct Cause<'a> {
    conn: &'a ConnId,
    meta: Option<&'a Metadata>,
    /// The connection just became visible (opened, or stopped hiding).
    opened: bool,
    /// The connection's metadata differs from what it had.
    meta_changed: bool,
}

/// Slots of both lists in key order: descending when `NEWEST`, ascending
/// otherwise. Keys are unique, so the order is total.
struct Merge<'a, const NEWEST: bool> {
    entries: &'a [Entry],
    /// The next slot of each kind's walk; `NIL` when that walk is done.
    at: [u32; 2],
}

/// Newest key first: top-N, pages, snapshots.
type NewestFirst<'a> = Merge<'a, true>;
/// Oldest key first: the watermark sweep and expiry, which must resume
/// exactly where a spent budget stopped them, and exports.
type OldestFirst<'a> = Merge<'a, false>;

impl<'a, const NEWEST: bool> Merge<'a, NEWEST> {
    /// Starts each kind `kinds` admits at `start(kind)` (`NIL`: none of
    /// that kind), and skips the others without asking `start`, which may
    /// have to seek.
    fn new(
        entries: &'a [Entry],
        kinds: KindFilter,
        mut start: impl FnMut(MemberKind) -> u32,
    ) -> Self {
        let mut at = [NIL; 2];
        for kind in MemberKind::ALL {
            if kinds.admits(kind) {
                at[kind.index()] = start(kind);
            }
        }
        Merge { entries, at }
    }
}

impl<const NEWEST: bool> Iterator for Merge<'_, NEWEST> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        let pick = match (self.at[0], self.at[1]) {
            (NIL, NIL) => return None,
            (a, NIL) => a,
            (NIL, b) => b,
            (a, b) => {
                let (ka, kb) = (
                    self.entries[a as usize].key(),
                    self.entries[b as usize].key(),
                );
                if (NEWEST && ka >= kb) || (!NEWEST && ka <= kb) {
                    a
                } else {
                    b
                }
            }
        };
        let e = &self.entries[pick as usize];
        self.at[e.kind().index()] = if NEWEST { e.next } else { e.prev };
        Some(pick)
    }
}

/// One space's presence. See the module documentation.
pub struct Space {
    name: SpaceName,
    config: SpaceConfig,
    entries: Vec<Entry>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    lists: [List; 2],
    blocks: Option<BlockIndex>,
    meta: hashbrown::HashMap<u32, Metadata, foldhash::fast::RandomState>,
    seq: u64,
    away_mark: Key,
    gone_mark: Key,
    events: broadcast::Sender<Arc<Event>>,
    conns: ConnTable,
    /// The slab and index a compaction replaced, kept until the owner
    /// takes them ([`Space::take_retired`]) to free them outside its lock:
    /// freeing a million-slot slab takes milliseconds.
    retired: Option<Retired>,
}

/// Allocations a compaction let go of, to be dropped by the caller.
pub struct Retired {
    _entries: Vec<Entry>,
    _index: HashTable<u32>,
}

/// Which watermark a sweep moves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// `away_mark`, to `now - online_ms`: `away` events.
    Away,
    /// `gone_mark`, to `now - away_ms`: timeout `leave` events.
    Gone,
}

impl Space {
    /// An empty space with the given policy, created at `now`.
    pub fn new(name: SpaceName, config: SpaceConfig, now: Millis) -> Self {
        let (events, _) = broadcast::channel(limits::EVENT_QUEUE);
        let mut space = Space {
            name,
            config,
            entries: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            lists: [List::EMPTY; 2],
            blocks: None,
            meta: hashbrown::HashMap::default(),
            seq: 0,
            away_mark: (0, 0),
            gone_mark: (0, 0),
            events,
            conns: ConnTable::default(),
            retired: None,
        };
        space.reset_marks(now);
        space
    }

    /// The space's name.
    pub fn name(&self) -> &SpaceName {
        &self.name
    }

    /// The space's policy.
    pub fn config(&self) -> SpaceConfig {
        self.config
    }

    /// Changes the policy. Watermarks jump to the new thresholds without
    /// emitting events for members whose status the change alone moved.
    pub fn set_config(&mut self, config: SpaceConfig, now: Millis) {
        self.config = config;
        self.reset_marks(now);
    }

    fn reset_marks(&mut self, now: Millis) {
        self.away_mark = (now.saturating_sub(self.config.online_ms), SEQ_MASK);
        self.gone_mark = (now.saturating_sub(self.config.away_ms), SEQ_MASK);
    }

    /// Members stored, of both kinds.
    pub fn len(&self) -> usize {
        (self.lists[0].len + self.lists[1].len) as usize
    }

    /// Whether no member is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Members stored, by kind.
    pub fn totals(&self) -> Counts {
        Counts {
            users: self.lists[0].len as u64,
            guests: self.lists[1].len as u64,
        }
    }

    /// How many subscribers listen to this space.
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
        let blocks = self.blocks.as_ref().map_or(0, |b| {
            b.blocks.capacity() * std::mem::size_of::<Block>()
                + b.blocks.iter().filter(|b| b.cells.is_some()).count()
                    * std::mem::size_of::<Cells>()
        });
        self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.free.capacity() * 4
            + self.index.capacity() * 5
            + self.meta.capacity() * (4 + std::mem::size_of::<Metadata>() + 1)
            + ids
            + blocks
            + self.conns.heap_bytes()
    }

    /// The members `kinds` admits, newest first from the heads.
    fn newest_first(&self, kinds: KindFilter) -> NewestFirst<'_> {
        NewestFirst::new(&self.entries, kinds, |kind| self.lists[kind.index()].head)
    }

    /// Every member, oldest first from the tails.
    fn oldest_first(&self) -> OldestFirst<'_> {
        OldestFirst::new(&self.entries, KindFilter::All, |kind| {
            self.lists[kind.index()].tail
        })
    }

    // ----- look-up -------------------------------------------------------

    fn hash(&self, kind: MemberKind, id: &str) -> u64 {
        self.hasher.hash_one((kind as u8, id))
    }

    fn find(&self, kind: MemberKind, id: &str) -> Option<u32> {
        let hash = self.hash(kind, id);
        let entries = &self.entries;
        self.index
            .find(hash, |&s| {
                let e = &entries[s as usize];
                e.kind() == kind && e.id == id
            })
            .copied()
    }

    fn presence(&self, key: Key) -> Presence {
        if key <= self.gone_mark {
            Presence::Gone
        } else if key <= self.away_mark {
            Presence::Away
        } else {
            Presence::Online
        }
    }

    fn member_status(&self, slot: u32, now: Millis) -> MemberStatus {
        let e = &self.entries[slot as usize];
        MemberStatus {
            member: MemberKey {
                kind: e.kind(),
                id: MemberId::from_compact_unchecked(e.id.clone()),
            },
            status: self.config.status(Some(e.ts), now),
            last_seen_ms: Some(e.ts),
            meta: self.meta.get(&slot).cloned(),
        }
    }

    // ----- the ordered lists ---------------------------------------------

    /// The newest member of `kind` whose key is at or below `key`.
    fn seek_le(&self, kind: MemberKind, key: Key) -> u32 {
        let k = kind.index();
        let mut s = self.lists[k].head;
        if let Some(bi) = &self.blocks {
            let bn = block_of(key.0);
            match bi.last() {
                Some(last) if bn < last => {
                    if bn < bi.base {
                        return NIL;
                    }
                    // The nearest block at or before `bn` holding this kind.
                    let mut i = (bn - bi.base) as usize;
                    loop {
                        let h = bi.blocks[i].head[k];
                        if h != NIL {
                            s = h;
                            break;
                        }
                        if i == 0 {
                            return NIL;
                        }
                        i -= 1;
                    }
                }
                _ => {}
            }
        }
        while s != NIL && self.entries[s as usize].key() > key {
            s = self.entries[s as usize].next;
        }
        s
    }

    /// Links a detached entry into its kind's list at its key's place.
    fn link(&mut self, slot: u32) {
        let (kind, key) = {
            let e = &self.entries[slot as usize];
            (e.kind(), e.key())
        };
        let k = kind.index();
        let head = self.lists[k].head;
        // Heartbeats at the store's clock are the newest: the head, O(1).
        let next = if head == NIL || self.entries[head as usize].key() <= key {
            head
        } else {
            self.seek_le(kind, key)
        };
        let prev = if next == NIL {
            self.lists[k].tail
        } else {
            self.entries[next as usize].prev
        };
        {
            let e = &mut self.entries[slot as usize];
            e.prev = prev;
            e.next = next;
        }
        if prev == NIL {
            self.lists[k].head = slot;
        } else {
            self.entries[prev as usize].next = slot;
        }
        if next == NIL {
            self.lists[k].tail = slot;
        } else {
            self.entries[next as usize].prev = slot;
        }
        self.lists[k].len += 1;
        if let Some(bi) = &mut self.blocks {
            let bn = block_of(key.0);
            let prev_in_block = prev != NIL && block_of(self.entries[prev as usize].ts) == bn;
            let block = bi.ensure(bn);
            if !prev_in_block {
                block.head[k] = slot;
            }
            block.count[k] += 1;
            if let Some(cells) = &mut block.cells {
                cells[offset_of(key.0)][k] += 1;
            } else if block.total() > CELLS_ABOVE {
                self.fill_cells(bn);
            }
        } else if self.len() > INDEX_ABOVE {
            self.build_index();
        }
    }

    /// Detaches an entry from its kind's list.
    fn unlink(&mut self, slot: u32) {
        let (kind, ts, prev, next) = {
            let e = &self.entries[slot as usize];
            (e.kind(), e.ts, e.prev, e.next)
        };
        let k = kind.index();
        if prev == NIL {
            self.lists[k].head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[k].tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        self.lists[k].len -= 1;
        if let Some(bi) = &mut self.blocks {
            let bn = block_of(ts);
            let next_in_block = next != NIL && block_of(self.entries[next as usize].ts) == bn;
            if let Some(block) = bi.get_mut(bn) {
                if block.head[k] == slot {
                    block.head[k] = if next_in_block { next } else { NIL };
                }
                block.count[k] -= 1;
                if let Some(cells) = &mut block.cells {
                    cells[offset_of(ts)][k] -= 1;
                }
                if block.total() == 0 {
                    block.cells = None;
                    bi.trim();
                }
            }
            if self.len() < UNINDEX_BELOW {
                self.blocks = None;
            }
        }
    }

    fn build_index(&mut self) {
        let mut bi = BlockIndex {
            base: 0,
            blocks: VecDeque::new(),
        };
        for kind in MemberKind::ALL {
            let k = kind.index();
            let mut s = self.lists[k].head;
            let mut last_bn = None;
            while s != NIL {
                let e = &self.entries[s as usize];
                let bn = block_of(e.ts);
                let block = bi.ensure(bn);
                if last_bn != Some(bn) {
                    block.head[k] = s;
                    last_bn = Some(bn);
                }
                block.count[k] += 1;
                s = e.next;
            }
        }
        self.blocks = Some(bi);
        let crowded: Vec<u64> = {
            let bi = self.blocks.as_ref().expect("just built");
            (0..bi.blocks.len())
                .filter(|&i| bi.blocks[i].total() > CELLS_ABOVE)
                .map(|i| bi.base + i as u64)
                .collect()
        };
        for bn in crowded {
            self.fill_cells(bn);
        }
    }

    /// Gives block `bn` per-millisecond counts, from its members.
    fn fill_cells(&mut self, bn: u64) {
        let mut cells: Box<Cells> = Box::new([[0; 2]; BLOCK_MS]);
        let Some(bi) = &self.blocks else { return };
        let Some(block) = bi.get(bn) else { return };
        for k in 0..2 {
            let mut s = block.head[k];
            while s != NIL {
                let e = &self.entries[s as usize];
                if block_of(e.ts) != bn {
                    break;
                }
                cells[offset_of(e.ts)][k] += 1;
                s = e.next;
            }
        }
        if let Some(block) = self.blocks.as_mut().and_then(|bi| bi.get_mut(bn)) {
            block.cells = Some(cells);
        }
    }

    /// Members with last seen at or after `cutoff`, by kind.
    fn count_since(&self, cutoff: Millis) -> [u64; 2] {
        let mut out = [0u64; 2];
        let Some(bi) = &self.blocks else {
            for (k, n) in out.iter_mut().enumerate() {
                let mut s = self.lists[k].head;
                while s != NIL && self.entries[s as usize].ts >= cutoff {
                    *n += 1;
                    s = self.entries[s as usize].next;
                }
            }
            return out;
        };
        let Some(last) = bi.last() else { return out };
        let bn = block_of(cutoff);
        if bn < bi.base {
            return [self.lists[0].len as u64, self.lists[1].len as u64];
        }
        if bn > last {
            return out;
        }
        let i = (bn - bi.base) as usize;
        // Sum whichever side of the cutoff block has fewer blocks.
        if bi.blocks.len() - 1 - i <= i {
            for b in bi.blocks.range(i + 1..) {
                out[0] += b.count[0] as u64;
                out[1] += b.count[1] as u64;
            }
        } else {
            out = [self.lists[0].len as u64, self.lists[1].len as u64];
            for b in bi.blocks.range(..=i) {
                out[0] -= b.count[0] as u64;
                out[1] -= b.count[1] as u64;
            }
        }
        let block = &bi.blocks[i];
        match &block.cells {
            Some(cells) => {
                for c in &cells[offset_of(cutoff)..] {
                    out[0] += c[0] as u64;
                    out[1] += c[1] as u64;
                }
            }
            None => {
                for (k, n) in out.iter_mut().enumerate() {
                    let mut s = block.head[k];
                    while s != NIL {
                        let e = &self.entries[s as usize];
                        if e.ts < cutoff || block_of(e.ts) != bn {
                            break;
                        }
                        *n += 1;
                        s = e.next;
                    }
                }
            }
        }
        out
    }

    // ----- writes ----------------------------------------------------------

    fn alloc(&mut self, kind: MemberKind, id: CompactString, ts: Millis, seq: u64) -> u32 {
        let seq_flags = seq | if kind == MemberKind::Guest { GUEST } else { 0 };
        let entry = Entry {
            id,
            ts,
            seq_flags,
            prev: NIL,
            next: NIL,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.entries[s as usize] = entry;
                s
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        let hash = {
            let e = &self.entries[slot as usize];
            self.hash(kind, &e.id)
        };
        let entries = &self.entries;
        let hasher = &self.hasher;
        self.index.insert_unique(hash, slot, |&s| {
            let e = &entries[s as usize];
            hasher.hash_one((e.kind() as u8, e.id.as_str()))
        });
        slot
    }

    /// Unlinks and frees a member.
    fn remove(&mut self, slot: u32) -> Option<Metadata> {
        self.unlink(slot);
        let (kind, hash) = {
            let e = &self.entries[slot as usize];
            (e.kind(), self.hash(e.kind(), &e.id))
        };
        if let Ok(found) = self.index.find_entry(hash, |&s| s == slot) {
            found.remove();
        }
        let e = &mut self.entries[slot as usize];
        e.id = CompactString::default();
        e.seq_flags = FREE | if kind == MemberKind::Guest { GUEST } else { 0 };
        self.free.push(slot);
        self.meta.remove(&slot)
    }

    fn emit(
        &self,
        kind: EventKind,
        slot: u32,
        status: Status,
        last_seen: Option<Millis>,
        reason: Option<LeaveReason>,
    ) {
        self.emit_caused(kind, slot, status, last_seen, reason, None);
    }

    /// [`Space::emit`], for an event a connection caused: it names the
    /// connection and carries the connection's metadata.
    fn emit_caused(
        &self,
        kind: EventKind,
        slot: u32,
        status: Status,
        last_seen: Option<Millis>,
        reason: Option<LeaveReason>,
        cause: Option<Cause<'_>>,
    ) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let e = &self.entries[slot as usize];
        let event = Event {
            space: self.name.clone(),
            kind,
            member: MemberKey {
                kind: e.kind(),
                id: MemberId::from_compact_unchecked(e.id.clone()),
            },
            status,
            last_seen_ms: last_seen,
            meta: match cause {
                Some(c) => c.meta.cloned(),
                None => self.meta.get(&slot).cloned(),
            },
            reason,
            conn: cause.map(|c| c.conn.clone()),
        };
        // An error only means nobody listens any more.
        let _ = self.events.send(Arc::new(event));
    }

    /// Applies a batch of heartbeats. The whole batch is checked before any
    /// of it is applied, so a bad item leaves the space untouched.
    pub fn heartbeat(
        &mut self,
        beats: &[Heartbeat],
        now: Millis,
    ) -> Result<HeartbeatReport, InvalidInput> {
        check_batch(beats.len())?;
        let latest = now + limits::MAX_FUTURE_SKEW_MS;
        if let Some(at_ms) = beats.iter().filter_map(|b| b.at_ms).find(|&at| at > latest) {
            return Err(InvalidInput::AtInFuture { at_ms });
        }
        let mut report = HeartbeatReport::default();
        for beat in beats {
            let at = beat.at_ms.unwrap_or(now);
            self.apply(
                beat.member.kind,
                &beat.member.id,
                at,
                beat.meta.as_ref(),
                now,
                &mut report,
                None,
            );
        }
        Ok(report)
    }

    /// Applies one heartbeat "now" without metadata: the hot path, with no
    /// batch checks and no copy of the id for a known member. Returns
    /// whether the member joined.
    pub fn touch(&mut self, kind: MemberKind, id: &MemberId, now: Millis) -> bool {
        let mut report = HeartbeatReport::default();
        self.apply(kind, id, now, None, now, &mut report, None);
        report.joined == 1
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        kind: MemberKind,
        member: &MemberId,
        at: Millis,
        meta: Option<&Metadata>,
        now: Millis,
        report: &mut HeartbeatReport,
        cause: Option<Cause<'_>>,
    ) {
        if now.saturating_sub(at) >= self.config.retention_ms {
            report.stale += 1;
            return;
        }
        let found = self.find(kind, member.as_str());
        let (slot, old) = match found {
            Some(slot) => {
                let e = &self.entries[slot as usize];
                if at < e.ts {
                    report.stale += 1;
                    return;
                }
                (slot, Some(e.key()))
            }
            None => {
                self.seq += 1;
                let slot = self.alloc(kind, member.clone().into_compact(), at, self.seq);
                (slot, None)
            }
        };
        report.accepted += 1;
        let old_presence = old.map_or(Presence::Gone, |k| self.presence(k));
        let meta_changed = match meta {
            Some(m) => {
                let changed = self.meta.get(&slot) != Some(m);
                if changed {
                    self.meta.insert(slot, m.clone());
                }
                changed
            }
            None => false,
        };
        let new_key = match old {
            None => {
                self.link(slot);
                self.entries[slot as usize].key()
            }
            Some(old_key) if old_key.0 == at => old_key,
            Some(_) => {
                self.unlink(slot);
                self.seq += 1;
                let e = &mut self.entries[slot as usize];
                e.ts = at;
                e.seq_flags = (e.seq_flags & !SEQ_MASK) | self.seq;
                self.link(slot);
                self.entries[slot as usize].key()
            }
        };
        let new_presence = self.presence(new_key);
        let event = match (old_presence, new_presence) {
            (_, Presence::Gone) => None,
            (Presence::Gone, _) => {
                report.joined += 1;
                Some(EventKind::Join)
            }
            (Presence::Away, Presence::Online) => Some(EventKind::Back),
            _ if cause.is_some_and(|c| c.opened) => Some(EventKind::Connect),
            // A connection's metadata is its own: compared with what that
            // connection had, not with what the member shows.
            _ if cause.map_or(meta_changed, |c| c.meta_changed) => Some(EventKind::Update),
            _ => None,
        };
        if let Some(kind) = event {
            self.emit_caused(
                kind,
                slot,
                new_presence.status(),
                Some(new_key.0),
                None,
                cause,
            );
        }
    }

    /// Members say goodbye. Returns how many were present.
    pub fn leave(&mut self, members: &[MemberKey]) -> Result<u64, InvalidInput> {
        check_batch(members.len())?;
        let mut present = 0;
        for m in members {
            let Some(slot) = self.find(m.kind, m.id.as_str()) else {
                continue;
            };
            let key = self.entries[slot as usize].key();
            if self.presence(key) != Presence::Gone {
                present += 1;
                self.emit(
                    EventKind::Leave,
                    slot,
                    Status::Offline,
                    Some(key.0),
                    Some(LeaveReason::Explicit),
                );
            }
            self.remove(slot);
        }
        Ok(present)
    }

    // ----- connections ---------------------------------------------------------

    /// Opens, refreshes or changes a connection (see [`crate::conn`] for the
    /// rules). Checks everything before changing anything.
    pub fn attach(&mut self, a: &Attach, now: Millis) -> Result<AttachReport, InvalidInput> {
        a.check()?;
        let prev = self.conns.get(&a.conn);
        match prev {
            Some(p) if p.member != a.member => return Err(InvalidInput::ConnIdTaken),
            None if self.conns.count(&a.member) >= limits::MAX_CONNS_PER_MEMBER => {
                return Err(InvalidInput::TooManyConnections);
            }
            _ => {}
        }
        let was_visible = prev.is_some_and(|p| !p.invisible);
        let meta_changed = prev.is_some_and(|p| p.meta != a.meta);
        let others = self.conns.visible_others(&a.member, &a.conn);
        let prev = self.conns.upsert(
            &a.conn,
            Conn {
                member: a.member.clone(),
                meta: a.meta.clone(),
                invisible: a.invisible,
                expires: now.saturating_add(a.ttl_ms),
            },
        );
        let mut report = AttachReport {
            opened: prev.is_none(),
            ..AttachReport::default()
        };
        let cause = Cause {
            conn: &a.conn,
            meta: a.meta.as_ref(),
            opened: !was_visible,
            meta_changed,
        };
        if !a.invisible {
            let mut beat = HeartbeatReport::default();
            // The member shows the metadata of the connection that last
            // changed it.
            let meta = if meta_changed || !was_visible {
                a.meta.as_ref()
            } else {
                None
            };
            self.apply(
                a.member.kind,
                &a.member.id,
                now,
                meta,
                now,
                &mut beat,
                Some(cause),
            );
            report.joined = beat.joined == 1;
        } else if was_visible {
            report.left = self.conn_gone(&a.member, others, LeaveReason::Explicit, cause);
        }
        Ok(report)
    }

    /// Closes a connection of `member`. A connection id that is unknown or
    /// belongs to someone else is not found.
    pub fn detach(&mut self, member: &MemberKey, conn: &ConnId) -> DetachReport {
        if self.conns.get(conn).is_none_or(|c| c.member != *member) {
            return DetachReport::default();
        }
        let left = self.drop_conn(conn, LeaveReason::Explicit);
        DetachReport { found: true, left }
    }

    /// Removes a connection and announces it; returns whether its member
    /// left.
    fn drop_conn(&mut self, conn: &ConnId, reason: LeaveReason) -> bool {
        let Some(c) = self.conns.remove(conn) else {
            return false;
        };
        if c.invisible {
            return false;
        }
        let others = self.conns.visible_others(&c.member, conn);
        let cause = Cause {
            conn,
            meta: c.meta.as_ref(),
            opened: false,
            meta_changed: false,
        };
        self.conn_gone(&c.member, others, reason, cause)
    }

    /// A visible connection of `member` went away (closed, expired or
    /// turned invisible) and `others` visible ones remain: `disconnect`, or
    /// `leave` if it was the last. Returns whether the member left.
    fn conn_gone(
        &mut self,
        member: &MemberKey,
        others: usize,
        reason: LeaveReason,
        cause: Cause<'_>,
    ) -> bool {
        let Some(slot) = self.find(member.kind, member.id.as_str()) else {
            return false;
        };
        let key = self.entries[slot as usize].key();
        let presence = self.presence(key);
        if presence == Presence::Gone {
            return false;
        }
        if others > 0 {
            self.emit_caused(
                EventKind::Disconnect,
                slot,
                presence.status(),
                Some(key.0),
                None,
                Some(cause),
            );
            return false;
        }
        self.emit_caused(
            EventKind::Leave,
            slot,
            Status::Offline,
            Some(key.0),
            Some(reason),
            Some(cause),
        );
        self.remove(slot);
        true
    }

    /// Each member's live connections, by id, in the order asked.
    pub fn connections(&self, members: &[MemberKey]) -> Result<Vec<Vec<Connection>>, InvalidInput> {
        check_batch(members.len())?;
        Ok(members.iter().map(|m| self.conns.of(m)).collect())
    }

    /// Live connections in the space.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    // ----- reads -----------------------------------------------------------

    /// Last seen and status of each member, in the order given.
    pub fn status(
        &self,
        members: &[MemberKey],
        now: Millis,
    ) -> Result<Vec<MemberStatus>, InvalidInput> {
        check_batch(members.len())?;
        Ok(members
            .iter()
            .map(|m| match self.find(m.kind, m.id.as_str()) {
                Some(slot) => self.member_status(slot, now),
                None => MemberStatus {
                    member: m.clone(),
                    status: Status::Offline,
                    last_seen_ms: None,
                    meta: None,
                },
            })
            .collect())
    }

    /// Members seen within the window, by kind.
    pub fn count(&self, window_ms: Option<Millis>, now: Millis) -> Result<Counts, InvalidInput> {
        let window = self
            .config
            .check_window(window_ms.unwrap_or(self.config.window_ms))?;
        let [users, guests] = self.count_since(now.saturating_sub(window));
        Ok(Counts { users, guests })
    }

    /// Of `members`, those seen within the window, most recent first.
    pub fn online_among(
        &self,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
        now: Millis,
    ) -> Result<Vec<MemberStatus>, InvalidInput> {
        let window = self
            .config
            .check_window(window_ms.unwrap_or(self.config.window_ms))?;
        let cutoff = now.saturating_sub(window);
        let mut slots: Vec<u32> = members
            .iter()
            .filter_map(|m| self.find(m.kind, m.id.as_str()))
            .filter(|&s| self.entries[s as usize].ts >= cutoff)
            .collect();
        slots.sort_unstable();
        slots.dedup();
        let mut out: Vec<MemberStatus> = slots
            .into_iter()
            .map(|s| self.member_status(s, now))
            .collect();
        sort_most_recent_first(&mut out);
        out.truncate(limit);
        Ok(out)
    }

    /// One page of the members seen within the window.
    pub fn list(&self, query: &ListQuery, now: Millis) -> Result<Page, InvalidInput> {
        query.check_limit()?;
        let window = self
            .config
            .check_window(query.window_ms.unwrap_or(self.config.window_ms))?;
        let cutoff = now.saturating_sub(window);
        match query.order {
            Order::Recent => self.list_recent(query, cutoff, now),
            Order::Id => self.list_by_id(query, cutoff, now),
        }
    }

    fn list_recent(
        &self,
        q: &ListQuery,
        cutoff: Millis,
        now: Millis,
    ) -> Result<Page, InvalidInput> {
        // Cursor: the key of the last member returned, and its slot as a
        // hint: if that member has not moved, the next page starts right
        // after it without a search.
        let after = match &q.cursor {
            None => None,
            Some(c) => Some(RecentCursor::decode(c).ok_or(InvalidInput::BadCursor)?),
        };
        let after = after.map(|c| {
            let key: Key = (c.at_ms, c.tiebreak);
            (key, self.find(c.member.kind, c.member.id.as_str()))
        });
        let walk = NewestFirst::new(&self.entries, q.kinds, |kind| match after {
            None => self.lists[kind.index()].head,
            Some((key, slot)) => {
                let hint = slot.map(|s| &self.entries[s as usize]);
                match hint {
                    Some(e) if e.kind() == kind && e.key() == key => e.next,
                    _ => {
                        let mut s = self.seek_le(kind, key);
                        while s != NIL && self.entries[s as usize].key() >= key {
                            s = self.entries[s as usize].next;
                        }
                        s
                    }
                }
            }
        });
        let mut members = Vec::with_capacity(q.limit.min(64));
        let mut last = None;
        for slot in walk {
            let e = &self.entries[slot as usize];
            if e.ts < cutoff {
                break;
            }
            if members.len() == q.limit {
                let (slot, key): (u32, Key) = last.expect("limit is at least 1");
                let e = &self.entries[slot as usize];
                let cursor = RecentCursor {
                    at_ms: key.0,
                    tiebreak: key.1,
                    member: MemberKey {
                        kind: e.kind(),
                        id: MemberId::from_compact_unchecked(e.id.clone()),
                    },
                };
                return Ok(Page {
                    members,
                    next_cursor: Some(cursor.encode()),
                });
            }
            members.push(self.member_status(slot, now));
            last = Some((slot, e.key()));
        }
        Ok(Page {
            members,
            next_cursor: None,
        })
    }

    fn list_by_id(&self, q: &ListQuery, cutoff: Millis, now: Millis) -> Result<Page, InvalidInput> {
        let after = match &q.cursor {
            None => None,
            Some(c) => {
                let c = IdCursor::decode(c).ok_or(InvalidInput::BadCursor)?;
                Some((c.member.id, c.member.kind))
            }
        };
        // The `limit + 1` smallest (id, kind) after the cursor: a bounded
        // max-heap over one pass of the slab.
        let mut heap: BinaryHeap<(&str, MemberKind, u32)> = BinaryHeap::with_capacity(q.limit + 1);
        for (slot, e) in self.entries.iter().enumerate() {
            if e.is_free() || e.ts < cutoff || !q.kinds.admits(e.kind()) {
                continue;
            }
            let item = (e.id.as_str(), e.kind(), slot as u32);
            if let Some((id, kind)) = &after
                && (item.0, item.1) <= (id.as_str(), *kind)
            {
                continue;
            }
            if heap.len() <= q.limit {
                heap.push(item);
            } else if heap.peek().is_some_and(|top| item < *top) {
                heap.pop();
                heap.push(item);
            }
        }
        let mut items = heap.into_sorted_vec();
        let more = items.len() > q.limit;
        items.truncate(q.limit);
        let next_cursor = if more {
            items.last().map(|(id, kind, _)| {
                IdCursor {
                    member: MemberKey {
                        kind: *kind,
                        id: MemberId::from_compact_unchecked(CompactString::from(*id)),
                    },
                }
                .encode()
            })
        } else {
            None
        };
        let members = items
            .into_iter()
            .map(|(_, _, s)| self.member_status(s, now))
            .collect();
        Ok(Page {
            members,
            next_cursor,
        })
    }

    /// A snapshot of the members present (by the watermarks), most recent
    /// first, and a receiver for every event after it. The caller holds the
    /// space's lock, so no event can fall between the two.
    pub fn subscribe(&self, now: Millis) -> Subscription {
        let events = EventReceiver::new(self.events.subscribe());
        let mut snapshot = Vec::new();
        let mut omitted = 0u64;
        for slot in self.newest_first(KindFilter::All) {
            let presence = self.presence(self.entries[slot as usize].key());
            if presence == Presence::Gone {
                break;
            }
            if snapshot.len() == limits::MAX_SNAPSHOT {
                let [u, g] = self.count_since(self.gone_mark.0.saturating_add(1));
                omitted = (u + g).saturating_sub(snapshot.len() as u64);
                break;
            }
            let mut status = self.member_status(slot, now);
            status.status = presence.status();
            snapshot.push(status);
        }
        Subscription {
            snapshot,
            snapshot_omitted: omitted,
            events,
        }
    }

    // ----- background work ---------------------------------------------------

    /// Closes silent connections, moves the watermarks toward `now` and
    /// forgets members past their retention, doing at most `budget`
    /// members' (or connections') worth of work.
    pub fn tick(&mut self, now: Millis, budget: usize) -> TickWork {
        let mut work = TickWork::default();
        let mut budget = budget;
        self.expire_conns(now, &mut budget, &mut work);
        if work.more {
            return work;
        }
        self.advance_mark(Mark::Away, now, &mut budget, &mut work);
        self.advance_mark(Mark::Gone, now, &mut budget, &mut work);
        self.expire_members(now, &mut budget, &mut work);
        // Rebuilding moves every live member in one hold, so it waits until
        // few are left: then it costs no more than one step of expiry.
        if self.free.len() > 1024
            && self.free.len() > self.entries.len() / 2
            && self.len() <= COMPACT_AT_MOST
        {
            self.compact();
        }
        work
    }

    /// Takes what the last compaction let go of, so the caller can drop it
    /// after releasing the space.
    pub fn take_retired(&mut self) -> Option<Retired> {
        self.retired.take()
    }

    /// Closes the connections whose TTL ran out, first to expire first.
    fn expire_conns(&mut self, now: Millis, budget: &mut usize, work: &mut TickWork) {
        while let Some(conn) = self.conns.first_expired(now) {
            if *budget == 0 {
                work.more = true;
                return;
            }
            *budget -= 1;
            self.drop_conn(&conn, LeaveReason::Timeout);
            work.connections_expired += 1;
        }
    }

    /// Moves one watermark up to its cut, announcing the members it passes
    /// (unless an earlier `leave` already covered them), oldest first.
    fn advance_mark(&mut self, which: Mark, now: Millis, budget: &mut usize, work: &mut TickWork) {
        let (mark, cut) = match which {
            Mark::Away => (
                self.away_mark,
                (now.saturating_sub(self.config.online_ms), SEQ_MASK),
            ),
            Mark::Gone => (
                self.gone_mark,
                (now.saturating_sub(self.config.away_ms), SEQ_MASK),
            ),
        };
        if cut <= mark {
            return;
        }
        // The oldest member above the mark, of each kind.
        let walk = OldestFirst::new(&self.entries, KindFilter::All, |kind| {
            let s = self.seek_le(kind, mark);
            if s == NIL {
                self.lists[kind.index()].tail
            } else {
                self.entries[s as usize].prev
            }
        });
        let mut new_mark = cut;
        for slot in walk {
            let key = self.entries[slot as usize].key();
            if key > cut {
                break;
            }
            if *budget == 0 {
                work.more = true;
                new_mark = mark.max(self.last_done(slot));
                break;
            }
            *budget -= 1;
            if key > self.gone_mark {
                work.transitions += 1;
                match which {
                    Mark::Away => self.emit(EventKind::Away, slot, Status::Away, Some(key.0), None),
                    Mark::Gone => self.emit(
                        EventKind::Leave,
                        slot,
                        Status::Offline,
                        Some(key.0),
                        Some(LeaveReason::Timeout),
                    ),
                }
            }
        }
        match which {
            Mark::Away => self.away_mark = new_mark,
            Mark::Gone => self.gone_mark = new_mark,
        }
    }

    /// Forgets members past retention: the oldest, at the tails.
    fn expire_members(&mut self, now: Millis, budget: &mut usize, work: &mut TickWork) {
        let expire_before = now.saturating_sub(self.config.retention_ms);
        while let Some(slot) = self.oldest_first().next() {
            let key = self.entries[slot as usize].key();
            if key.0 > expire_before {
                break;
            }
            if *budget == 0 {
                work.more = true;
                break;
            }
            *budget -= 1;
            if self.presence(key) != Presence::Gone {
                self.emit(
                    EventKind::Leave,
                    slot,
                    Status::Offline,
                    Some(key.0),
                    Some(LeaveReason::Expired),
                );
            }
            self.remove(slot);
            work.expired += 1;
        }
    }

    /// The key just below `slot`'s, so a mark set to it covers everything
    /// older than `slot` and not `slot` itself.
    fn last_done(&self, slot: u32) -> Key {
        let (ts, seq) = self.entries[slot as usize].key();
        if seq > 0 {
            (ts, seq - 1)
        } else {
            (ts.saturating_sub(1), SEQ_MASK)
        }
    }

    /// Shrinks the slab after a mass expiry: moves live entries down so
    /// memory goes back to the allocator.
    fn compact(&mut self) {
        let mut members: Vec<(MemberKind, CompactString, Millis, u64, Option<Metadata>)> =
            Vec::with_capacity(self.len());
        // Walk the lists, not the slab: the cost follows the few members
        // left, not the slots the slab once held.
        for k in 0..2 {
            let mut slot = self.lists[k].head;
            while slot != NIL {
                let meta = self.meta.remove(&slot);
                let e = &mut self.entries[slot as usize];
                members.push((
                    e.kind(),
                    std::mem::take(&mut e.id),
                    e.ts,
                    e.seq_flags & SEQ_MASK,
                    meta,
                ));
                slot = e.next;
            }
        }
        // Re-insert oldest first so every link is O(1) at the head.
        members.sort_unstable_by_key(|m| (m.2, m.3));
        self.retired = Some(Retired {
            _entries: std::mem::replace(&mut self.entries, Vec::with_capacity(members.len())),
            _index: std::mem::replace(&mut self.index, HashTable::with_capacity(members.len())),
        });
        self.free = Vec::new();
        self.lists = [List::EMPTY; 2];
        self.blocks = None;
        self.meta = hashbrown::HashMap::default();
        for (kind, id, ts, seq, meta) in members {
            let slot = self.alloc(kind, id, ts, seq);
            self.link(slot);
            if let Some(m) = meta {
                self.meta.insert(slot, m);
            }
        }
    }

    /// Every stored member with its last-seen time and metadata, for
    /// snapshots: oldest first, so a restore links each at its list's head.
    pub fn export(&self) -> Vec<(MemberKey, Millis, Option<Metadata>)> {
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.oldest_first().map(|slot| {
            let e = &self.entries[slot as usize];
            (
                MemberKey {
                    kind: e.kind(),
                    id: MemberId::from_compact_unchecked(e.id.clone()),
                },
                e.ts,
                self.meta.get(&slot).cloned(),
            )
        }));
        out
    }

    /// Checks the engine's internal invariants; panics with a description
    /// when one is broken. For tests.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let mut seen = 0usize;
        for kind in MemberKind::ALL {
            let k = kind.index();
            let mut s = self.lists[k].head;
            let mut prev = NIL;
            let mut n = 0u32;
            while s != NIL {
                let e = &self.entries[s as usize];
                assert!(!e.is_free(), "free entry in list");
                assert_eq!(e.kind(), kind, "entry in the wrong list");
                assert_eq!(e.prev, prev, "broken back link");
                if prev != NIL {
                    assert!(
                        self.entries[prev as usize].key() > e.key(),
                        "list out of order"
                    );
                }
                assert_eq!(
                    self.find(kind, &e.id),
                    Some(s),
                    "index does not find a listed member"
                );
                prev = s;
                s = e.next;
                n += 1;
            }
            assert_eq!(self.lists[k].tail, prev, "wrong tail");
            assert_eq!(self.lists[k].len, n, "wrong length");
            seen += n as usize;
        }
        assert_eq!(self.index.len(), seen, "index and lists disagree");
        self.conns.check_invariants();
        if let Some(bi) = &self.blocks {
            for (i, b) in bi.blocks.iter().enumerate() {
                let bn = bi.base + i as u64;
                for k in 0..2 {
                    let mut n = 0;
                    let mut s = b.head[k];
                    if s != NIL {
                        let p = self.entries[s as usize].prev;
                        assert!(
                            p == NIL || block_of(self.entries[p as usize].ts) != bn,
                            "block head is not the newest"
                        );
                    }
                    while s != NIL && block_of(self.entries[s as usize].ts) == bn {
                        n += 1;
                        s = self.entries[s as usize].next;
                    }
                    assert_eq!(b.count[k], n, "block count");
                }
                if let Some(cells) = &b.cells {
                    let sum: u32 = cells.iter().map(|c| c[0] + c[1]).sum();
                    assert_eq!(sum, b.total(), "cells disagree with counts");
                }
            }
        } else {
            assert!(seen <= INDEX_ABOVE, "large space without an index");
        }
    }
}
