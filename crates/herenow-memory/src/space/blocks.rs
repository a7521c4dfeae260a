//! The block index of a large space: 1024 ms blocks with per-kind counts,
//! the newest member of each block, and per-millisecond counts for crowded
//! blocks.
//!
//! It exists for two questions the lists alone answer only by walking from
//! the head: "how many members since `t`" (window counts, exact and without
//! a walk) and "where does key `k` go" (backfills, cursors, watermarks).
//! Small spaces walk instead ([`INDEX_ABOVE`]), as Redis keeps small
//! sorted sets as listpacks.
//!
//! The slab calls [`Space::blocks_linked`] and [`Space::blocks_unlinked`]
//! after every change to a list; this module builds, keeps and drops the
//! index itself.
//!
//! The index holds a block for every second between the oldest member and
//! the newest, so its size follows the members' time range, which the
//! sweep keeps within the retention (at most a day). A step of the
//! server's clock by days or years would stretch that range by the step:
//! an index grown to cover it would take a block per second of the jump
//! (gigabytes for years). So the range is bounded ([`MAX_SPAN_BLOCKS`]):
//! a space whose members' times spread wider keeps no index, its queries
//! walk the lists as a small space's do, and the index is built again as
//! soon as the range fits (the sweep removes the members left behind by
//! the jump at their retention).

use std::collections::VecDeque;

use herenow_core::id::MemberKind;
use herenow_core::limits;
use herenow_core::time::Millis;

use super::Space;
use super::entry::{Key, NIL};
use super::index::prefetch;

/// Spaces above this many members keep a block index; smaller ones walk
/// their lists, which is cheaper at that size than keeping blocks.
pub const INDEX_ABOVE: usize = 512;
/// The index is dropped below this many members, well under
/// [`INDEX_ABOVE`], so a space hovering near the threshold does not build
/// and drop it over and over.
pub(super) const UNINDEX_BELOW: usize = 128;
/// A block gets per-millisecond counts once it holds this many members.
const CELLS_ABOVE: u32 = 64;
const BLOCK_SHIFT: u32 = 10;
const BLOCK_MS: usize = 1 << BLOCK_SHIFT;
/// The widest range of blocks an index covers: twice the longest
/// retention (a clock that jumped leaves a wider one; module docs). 168,750
/// blocks of 24 bytes: 4 MB at most for one space.
const MAX_SPAN_BLOCKS: u64 = (2 * limits::MAX_RETENTION_MS) >> BLOCK_SHIFT;

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
pub(super) struct BlockIndex {
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
        let i = bn.wrapping_sub(self.base) as usize;
        if bn >= self.base && i < self.blocks.len() {
            return &mut self.blocks[i];
        }
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

    /// Takes `slot` of list `k`, last seen `ts`, out of its block: the
    /// block's head moves to `next` when that is the slot's older
    /// neighbour in the same block (`next_in_block`), its counts drop, and
    /// an emptied block is trimmed away at the ends.
    fn remove(&mut self, k: usize, slot: u32, ts: Millis, next: u32, next_in_block: bool) {
        let Some(block) = self.get_mut(block_of(ts)) else {
            return;
        };
        if block.head[k] == slot {
            block.head[k] = if next_in_block { next } else { NIL };
        }
        block.count[k] -= 1;
        if let Some(cells) = &mut block.cells {
            cells[offset_of(ts)][k] -= 1;
        }
        if block.total() == 0 {
            block.cells = None;
            self.trim();
        }
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

    /// Prefetches the per-millisecond count of `ts`, if its block has
    /// them: a hint.
    pub(super) fn prefetch_cells(&self, ts: Millis) {
        if let Some(cells) = self.get(block_of(ts)).and_then(|b| b.cells.as_deref()) {
            prefetch(cells.as_ptr().wrapping_add(offset_of(ts)));
        }
    }

    /// Bytes of heap held, counting capacity.
    pub(super) fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.blocks.iter().filter(|b| b.cells.is_some()).count()
                * std::mem::size_of::<Cells>()
    }
}

fn block_of(ts: Millis) -> u64 {
    ts >> BLOCK_SHIFT
}

fn offset_of(ts: Millis) -> usize {
    (ts as usize) & (BLOCK_MS - 1)
}

