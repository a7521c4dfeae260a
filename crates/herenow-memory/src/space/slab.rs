//! The slab and the lists: allocating and freeing entries, finding a
//! member by (kind, id), and keeping each kind's list in key order.
//!
//! Every change to a list goes through [`Space::link`] and
//! [`Space::unlink`], which tell the block index; nothing else moves an
//! entry.

use std::hash::BuildHasher;

use compact_str::CompactString;

use herenow_core::id::MemberKind;
use herenow_core::meta::Metadata;
use herenow_core::time::Millis;

use super::Space;
use super::blocks::UNINDEX_BELOW;
use super::entry::{Entry, FREE, GUEST, NIL, SEQ_MASK};
use super::index::prefetch;

impl Space {
    /// The index's hash of a member.
    pub(super) fn hash(&self, kind: MemberKind, id: &str) -> u64 {
        self.hasher.hash_one((kind as u8, id))
    }

    /// The slot of a stored member.
    pub(super) fn find(&self, kind: MemberKind, id: &str) -> Option<u32> {
        self.find_hashed(self.hash(kind, id), kind, id)
    }

    /// [`Space::find`], with the member's hash already computed.
    pub(super) fn find_hashed(&self, hash: u64, kind: MemberKind, id: &str) -> Option<u32> {
        let entries = &self.entries;
        self.index.find(hash, |s| {
            let e = &entries[s as usize];
            e.kind() == kind && e.id == id
        })
    }

    /// Prefetches the index group of a member's hash (a hint: the first
    /// of three stages a batch runs ahead of applying, see
    /// [`Space::heartbeat`]).
    pub(super) fn prefetch_group(&self, hash: u64) {
        self.index.prefetch(hash);
    }

    /// Prefetches the entry the index most likely holds under `hash`, from
    /// its (by now cached) group; returns that slot.
    pub(super) fn prefetch_entry(&self, hash: u64) -> Option<u32> {
        let slot = self.index.guess(hash)?;
        let p = self.entries.as_ptr().wrapping_add(slot as usize);
        prefetch(p);
        // An entry may straddle two cache lines.
        prefetch(
            p.cast::<u8>()
                .wrapping_add(std::mem::size_of::<Entry>() - 1),
        );
        Some(slot)
    }

    /// Prefetches what moving `slot` to the head will touch: its list
    /// neighbours and its block's per-millisecond counts. `slot` comes from
    /// [`Space::prefetch_entry`] and may be stale or wrong: only hints.
    pub(super) fn prefetch_neighbours(&self, slot: u32) {
        let Some(e) = self.entries.get(slot as usize) else {
            return;
        };
        if e.prev != NIL {
            prefetch(self.entries.as_ptr().wrapping_add(e.prev as usize));
        }
        if e.next != NIL {
            prefetch(self.entries.as_ptr().wrapping_add(e.next as usize));
        }
        if let Some(bi) = &self.blocks {
            bi.prefetch_cells(e.ts);
        }
    }

    /// Stores a new member, indexed but not yet in its list: the caller
    /// links it.
    pub(super) fn alloc(
        &mut self,
        hash: u64,
        kind: MemberKind,
        id: CompactString,
        ts: Millis,
        seq: u64,
    ) -> u32 {
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
        let entries = &self.entries;
        let hasher = &self.hasher;
        self.index.insert(hash, slot, |s| {
            let e = &entries[s as usize];
            hasher.hash_one((e.kind() as u8, e.id.as_str()))
        });
        slot
    }

    /// Unlinks and frees a member; returns the metadata it showed.
    pub(super) fn remove(&mut self, slot: u32) -> Option<Metadata> {
        self.unlink(slot);
        let (kind, hash) = {
            let e = &self.entries[slot as usize];
            (e.kind(), self.hash(e.kind(), &e.id))
        };
        self.index.remove(hash, slot);
        let e = &mut self.entries[slot as usize];
        e.id = CompactString::default();
        e.seq_flags = FREE | if kind == MemberKind::Guest { GUEST } else { 0 };
        self.free.push(slot);
        self.meta.remove(&slot)
    }

    /// Links a detached entry into its kind's list at its key's place.
    pub(super) fn link(&mut self, slot: u32) {
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
        self.blocks_linked(slot);
    }

    /// Moves a listed member to key (`at`, `seq`): a heartbeat's unlink
    /// and link. `at` is at or after its last seen and `seq` newer than
    /// any key. When the member becomes the newest (a heartbeat at the
    /// store's clock) the list and the block index change in one pass,
    /// and a move within one block touches no counts.
    pub(super) fn relink(&mut self, slot: u32, at: Millis, seq: u64) {
        let (k, old_ts, prev, next) = {
            let e = &self.entries[slot as usize];
            (e.kind().index(), e.ts, e.prev, e.next)
        };
        // The newest member once `slot` is out.
        let head = if prev == NIL {
            next
        } else {
            self.lists[k].head
        };
        let to_head = head == NIL || self.entries[head as usize].ts <= at;
        // Small spaces may drop their block index on the unlink: leave
        // that to the two-step path.
        if !to_head || (self.blocks.is_some() && self.len() <= UNINDEX_BELOW) {
            self.unlink(slot);
            let e = &mut self.entries[slot as usize];
            e.ts = at;
            e.seq_flags = (e.seq_flags & !SEQ_MASK) | seq;
            self.link(slot);
            return;
        }
        // The head already stays the head: its neighbours are unchanged.
        if prev != NIL {
            self.entries[prev as usize].next = next;
            if next == NIL {
                self.lists[k].tail = prev;
            } else {
                self.entries[next as usize].prev = prev;
            }
            self.entries[head as usize].prev = slot;
            self.lists[k].head = slot;
        }
        let e = &mut self.entries[slot as usize];
        e.prev = NIL;
        e.next = head;
        e.ts = at;
        e.seq_flags = (e.seq_flags & !SEQ_MASK) | seq;
        let next_ts = (next != NIL).then(|| self.entries[next as usize].ts);
        self.blocks_moved_to_head(k, slot, old_ts, next, next_ts, at);
    }

    /// Detaches an entry from its kind's list. The entry keeps its old
    /// links until it is linked again.
    pub(super) fn unlink(&mut self, slot: u32) {
        let (kind, prev, next) = {
            let e = &self.entries[slot as usize];
            (e.kind(), e.prev, e.next)
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
        self.blocks_unlinked(slot);
    }
}
