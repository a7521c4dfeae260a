//! postcard's encoding of the changes on the hot path, written by hand:
//! one heartbeat call or leave per record, so every instruction here is
//! paid per call. The format is postcard's (unsigned integers, lengths
//! and enum variants as LEB128 varints, a string as its length and bytes,
//! an option as a 0/1 tag and the value, a struct as its fields in
//! order), and the tests pin these bytes to serde's encoding of the owned
//! [`Change`](super::Change).
//!
//! Room is made from upper bounds on sizes (the head once, then each
//! beat or member) and written through a raw cursor over the spare
//! capacity, so no byte pays a growth check, a bounds check or a zeroing.
//! The `journal_record` benchmark in `benches/engine.rs` measures it
//! (BENCHMARKS.md, "Third pass: a cheaper record").

use crate::id::{MemberKey, MemberKind, SpaceName};
use crate::time::Millis;
use crate::values::Heartbeat;

/// The most bytes a varint of a `u64` takes.
const VARINT: usize = 10;

/// Most bytes of a record's head, the space's name apart: version,
/// variant, the name's length and the time.
const HEAD: usize = 2 + 2 * VARINT;

/// Most bytes of one member key, its id apart: the kind and the id's
/// length (an id is at most 256 bytes: two bytes of varint).
const KEY: usize = 1 + VARINT;

/// Most bytes of one beat, its id and metadata apart: a member key, an
/// optional time and optional text.
const BEAT: usize = KEY + 1 + VARINT + 1 + VARINT;

/// `Change::Heartbeats`, variant 0: space, now, then each beat as
/// `Beat { member, at_ms, meta }`.
///
/// Room is made per beat rather than summed up front: a batch is walked
/// once, and a lone beat's check is one comparison.
#[inline]
pub(super) fn heartbeats(
    out: &mut Vec<u8>,
    version: u8,
    space: &SpaceName,
    now: Millis,
    beats: &[Heartbeat],
) {
    let mut w = Cursor::record(out, version, 0, space, now, VARINT);
    w.varint(beats.len() as u64);
    for b in beats {
        let id = b.member.id.as_str().as_bytes();
        if b.is_plain() {
            w.room(KEY + 2 + id.len());
            w.key(&b.member, id);
            w.pair(0, 0);
        } else {
            beat_with_extras(&mut w, b, id);
        }
    }
    w.finish();
}

/// The heartbeats of one call in the form `Change::heartbeats` picks.
///
/// Inlined into the journal's append, it only dispatches: a lone plain
/// beat (the most frequent record of all) to [`lone_beat`], anything else
/// to [`many_beats`], each out of line, so the lone beat's code has a
/// small frame of its own instead of sharing one with the batch paths.
#[inline]
pub(super) fn any_heartbeats(
    out: &mut Vec<u8>,
    version: u8,
    space: &SpaceName,
    now: Millis,
    beats: &[Heartbeat],
) {
    match beats {
        [b] if b.is_plain() => lone_beat(out, version, space, now, b),
        _ => many_beats(out, version, space, now, beats),
    }
}

/// `Change::PlainBeats` of one plain beat: one room, no passes.
#[inline(never)]
fn lone_beat(out: &mut Vec<u8>, version: u8, space: &SpaceName, now: Millis, b: &Heartbeat) {
    let id = b.member.id.as_str().as_bytes();
    let mut w = Cursor::record(out, version, PLAIN_BEATS, space, now, 2 * VARINT + id.len());
    if b.member.kind == MemberKind::User {
        w.byte(1);
        w.bytes(id);
        w.byte(0);
    } else {
        w.pair(0, 1);
        w.bytes(id);
    }
    w.finish();
}

