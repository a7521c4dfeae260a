//! The member index: slots by hash, in cache-line groups, so a lookup
//! costs one cache line of index before the entry itself.
//!
//! `hashbrown`'s table keeps its control bytes and its buckets in two
//! places: a lookup in a million-member space missed the cache twice
//! before reaching the entry, one miss waiting for the other. Here a
//! [`Group`] of 64 bytes holds twelve 7-bit tags and the twelve slots they
//! stand for, so one miss finds the candidates. The group a hash belongs
//! to is known from the hash alone, which lets a batch prefetch it well
//! before it is probed ([`SlotIndex::prefetch`]).
//!
//! Groups are probed linearly. A group that was full when an insert went
//! past it counts that in `overflow` (the scheme of folly's F14): a lookup
//! stops at the first group with none, and a removal takes its counts back
//! (a count that reached 255 stays, which only costs lookups a probe).
//! Slots are compared by the caller's `eq`; the tag only filters.
//!
//! This module knows nothing of entries or members: the slab hashes and
//! compares ids.

/// Slots per group: 12 tags and 12 four-byte slots fill a cache line with
/// the overflow count.
const WIDTH: usize = 12;
/// The tags' bytes of a group's `meta`, as a mask of their high bits.
const TAG_HIGH_BITS: u128 = 0x8080_8080_8080_8080_8080_8080;
const LOW_SEVEN: u128 = 0x7f7f_7f7f_7f7f_7f7f_7f7f_7f7f_7f7f_7f7f;
const ONES: u128 = 0x0101_0101_0101_0101_0101_0101_0101_0101;
/// Byte of `meta` holding the overflow count.
const OVERFLOW: usize = WIDTH;

/// Twelve slots and their tags in one cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Group {
    /// Bytes 0..12: tags (0 = empty, else the hash's top 7 bits with the
    /// high bit set); byte 12: overflow count; 13..16: unused.
    meta: [u8; 16],
    slots: [u32; WIDTH],
}

impl Group {
    const EMPTY: Group = Group {
        meta: [0; 16],
        slots: [0; WIDTH],
    };

    /// The tags equal to `byte` (0 finds the empty places), as a mask with
    /// the high bit of each such tag's byte set.
    fn matching(&self, byte: u8) -> u128 {
        let x = u128::from_le_bytes(self.meta) ^ (ONES * byte as u128);
        // A byte of `x` is zero exactly when its high bit stays clear here
        // (no carry crosses bytes: each byte adds at most 0x7f + 0x7f).
        !(((x & LOW_SEVEN) + LOW_SEVEN) | x) & TAG_HIGH_BITS
    }

    fn overflow(&self) -> u8 {
        self.meta[OVERFLOW]
    }
}

/// The position of the lowest byte flagged in a [`Group::matching`] mask.
fn first(mask: u128) -> usize {
    (mask.trailing_zeros() / 8) as usize
}

fn tag(hash: u64) -> u8 {
    (hash >> 57) as u8 | 0x80
}

/// Slots by hash. The caller gives every slot's hash on insert and removal
/// and compares candidates itself.
pub(super) struct SlotIndex {
    /// A power of two of groups, or none.
    groups: Vec<Group>,
    len: usize,
}

impl SlotIndex {
    pub(super) const fn new() -> Self {
        SlotIndex {
            groups: Vec::new(),
            len: 0,
        }
    }

    /// An index that takes `n` slots without growing.
    pub(super) fn with_capacity(n: usize) -> Self {
        let mut index = SlotIndex::new();
        if n > 0 {
            index.groups = vec![Group::EMPTY; groups_for(n)];
        }
        index
    }