impl Space {
    /// The newest member of `kind` whose key is at or below `key`.
    pub(super) fn seek_le(&self, kind: MemberKind, key: Key) -> u32 {
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

    /// Accounts for `slot`, just linked into its list, in the block index;
    /// builds the index when the space has just grown past
    /// [`INDEX_ABOVE`].
    pub(super) fn blocks_linked(&mut self, slot: u32) {
        let (kind, key, prev) = {
            let e = &self.entries[slot as usize];
            (e.kind(), e.key(), e.prev)
        };
        let k = kind.index();
        let bn = block_of(key.0);
        if self.blocks.as_ref().is_some_and(|bi| bi.get(bn).is_none()) && !self.span_fits() {
            self.blocks = None;
            return;
        }
        if let Some(bi) = &mut self.blocks {
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
        } else if self.len() > INDEX_ABOVE && self.span_fits() {
            self.build_index();
        }
    }

    /// Whether the members' times fit in a block index
    /// ([`MAX_SPAN_BLOCKS`]): read from the lists' ends, in O(1).
    fn span_fits(&self) -> bool {
        let (mut oldest, mut newest) = (Millis::MAX, Millis::MIN);
        for list in &self.lists {
            if list.head != NIL {
                newest = newest.max(self.entries[list.head as usize].ts);
                oldest = oldest.min(self.entries[list.tail as usize].ts);
            }
        }
        oldest > newest || block_of(newest) - block_of(oldest) < MAX_SPAN_BLOCKS
    }

    /// Builds the index of a large space that has none because its range
    /// was too wide, once it fits again.
    fn reindex_if_fits(&mut self) {
        if self.blocks.is_none() && self.len() > INDEX_ABOVE && self.span_fits() {
            self.build_index();
        }
    }

    /// Takes `slot`, just unlinked from its list (its own links still name
    /// its old neighbours), out of the block index; drops the index when
    /// the space has shrunk below [`UNINDEX_BELOW`].
    pub(super) fn blocks_unlinked(&mut self, slot: u32) {
        let (kind, ts, next) = {
            let e = &self.entries[slot as usize];
            (e.kind(), e.ts, e.next)
        };
        let k = kind.index();
        if let Some(bi) = &mut self.blocks {
            let next_in_block =
                next != NIL && block_of(self.entries[next as usize].ts) == block_of(ts);
            bi.remove(k, slot, ts, next, next_in_block);
            if self.len() < UNINDEX_BELOW {
                self.blocks = None;
            }
        } else {
            self.reindex_if_fits();
        }
    }

    /// Accounts for `slot` of list `k` moved from `old_ts` to the head of
    /// its list at `ts` by [`Space::relink`]: what
    /// [`Space::blocks_unlinked`] and [`Space::blocks_linked`] would do,
    /// with no block lookup and no count changed when both times fall in
    /// one block. `next` is its old older neighbour, last seen `next_ts`.
    pub(super) fn blocks_moved_to_head(
        &mut self,
        k: usize,
        slot: u32,
        old_ts: Millis,
        next: u32,
        next_ts: Option<Millis>,
        ts: Millis,
    ) {
        let (old_bn, bn) = (block_of(old_ts), block_of(ts));
        if self.blocks.is_none() {
            self.reindex_if_fits();
            return;
        }
        if old_bn != bn
            && self.blocks.as_ref().is_some_and(|bi| bi.get(bn).is_none())
            && !self.span_fits()
        {
            self.blocks = None;
            return;
        }
        let Some(bi) = &mut self.blocks else { return };
        if old_bn == bn {
            let block = bi.ensure(bn);
            block.head[k] = slot;
            let (from, to) = (offset_of(old_ts), offset_of(ts));
            if from != to
                && let Some(cells) = &mut block.cells
            {
                cells[from][k] -= 1;
                cells[to][k] += 1;
            }
            return;
        }
        let next_in_block = next_ts.is_some_and(|t| block_of(t) == old_bn);
        bi.remove(k, slot, old_ts, next, next_in_block);
        let block = bi.ensure(bn);
        block.head[k] = slot;
        block.count[k] += 1;
        if let Some(cells) = &mut block.cells {
            cells[offset_of(ts)][k] += 1;
        } else if block.total() > CELLS_ABOVE {
            self.fill_cells(bn);
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
    pub(super) fn count_since(&self, cutoff: Millis) -> [u64; 2] {
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

    /// Panics unless every block's heads, counts and cells agree with the
    /// lists, and a space too large to walk has its index. For tests.
    pub(super) fn check_blocks(&self, members: usize) {
        let Some(bi) = &self.blocks else {
            assert!(
                members <= INDEX_ABOVE || !self.span_fits(),
                "large space without an index"
            );
            return;
        };
        assert!(
            (bi.blocks.len() as u64) <= MAX_SPAN_BLOCKS,
            "the index spans {} blocks",
            bi.blocks.len()
        );
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
    }
}