/// Any call but a lone plain beat: the common batch (plain beats of
/// users only) is written in one pass that gives up at the first guest
/// or beat with extras; the cursor's bytes only become part of `out` when
/// it finishes, so giving up leaves `out` as it was.
#[inline(never)]
fn many_beats(out: &mut Vec<u8>, version: u8, space: &SpaceName, now: Millis, beats: &[Heartbeat]) {
    if plain_users(out, version, space, now, beats) {
        return;
    }
    if beats.iter().all(Heartbeat::is_plain) {
        plain_beats(out, version, space, now, beats);
    } else {
        heartbeats(out, version, space, now, beats);
    }
}

/// `Change::PlainBeats` for a call whose beats are all plain users';
/// `false`, writing nothing, for any other.
#[inline]
fn plain_users(
    out: &mut Vec<u8>,
    version: u8,
    space: &SpaceName,
    now: Millis,
    beats: &[Heartbeat],
) -> bool {
    let mut w = Cursor::record(out, version, PLAIN_BEATS, space, now, VARINT);
    w.varint(beats.len() as u64);
    for b in beats {
        if b.member.kind != MemberKind::User || !b.is_plain() {
            return false;
        }
        plain_id(&mut w, b);
    }
    w.room(1);
    w.byte(0);
    w.finish();
    true
}

/// `Change::PlainBeats`, variant 10: space, now, the users' ids, the
/// guests' ids, for a call whose beats are all plain (the caller checked)
/// and not all users' (those went through `plain_users`): two passes.
#[inline]
fn plain_beats(
    out: &mut Vec<u8>,
    version: u8,
    space: &SpaceName,
    now: Millis,
    beats: &[Heartbeat],
) {
    let guests = beats
        .iter()
        .filter(|b| b.member.kind == MemberKind::Guest)
        .count();
    let mut w = Cursor::record(out, version, PLAIN_BEATS, space, now, VARINT);
    w.varint((beats.len() - guests) as u64);
    for b in beats.iter().filter(|b| b.member.kind == MemberKind::User) {
        plain_id(&mut w, b);
    }
    w.room(VARINT);
    w.varint(guests as u64);
    for b in beats.iter().filter(|b| b.member.kind == MemberKind::Guest) {
        plain_id(&mut w, b);
    }
    w.finish();
}

/// One plain beat's id: its length and bytes. Always inlined: as a call
/// it took the cursor's address, which kept the cursor in memory for the
/// whole batch (about 20 more instructions per member, callgrind).
#[inline(always)]
fn plain_id(w: &mut Cursor<'_>, b: &Heartbeat) {
    let id = b.member.id.as_str().as_bytes();
    w.room(VARINT + id.len());
    w.bytes(id);
}

/// The variant index of `Change::PlainBeats`.
const PLAIN_BEATS: u8 = 10;

/// A beat with an explicit time or metadata: rare, and kept out of the
/// plain beat's code, which every lone heartbeat runs through.
#[inline(never)]
fn beat_with_extras(w: &mut Cursor<'_>, b: &Heartbeat, id: &[u8]) {
    let meta = b.meta.as_ref().map_or(&[][..], |m| m.as_json().as_bytes());
    w.room(BEAT + id.len() + meta.len());
    w.key(&b.member, id);
    match b.at_ms {
        None => w.byte(0),
        Some(at) => {
            w.byte(1);
            w.varint(at);
        }
    }
    match b.meta {
        None => w.byte(0),
        Some(_) => {
            w.byte(1);
            w.bytes(meta);
        }
    }
}

/// `Change::Leave`, variant 1: space, time, members.
#[inline(never)]
pub(super) fn leave(
    out: &mut Vec<u8>,
    version: u8,
    space: &SpaceName,
    at: Millis,
    members: &[MemberKey],
) {
    let mut w = Cursor::record(out, version, 1, space, at, VARINT);
    w.varint(members.len() as u64);
    for m in members {
        let id = m.id.as_str().as_bytes();
        w.room(KEY + id.len());
        w.key(m, id);
    }
    w.finish();
}

