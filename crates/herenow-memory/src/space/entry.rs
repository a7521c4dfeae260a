//! The records every other part of the engine walks: a member's slab
//! [`Entry`], the order [`Key`], and a kind's [`List`] ends.
//!
//! This module knows no other part of the space, so the block index, the
//! slab and the walks can all build on it without depending on each other.

use compact_str::CompactString;

use herenow_core::id::MemberKind;
use herenow_core::time::Millis;

/// "No slot": the end of a list, or an empty block head.
pub(super) const NIL: u32 = u32::MAX;
/// In [`Entry::seq_flags`]: the member is a guest.
pub(super) const GUEST: u64 = 1 << 63;
/// In [`Entry::seq_flags`]: the slot is on the free list.
pub(super) const FREE: u64 = 1 << 62;
/// The sequence number's bits in [`Entry::seq_flags`], and the largest
/// sequence number: a mark `(t, SEQ_MASK)` covers every member seen at `t`.
pub(super) const SEQ_MASK: u64 = (1 << 62) - 1;

/// The order of members: last seen, then the space's heartbeat sequence.
/// Keys are unique: every heartbeat that moves a member takes a new
/// sequence number.
pub(super) type Key = (Millis, u64);

/// One member, in 48 bytes so a million fit in 48 MB: the kind and the
/// free flag ride in the sequence number's spare bits, and ids up to 24
/// bytes stay inline.
pub(super) struct Entry {
    pub(super) id: CompactString,
    pub(super) ts: Millis,
    /// Sequence number in the low 62 bits; `GUEST` and `FREE` flags above.
    pub(super) seq_flags: u64,
    /// Newer neighbour in its kind's list.
    pub(super) prev: u32,
    /// Older neighbour.
    pub(super) next: u32,
}

impl Entry {
    pub(super) fn key(&self) -> Key {
        (self.ts, self.seq_flags & SEQ_MASK)
    }

    pub(super) fn kind(&self) -> MemberKind {
        if self.seq_flags & GUEST != 0 {
            MemberKind::Guest
        } else {
            MemberKind::User
        }
    }

    pub(super) fn is_free(&self) -> bool {
        self.seq_flags & FREE != 0
    }
}

/// The ends of one kind's list, newest at `head`, and its length (so
/// totals never walk).
#[derive(Clone, Copy)]
pub(super) struct List {
    pub(super) head: u32,
    pub(super) tail: u32,
    pub(super) len: u32,
}

impl List {
    pub(super) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}
