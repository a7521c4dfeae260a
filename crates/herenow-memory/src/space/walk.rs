//! Walking both kinds' lists as one, in key order.
//!
//! Users and guests live in separate lists, so a listing of one kind never
//! steps over the other. Listings of both, snapshots, the watermark sweep,
//! expiry and exports need one order over both: [`Merge`] interleaves the
//! two walks by key, newest first ([`NewestFirst`], along `next` links) or
//! oldest first ([`OldestFirst`], along `prev` links).

use herenow_core::id::MemberKind;
use herenow_core::store::KindFilter;

use super::Space;
use super::entry::{Entry, NIL};

/// Slots of both lists in key order: descending when `NEWEST`, ascending
/// otherwise. Keys are unique, so the order is total.
pub(super) struct Merge<'a, const NEWEST: bool> {
    entries: &'a [Entry],
    /// The next slot of each kind's walk; `NIL` when that walk is done.
    at: [u32; 2],
}

/// Newest key first: top-N, pages, snapshots.
pub(super) type NewestFirst<'a> = Merge<'a, true>;
/// Oldest key first: the watermark sweep and expiry, which must resume
/// exactly where a spent budget stopped them, and exports.
pub(super) type OldestFirst<'a> = Merge<'a, false>;

impl<'a, const NEWEST: bool> Merge<'a, NEWEST> {
    /// Starts each kind `kinds` admits at `start(kind)` (`NIL`: none of
    /// that kind), and skips the others without asking `start`, which may
    /// have to seek.
    pub(super) fn new(
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

impl Space {
    /// The members `kinds` admits, newest first from the heads.
    pub(super) fn newest_first(&self, kinds: KindFilter) -> NewestFirst<'_> {
        NewestFirst::new(&self.entries, kinds, |kind| self.lists[kind.index()].head)
    }

    /// Every member, oldest first from the tails.
    pub(super) fn oldest_first(&self) -> OldestFirst<'_> {
        OldestFirst::new(&self.entries, KindFilter::All, |kind| {
            self.lists[kind.index()].tail
        })
    }
}