/// Writes forward into `out`'s spare capacity through a raw pointer.
///
/// Every write must be covered by room made before it: [`Cursor::new`]
/// makes room for the record's head, [`Cursor::room`] for each item of
/// its list, from upper bounds on their sizes. A bound too small is a bug
/// the debug assertions catch; the tests pin the bytes to serde's for any
/// ids, times and metadata. Until [`Cursor::finish`], `out`'s length is
/// where the record starts, so a panic between leaves no half-written
/// bytes in it.
struct Cursor<'a> {
    out: &'a mut Vec<u8>,
    /// `out`'s buffer, refreshed whenever room is made.
    ptr: *mut u8,
    /// Bytes of `out` written, the record's so far included.
    len: usize,
    /// The end of the room made, for the debug assertions.
    end: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn new(out: &'a mut Vec<u8>, room: usize) -> Self {
        out.reserve(room);
        let len = out.len();
        Cursor {
            ptr: out.as_mut_ptr(),
            len,
            end: len + room,
            out,
        }
    }

    /// A record's head: the version, the change's variant, the space's
    /// name and a time, with room for `more` bytes after it. Always
    /// inlined: as a call, returning the cursor through memory cost a
    /// lone heartbeat's record about 25 instructions (callgrind).
    #[inline(always)]
    fn record(
        out: &'a mut Vec<u8>,
        version: u8,
        variant: u8,
        space: &SpaceName,
        time: Millis,
        more: usize,
    ) -> Self {
        let space = space.as_str().as_bytes();
        let mut w = Cursor::new(out, HEAD + space.len() + more);
        w.pair(version, variant);
        w.bytes(space);
        w.time(time);
        w
    }

    /// Makes room for `n` more bytes.
    #[inline]
    fn room(&mut self, n: usize) {
        if self.out.capacity() - self.len < n {
            self.ptr = grow(self.out, self.len, n);
        }
        self.end = self.len + n;
    }

    /// The written bytes become part of `out`.
    #[inline]
    fn finish(self) {
        // SAFETY: every byte up to `len` was written (each write is
        // within room made, so within the capacity), in order from the
        // old length.
        unsafe { self.out.set_len(self.len) };
    }

    #[inline]
    fn byte(&mut self, b: u8) {
        debug_assert!(self.len < self.end);
        // SAFETY: within the room made (see the type's doc).
        unsafe { self.ptr.add(self.len).write(b) };
        self.len += 1;
    }

    /// Two bytes in one store.
    #[inline]
    fn pair(&mut self, a: u8, b: u8) {
        debug_assert!(self.len + 2 <= self.end);
        // SAFETY: within the room made (see the type's doc).
        unsafe {
            self.ptr
                .add(self.len)
                .cast::<[u8; 2]>()
                .write_unaligned([a, b])
        };
        self.len += 2;
    }

    /// A LEB128 varint.
    #[inline]
    fn varint(&mut self, v: u64) {
        if v < 0x80 {
            self.byte(v as u8);
        } else {
            self.long_varint(v);
        }
    }

    /// A time in milliseconds since the epoch, as a varint. Every time from
    /// 1971 to 2109 is six bytes of varint (2^35 to 2^42 ms), written here
    /// without working out its length; others go the general way.
    #[inline(always)]
    fn time(&mut self, t: Millis) {
        if (1 << 35..1 << 42).contains(&t) {
            debug_assert!(self.len + 8 <= self.end);
            // As in `long_varint`, with the length known: six groups of
            // seven bits, the continuation bit on all but the last.
            let mut x = (t & 0x0FFF_FFFF) | ((t & 0x00FF_FFFF_F000_0000) << 4);
            x = (x & 0x0000_3FFF_0000_3FFF) | ((x & 0x0FFF_C000_0FFF_C000) << 2);
            x = (x & 0x007F_007F_007F_007F) | ((x & 0x3F80_3F80_3F80_3F80) << 1);
            // SAFETY: eight bytes within the room made for a varint (ten).
            unsafe {
                self.ptr
                    .add(self.len)
                    .cast::<u64>()
                    .write_unaligned((x | 0x0000_0080_8080_8080).to_le())
            };
            self.len += 6;
        } else {
            self.varint(t);
        }
    }

    /// A varint of two bytes or more. Below 2^56 (every time until the
    /// year 4253, and every length) it is one unaligned store of eight
    /// bytes, of which the varint's own count: the room for a varint is
    /// ten bytes.
    #[inline]
    fn long_varint(&mut self, v: u64) {
        if v < 1 << 56 {
            debug_assert!(self.len + 8 <= self.end);
            // Seven bits per byte, low group first: halves of 28 bits
            // into 32-bit lanes, then 14 into 16, then 7 into 8.
            let mut x = (v & 0x0FFF_FFFF) | ((v & 0x00FF_FFFF_F000_0000) << 4);
            x = (x & 0x0000_3FFF_0000_3FFF) | ((x & 0x0FFF_C000_0FFF_C000) << 2);
            x = (x & 0x007F_007F_007F_007F) | ((x & 0x3F80_3F80_3F80_3F80) << 1);
            // The varint's length is the number of bytes up to x's highest
            // nonzero one (at least two here); the continuation bit goes
            // on every byte but the last.
            let zeros = (x.leading_zeros() & !7) as usize;
            let n = 8 - zeros / 8;
            let more = 0x8080_8080_8080_8080u64 >> (8 + zeros);
            // SAFETY: eight bytes within the room made for a varint (ten).
            unsafe {
                self.ptr
                    .add(self.len)
                    .cast::<u64>()
                    .write_unaligned((x | more).to_le())
            };
            self.len += n;
        } else {
            debug_assert!(self.len + VARINT <= self.end);
            // SAFETY: ten bytes within the room made for a varint.
            self.len += unsafe { huge_varint(self.ptr.add(self.len), v) };
        }
    }

    /// A string or byte string: its length, then its bytes.
    #[inline]
    fn bytes(&mut self, s: &[u8]) {
        self.varint(s.len() as u64);
        debug_assert!(self.len + s.len() <= self.end);
        // SAFETY: within the room made (see the type's doc); `s` cannot
        // overlap spare capacity.
        unsafe { copy(self.ptr.add(self.len), s) };
        self.len += s.len();
    }

    /// `MemberKey { kind, id }`, the kind as its variant's index.
    #[inline]
    fn key(&mut self, key: &MemberKey, id: &[u8]) {
        self.byte(match key.kind {
            MemberKind::User => 0,
            MemberKind::Guest => 1,
        });
        self.bytes(id);
    }
}

