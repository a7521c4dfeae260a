//! Background work, in bounded steps: closing silent connections, moving
//! the watermarks (`away` and timeout `leave` events), forgetting members
//! past retention, and compacting the slab after a mass expiry.
//!
//! Every step spends one unit of the caller's budget per member or
//! connection it touches and stops when the budget is spent; the next
//! [`Space::tick`] resumes exactly where it stopped, because both sweeps go
//! oldest first ([`OldestFirst`]) and a mark records how far they got.

use compact_str::CompactString;

use herenow_core::event::{EventKind, LeaveReason};
use herenow_core::id::{MemberId, MemberKind};
use herenow_core::meta::Metadata;
use herenow_core::policy::Status;
use herenow_core::store::KindFilter;
use herenow_core::time::Millis;

use super::Space;
use super::entry::{Entry, Key, List, NIL, SEQ_MASK};
use super::events::MarkedStatus;
use super::index::SlotIndex;
use super::walk::OldestFirst;
use crate::seen::SightingNote;

/// The slab is rebuilt (memory handed back) only when at most this many
/// members remain, so the rebuild is as short as one step of expiry. A
/// space that shrinks but stays larger keeps its slab's capacity and reuses
/// the free slots.
const COMPACT_AT_MOST: usize = 2_048;

/// What [`Space::tick`] did, for the store's [`herenow_core::store::TickReport`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickWork {
    /// Members forgotten because their retention ran out.
    pub expired: u64,
    /// `away` and timeout `leave` transitions.
    pub transitions: u64,
    /// Connections closed because they stopped pinging.
    pub connections_expired: u64,
    /// Whether work remains (the budget ran out): the caller releases the
    /// space and ticks it again.
    pub more: bool,
}

/// Allocations a compaction let go of, to be dropped by the caller.
pub struct Retired {
    _entries: Vec<Entry>,
    _index: SlotIndex,
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
        if self.free.len() > 1024
            && self.free.len() > self.entries.len() / 2
            && self.len() <= COMPACT_AT_MOST
        {
            self.compact();
        }
        work
    }

    /// Takes what the last compaction let go of, for the caller to drop
    /// after releasing the space: freeing a large slab is not free, and
    /// writers of the space need not wait for it.
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
            self.drop_conn(&conn, LeaveReason::Timeout, now);
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
                    Mark::Gone => self.emit_leave(slot, key.0, LeaveReason::Timeout),
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
            if self.marked_status(key) != MarkedStatus::Gone {
                self.emit_leave(slot, key.0, LeaveReason::Expired);
            }
            let (kind, id) = {
                let e = &self.entries[slot as usize];
                (e.kind(), e.id.clone())
            };
            self.remove(slot);
            self.sightings.push(SightingNote::Ended(
                kind,
                MemberId::from_compact_unchecked(id),
                key.0,
            ));
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
            _index: std::mem::replace(&mut self.index, SlotIndex::with_capacity(members.len())),
        });
        self.free = Vec::new();
        self.lists = [List::EMPTY; 2];
        self.blocks = None;
        self.meta = hashbrown::HashMap::default();
        for (kind, id, ts, seq, meta) in members {
            let hash = self.hash(kind, &id);
            let slot = self.alloc(hash, kind, id, ts, seq);
            self.link(slot);
            if let Some(m) = meta {
                self.meta.insert(slot, m);
            }
        }
    }
}