    /// Slots stored.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of heap held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.groups.capacity() * std::mem::size_of::<Group>()
    }

    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.groups.len() - 1)
    }

    /// Asks the CPU to fetch the group `hash` belongs to; a hint only.
    pub(super) fn prefetch(&self, hash: u64) {
        if !self.groups.is_empty() {
            prefetch(self.groups.as_ptr().wrapping_add(self.home(hash)));
        }
    }

    /// The first slot in `hash`'s home group whose tag matches, without
    /// comparing: a guess for prefetching the entry, right nearly always.
    pub(super) fn guess(&self, hash: u64) -> Option<u32> {
        if self.groups.is_empty() {
            return None;
        }
        let group = &self.groups[self.home(hash)];
        let m = group.matching(tag(hash));
        (m != 0).then(|| group.slots[first(m)])
    }

    /// The slot with `hash` for which `eq` holds. Inlined: its one caller
    /// is the hot path, and a call cost it a dozen register saves.
    #[inline(always)]
    pub(super) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.groups.is_empty() {
            return None;
        }
        let t = tag(hash);
        let mask = self.groups.len() - 1;
        let mut g = hash as usize & mask;
        loop {
            let group = &self.groups[g];
            let mut m = group.matching(t);
            while m != 0 {
                let slot = group.slots[first(m)];
                if eq(slot) {
                    return Some(slot);
                }
                m &= m - 1;
            }
            if group.overflow() == 0 {
                return None;
            }
            g = (g + 1) & mask;
        }
    }

    /// Adds `slot` under `hash`; it must not be stored already. `rehash`
    /// gives the hash of any stored slot, for growing.
    pub(super) fn insert(&mut self, hash: u64, slot: u32, rehash: impl Fn(u32) -> u64) {
        if self.len >= capacity_of(self.groups.len()) {
            self.grow(rehash);
        }
        self.place(hash, slot);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, slot: u32) {
        let mask = self.groups.len() - 1;
        let mut g = hash as usize & mask;
        loop {
            let group = &mut self.groups[g];
            let free = group.matching(0);
            if free != 0 {
                let i = first(free);
                group.meta[i] = tag(hash);
                group.slots[i] = slot;
                return;
            }
            group.meta[OVERFLOW] = group.meta[OVERFLOW].saturating_add(1);
            g = (g + 1) & mask;
        }
    }

    fn grow(&mut self, rehash: impl Fn(u32) -> u64) {
        let groups = groups_for(self.len + 1).max(self.groups.len() * 2);
        let old = std::mem::replace(&mut self.groups, vec![Group::EMPTY; groups]);
        for group in &old {
            let mut m = group.matching(0) ^ TAG_HIGH_BITS;
            while m != 0 {
                let slot = group.slots[first(m)];
                self.place(rehash(slot), slot);
                m &= m - 1;
            }
        }
    }

    /// Removes `slot`, stored under `hash`; returns whether it was there.
    pub(super) fn remove(&mut self, hash: u64, slot: u32) -> bool {
        if self.groups.is_empty() {
            return false;
        }
        let t = tag(hash);
        let mask = self.groups.len() - 1;
        let home = hash as usize & mask;
        let mut g = home;
        loop {
            let group = &mut self.groups[g];
            let mut m = group.matching(t);
            while m != 0 {
                let i = first(m);
                if group.slots[i] == slot {
                    group.meta[i] = 0;
                    self.len -= 1;
                    // Take back the overflow counts its insert left.
                    let mut p = home;
                    while p != g {
                        let o = &mut self.groups[p].meta[OVERFLOW];
                        if *o != u8::MAX {
                            *o -= 1;
                        }
                        p = (p + 1) & mask;
                    }
                    return true;
                }
                m &= m - 1;
            }
            if group.overflow() == 0 {
                return false;
            }
            g = (g + 1) & mask;
        }
    }
}

/// Slots a table of `groups` groups takes before growing: 80 % of its
/// places, so most lookups stay in their home group.
fn capacity_of(groups: usize) -> usize {
    groups * WIDTH / 5 * 4
}

/// The fewest groups (a power of two) that take `n` slots.
fn groups_for(n: usize) -> usize {
    let mut groups = 1;
    while capacity_of(groups) < n {
        groups *= 2;
    }
    groups
}

/// Asks the CPU to bring the cache line at `p` into L1; a hint, with no
/// effect on what the program computes. A no-op off x86-64.
///
/// The crate's one `unsafe` block: stable Rust has no safe prefetch, and a
/// batch of heartbeats to a large space waits on cache misses one after
/// another without it (the batch in [`Space::heartbeat`] overlaps them).
///
/// [`Space::heartbeat`]: super::Space::heartbeat
#[inline(always)]
#[allow(unsafe_code)]
pub(super) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and writes nothing, whatever the
    // address; SSE is part of the x86-64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes crowded into few groups, so overflow and probing past full
    /// groups are exercised.
    fn crowded(slot: u32) -> u64 {
        ((slot as u64 % 7) << 57) | (slot as u64 % 3)
    }

    #[test]
    fn finds_what_it_holds_through_growth_and_removal() {
        let mut index = SlotIndex::new();
        for s in 0..500u32 {
            index.insert(crowded(s), s, crowded);
        }
        assert_eq!(index.len(), 500);
        for s in 0..500u32 {
            assert_eq!(index.find(crowded(s), |c| c == s), Some(s));
        }
        assert_eq!(index.find(crowded(600), |c| c == 600), None);
        for s in (0..500u32).step_by(2) {
            assert!(index.remove(crowded(s), s));
        }
        assert!(!index.remove(crowded(0), 0));
        assert_eq!(index.len(), 250);
        for s in 0..500u32 {
            let found = index.find(crowded(s), |c| c == s);
            assert_eq!(found, (s % 2 == 1).then_some(s));
        }
        // Removals gave back their overflow: reinserting refills in place.
        for s in (0..500u32).step_by(2) {
            index.insert(crowded(s), s, crowded);
        }
        for s in 0..500u32 {
            assert_eq!(index.find(crowded(s), |c| c == s), Some(s));
        }
    }

    #[test]
    fn tags_match_exactly() {
        let mut g = Group::EMPTY;
        g.meta[3] = 0x85;
        g.meta[11] = 0x85;
        g.meta[5] = 0x86;
        g.meta[OVERFLOW] = 0x85;
        assert_eq!(g.matching(0x85), (0x80 << 24) | (0x80 << 88));
        assert_eq!((g.matching(0) ^ TAG_HIGH_BITS).count_ones(), 3);
    }

    #[test]
    fn with_capacity_does_not_grow() {
        let mut index = SlotIndex::with_capacity(1000);
        let groups = index.groups.len();
        for s in 0..1000u32 {
            index.insert(
                (s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                s,
                |_| unreachable!(),
            );
        }
        assert_eq!(index.groups.len(), groups);
    }
}