/// Grows `out`, whose first `len` bytes are written (its length is still
/// the record's start), to hold `n` more; its new buffer. A free function,
/// as are the other rare paths, so that no call takes the cursor's
/// address and the cursor stays in registers.
#[cold]
#[inline(never)]
fn grow(out: &mut Vec<u8>, len: usize, n: usize) -> *mut u8 {
    // `reserve` counts from the length: ask for what is written as well.
    out.reserve(len - out.len() + n);
    out.as_mut_ptr()
}

/// A varint of nine or ten bytes (no time or length is this large) at
/// `dst`; the bytes written.
///
/// # Safety
/// `dst` is valid for ten bytes of writes.
#[cold]
#[inline(never)]
unsafe fn huge_varint(dst: *mut u8, mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        // SAFETY: a varint is at most ten bytes (the caller's promise).
        unsafe { dst.add(n).write(v as u8 | 0x80) };
        v >>= 7;
        n += 1;
    }
    // SAFETY: as above.
    unsafe { dst.add(n).write(v as u8) };
    n + 1
}

/// Copies `src` to `dst`: the short ids and names of the hot path as two
/// overlapping moves instead of a call to `memcpy`.
///
/// # Safety
/// `dst` is valid for `src.len()` bytes of writes and does not overlap
/// `src`.
#[inline]
unsafe fn copy(dst: *mut u8, src: &[u8]) {
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY: every read is within `src` and every write within the first
    // `n` bytes of `dst` (the caller's promise).
    unsafe {
        if (8..=16).contains(&n) {
            move_ends::<8>(s, dst, n);
        } else if (4..8).contains(&n) {
            move_ends::<4>(s, dst, n);
        } else {
            copy_other(dst, src);
        }
    }
}

