//! [`Table`]: a compact open-addressing multimap from a member's 64-bit
//! fingerprint to packed sightings, 16 bytes a slot.
//!
//! One fingerprint may have several entries (one per space); an entry is
//! told apart by its space (`Sighting::space`). Linear probing from a home
//! slot chosen by the fingerprint's high bits (multiply-shift, so any
//! capacity works and the table grows by half, keeping the load between
//! about 0.58 and 0.875); deletion shifts the following entries back, so
//! there are no tombstones and a probe always ends at the first empty slot.

/// A fingerprint of 0 marks an empty slot; real ones are never 0.
const EMPTY: u64 = 0;
/// Grow when the load would pass 7/8.
const MAX_LOAD_NUM: usize = 7;
const MAX_LOAD_DEN: usize = 8;
/// The smallest capacity a non-empty table has.
const MIN_CAPACITY: usize = 16;

/// Bits of the packed value: `[ms: 42][guest: 1][present: 1][space: 20]`.
const SPACE_BITS: u32 = 20;
const PRESENT_BIT: u64 = 1 << SPACE_BITS;
const GUEST_BIT: u64 = 1 << (SPACE_BITS + 1);
const MS_SHIFT: u32 = SPACE_BITS + 2;

/// Most space ids a table can name.
pub(crate) const MAX_SPACES: u32 = 1 << SPACE_BITS;
/// The latest time a sighting can hold (the year 2109).
pub(crate) const MAX_MS: u64 = (1 << (64 - MS_SHIFT)) - 1;

/// One entry, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sighting {
    /// The space's id (see `SpaceSlots`).
    pub space: u32,
    /// Whether the member is present in that space now: its time is then
    /// the space's to answer, and `ms` is when it joined.
    pub present: bool,
    /// Whether the member is a guest (the fingerprint covers the kind too;
    /// this lets a sweep apply `remember_guests`).
    pub guest: bool,
    /// The remembered last-seen time, when not present.
    pub ms: u64,
}

impl Sighting {
    fn pack(self) -> u64 {
        debug_assert!(self.space < MAX_SPACES);
        (self.ms.min(MAX_MS) << MS_SHIFT)
            | if self.guest { GUEST_BIT } else { 0 }
            | if self.present { PRESENT_BIT } else { 0 }
            | u64::from(self.space)
    }

    fn unpack(v: u64) -> Self {
        Self {
            space: (v & (PRESENT_BIT - 1)) as u32,
            present: v & PRESENT_BIT != 0,
            guest: v & GUEST_BIT != 0,
            ms: v >> MS_SHIFT,
        }
    }
}

/// The multimap. Not synchronised: the owner shards it behind mutexes.
#[derive(Default)]
pub(crate) struct Table {
    slots: Vec<[u64; 2]>,
    len: usize,
}

