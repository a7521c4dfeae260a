//! The slab and the lists: allocating and freeing entries, finding a
//! member by (kind, id), and keeping each kind's list in key order.
//!
//! Every change to a list goes through [`Space::link`] and
//! [`Space::unlink`], which tell the block index; nothing else moves an
//! entry.

use std::hash::BuildHasher;

use compact_str::CompactString;

use super::Space;
use super::entry::{Entry, FREE, GUEST, NIL};
use crate::id::MemberKind;
use crate::meta::Metadata;
use crate::time::Millis;

impl Space {
    fn hash(&self, kind: MemberKind, id: &str) -> u64 {
        self.hasher.hash_one((kind as u8, id))
    }

    /// The slot of a stored member.
    pub(super) fn find(&self, kind: MemberKind, id: &str) -> Option<u32> {
        let hash = self.hash(kind, id);
        let entries = &self.entries;
        self.index
            .find(hash, |&s| {
                let e = &entries[s as usize];
                e.kind() == kind && e.id == id
            })
            .copied()
    }

    /// Stores a new member, indexed but not yet in its list: the caller
    /// links it.
    pub(super) fn alloc(
        &mut self,
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

    /// Unlinks and frees a member; returns the metadata it showed.
    pub(super) fn remove(&mut self, slot: u32) -> Option<Metadata> {
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