/// [`copy`] for lengths below 4 or above 16, out of line.
///
/// # Safety
/// As [`copy`].
#[inline(never)]
unsafe fn copy_other(dst: *mut u8, src: &[u8]) {
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY: as in `copy`.
    unsafe {
        if (17..=32).contains(&n) {
            move_ends::<16>(s, dst, n);
        } else if n > 32 {
            std::ptr::copy_nonoverlapping(s, dst, n);
        } else {
            for i in 0..n {
                dst.add(i).write(*s.add(i));
            }
        }
    }
}

/// Copies `n` bytes, `N <= n <= 2 * N`, as two moves of `N` that overlap
/// in the middle: the first `N` bytes and the last `N`.
///
/// # Safety
/// `src` is valid for `n` bytes of reads, `dst` for `n` bytes of writes.
#[inline(always)]
unsafe fn move_ends<const N: usize>(src: *const u8, dst: *mut u8, n: usize) {
    debug_assert!((N..=2 * N).contains(&n));
    // SAFETY: both moves are within the first `n` bytes of each (the
    // caller's promise), as `n >= N`.
    unsafe {
        move_word::<N>(src, dst);
        move_word::<N>(src.add(n - N), dst.add(n - N));
    }
}

/// Moves exactly `N` bytes, as one load and one store.
///
/// # Safety
/// `src` is valid for `N` bytes of reads, `dst` for `N` bytes of writes.
#[inline]
unsafe fn move_word<const N: usize>(src: *const u8, dst: *mut u8) {
    // SAFETY: the caller's promise.
    unsafe {
        dst.cast::<[u8; N]>()
            .write_unaligned(src.cast::<[u8; N]>().read_unaligned())
    };
}

#[cfg(test)]
mod tests {
    use super::Cursor;

    /// Postcard's varint, the plain way.
    fn reference(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    #[test]
    fn varints_are_leb128_at_every_length() {
        let mut values = vec![0, u64::MAX, 1_700_000_000_000];
        for b in 1..64 {
            values.extend([(1u64 << b) - 1, 1u64 << b, (1u64 << b) + 1]);
        }
        for v in values {
            let mut out = vec![9];
            let mut w = Cursor::new(&mut out, super::VARINT);
            w.varint(v);
            w.finish();
            assert_eq!(&out[1..], &reference(v)[..], "{v}");
            // A time, whose six-byte range has a path of its own.
            let mut out = vec![9];
            let mut w = Cursor::new(&mut out, super::VARINT);
            w.time(v);
            w.finish();
            assert_eq!(&out[1..], &reference(v)[..], "time {v}");
        }
    }

    #[test]
    fn bytes_of_every_length_are_copied_whole() {
        let src: Vec<u8> = (0..=255u8).collect();
        for n in 0..=256 {
            let mut out = vec![7];
            let mut w = Cursor::new(&mut out, super::VARINT + n);
            w.bytes(&src[..n]);
            w.finish();
            let mut want = vec![7];
            want.extend(reference(n as u64));
            want.extend(&src[..n]);
            assert_eq!(out, want, "{n}");
        }
    }

    #[test]
    fn room_grows_the_buffer_mid_record_and_keeps_what_was_written() {
        let mut out = Vec::with_capacity(4);
        out.push(1);
        let mut w = Cursor::new(&mut out, 3);
        w.pair(2, 3);
        w.room(1000);
        w.bytes(&[5; 300]);
        w.finish();
        assert_eq!(&out[..4], &[1, 2, 3, 0xac]);
        assert_eq!(out.len(), 1 + 2 + 2 + 300);
        assert!(out[5..].iter().all(|&b| b == 5));
    }
}