impl Table {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes of heap held.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 16
    }

    fn home(&self, fp: u64) -> usize {
        // Multiply-shift onto [0, capacity): uses the high bits, which the
        // shard choice (low bits) leaves independent.
        ((u128::from(fp) * self.slots.len() as u128) >> 64) as usize
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }

    /// The slot of `fp`'s entry for `space`, if any.
    fn position(&self, fp: u64, space: u32) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = self.home(fp);
        loop {
            let [f, v] = self.slots[i];
            if f == EMPTY {
                return None;
            }
            if f == fp && Sighting::unpack(v).space == space {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    /// `fp`'s entry for `space`.
    pub fn get(&self, fp: u64, space: u32) -> Option<Sighting> {
        self.position(fp, space)
            .map(|i| Sighting::unpack(self.slots[i][1]))
    }

    /// Every entry of `fp` (one per space).
    pub fn all(&self, fp: u64, out: &mut Vec<Sighting>) {
        if self.slots.is_empty() {
            return;
        }
        let mut i = self.home(fp);
        loop {
            let [f, v] = self.slots[i];
            if f == EMPTY {
                return;
            }
            if f == fp {
                out.push(Sighting::unpack(v));
            }
            i = self.next(i);
        }
    }

    /// Sets `fp`'s entry for `s.space`; returns whether it is new.
    pub fn put(&mut self, fp: u64, s: Sighting) -> bool {
        debug_assert_ne!(fp, EMPTY);
        if let Some(i) = self.position(fp, s.space) {
            self.slots[i][1] = s.pack();
            return false;
        }
        if (self.len + 1) * MAX_LOAD_DEN > self.slots.len() * MAX_LOAD_NUM {
            self.grow();
        }
        let mut i = self.home(fp);
        while self.slots[i][0] != EMPTY {
            i = self.next(i);
        }
        self.slots[i] = [fp, s.pack()];
        self.len += 1;
        true
    }

    /// Removes `fp`'s entry for `space`; returns it.
    pub fn remove(&mut self, fp: u64, space: u32) -> Option<Sighting> {
        let i = self.position(fp, space)?;
        let old = Sighting::unpack(self.slots[i][1]);
        self.delete_at(i);
        Some(old)
    }

    /// Removes the entries of `fp` that `doomed` picks; returns them.
    pub fn remove_where(
        &mut self,
        fp: u64,
        mut doomed: impl FnMut(Sighting) -> bool,
    ) -> Vec<Sighting> {
        let mut found = Vec::new();
        self.all(fp, &mut found);
        found.retain(|s| doomed(*s));
        for s in &found {
            self.remove(fp, s.space);
        }
        found
    }

    /// Visits up to `budget` slots from `cursor`, removing the entries
    /// `doomed` picks. Returns the removed count and the next cursor (0
    /// once the table has been gone over). An entry shifted back into the
    /// slice by a removal is seen on the next pass.
    pub fn sweep(
        &mut self,
        cursor: usize,
        budget: usize,
        mut doomed: impl FnMut(Sighting) -> bool,
    ) -> (u64, usize) {
        let mut removed = 0;
        let mut end = (cursor + budget).min(self.slots.len());
        // To the end of the run of entries the slice ends in: a delete
        // shifts only entries of its own run, so every entry it can move
        // has then been looked at (and kept).
        while end < self.slots.len() && self.slots[end][0] != EMPTY {
            end += 1;
        }
        // Backwards: deleting the last entries of a run first leaves
        // nothing behind them to shift, so clearing a run of k doomed
        // entries costs O(k), not O(k²).
        for i in (cursor..end).rev() {
            let [f, v] = self.slots[i];
            if f != EMPTY && doomed(Sighting::unpack(v)) {
                self.delete_at(i);
                removed += 1;
            }
        }
        let next = if end >= self.slots.len() { 0 } else { end };
        if self.len * 4 * MAX_LOAD_DEN < self.slots.len() * MAX_LOAD_NUM && next == 0 {
            self.shrink();
        }
        (removed, next)
    }

    /// Every entry, for snapshots.
    pub fn entries(&self) -> impl Iterator<Item = (u64, Sighting)> + '_ {
        self.slots
            .iter()
            .filter(|[f, _]| *f != EMPTY)
            .map(|&[f, v]| (f, Sighting::unpack(v)))
    }

    /// Empties slot `i` and shifts the entries after it back where their
    /// probe allows (no tombstones).
    fn delete_at(&mut self, mut i: usize) {
        self.slots[i] = [EMPTY, 0];
        self.len -= 1;
        let mut j = self.next(i);
        loop {
            let [f, v] = self.slots[j];
            if f == EMPTY {
                return;
            }
            let home = self.home(f);
            // Move j back to i when i lies cyclically in [home, j).
            let movable = if i <= j {
                home <= i || home > j
            } else {
                home <= i && home > j
            };
            if movable {
                self.slots[i] = [f, v];
                self.slots[j] = [EMPTY, 0];
                i = j;
            }
            j = self.next(j);
        }
    }

    fn grow(&mut self) {
        let capacity = (self.slots.len() + self.slots.len() / 2).max(MIN_CAPACITY);
        self.rebuild(capacity);
    }

    fn shrink(&mut self) {
        let capacity = (self.len * MAX_LOAD_DEN / MAX_LOAD_NUM * 3 / 2).max(MIN_CAPACITY);
        if capacity < self.slots.len() {
            self.rebuild(if self.len == 0 { 0 } else { capacity });
        }
    }

    fn rebuild(&mut self, capacity: usize) {
        let old = std::mem::replace(&mut self.slots, vec![[EMPTY, 0]; capacity]);
        for [f, v] in old {
            if f == EMPTY {
                continue;
            }
            let mut i = self.home(f);
            while self.slots[i][0] != EMPTY {
                i = self.next(i);
            }
            self.slots[i] = [f, v];
        }
        self.slots.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    impl Table {
        /// Slots allocated (each 16 bytes).
        fn capacity(&self) -> usize {
            self.slots.len()
        }
    }

    fn seen(space: u32, ms: u64) -> Sighting {
        Sighting {
            space,
            present: ms.is_multiple_of(3),
            guest: ms.is_multiple_of(5),
            ms,
        }
    }

    #[test]
    fn packs_every_field() {
        let s = Sighting {
            space: MAX_SPACES - 1,
            present: true,
            guest: true,
            ms: 1_700_000_000_000,
        };
        assert_eq!(Sighting::unpack(s.pack()), s);
        let late = Sighting { ms: u64::MAX, ..s };
        assert_eq!(Sighting::unpack(late.pack()).ms, MAX_MS);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Put(u8, u8, u64),
        Remove(u8, u8),
        Sweep(usize, u64),
        Erase(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..40, 0u8..4, 1u64..1000).prop_map(|(f, s, m)| Op::Put(f, s, m)),
            2 => (0u8..40, 0u8..4).prop_map(|(f, s)| Op::Remove(f, s)),
            1 => (0usize..64, 1u64..1000).prop_map(|(c, m)| Op::Sweep(c, m)),
            1 => (0u8..40).prop_map(Op::Erase),
        ]
    }

    /// Few distinct fingerprints whose homes collide a lot.
    fn fp(f: u8) -> u64 {
        // High bits pick the home: many share it.
        (u64::from(f % 5) << 60) | u64::from(f) | 1
    }

    proptest! {
        /// The table answers like a map of (fingerprint, space), through
        /// growth, shrinking and backward-shift deletes.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(op(), 1..400)) {
            let mut t = Table::default();
            let mut model: HashMap<(u64, u32), Sighting> = HashMap::new();
            for op in ops {
                match op {
                    Op::Put(f, s, m) => {
                        let new = t.put(fp(f), seen(u32::from(s), m));
                        prop_assert_eq!(new, model.insert((fp(f), u32::from(s)), seen(u32::from(s), m)).is_none());
                    }
                    Op::Remove(f, s) => {
                        prop_assert_eq!(t.remove(fp(f), u32::from(s)), model.remove(&(fp(f), u32::from(s))));
                    }
                    Op::Sweep(cursor, below) => {
                        // A pass from any cursor, then full passes until one
                        // removes nothing: a pass that removes nothing moved
                        // nothing, so it saw every entry.
                        let mut c = cursor.min(t.capacity());
                        loop {
                            let (_, next) = t.sweep(c, 7, |s| s.ms < below);
                            if next == 0 { break; }
                            c = next;
                        }
                        for _ in 0..100 {
                            let (mut c, mut removed) = (0, 0);
                            loop {
                                let (r, next) = t.sweep(c, 7, |s| s.ms < below);
                                removed += r;
                                if next == 0 { break; }
                                c = next;
                            }
                            if removed == 0 { break; }
                        }
                        model.retain(|_, s| s.ms >= below);
                    }
                    Op::Erase(f) => {
                        let mut gone = t.remove_where(fp(f), |_| true);
                        gone.sort_by_key(|s| s.space);
                        let mut want: Vec<Sighting> = model
                            .iter()
                            .filter(|((mf, _), _)| *mf == fp(f))
                            .map(|(_, s)| *s)
                            .collect();
                        want.sort_by_key(|s| s.space);
                        model.retain(|(mf, _), _| *mf != fp(f));
                        prop_assert_eq!(gone, want);
                    }
                }
                prop_assert_eq!(t.len(), model.len());
            }
            for (&(f, s), want) in &model {
                prop_assert_eq!(t.get(f, s), Some(*want));
            }
            prop_assert_eq!(t.entries().count(), model.len());
        }
    }

    #[test]
    fn stays_within_its_load() {
        let mut t = Table::default();
        for i in 1..=100_000u64 {
            t.put(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, seen(0, i));
        }
        let load = t.len() as f64 / t.capacity() as f64;
        assert!((0.55..=0.875).contains(&load), "load {load}");
    }
}
