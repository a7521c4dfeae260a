//! postcard's encoding of the changes on the hot path, written by hand:
//! one heartbeat call or leave per record, so every instruction here is
//! paid per call. The format is postcard's (unsigned integers, lengths
//! and enum variants as LEB128 varints, a string as its length and bytes,
//! an option as a 0/1 tag and the value, a struct as its fields in
//! order), and the tests pin these bytes to serde's encoding of the owned
//! [`Change`](super::Change).
//!
//! Room is reserved from upper bounds on sizes (the head once, then each
//! beat or member), so a record grows `out` at most once per item, and
//! every byte is then a push or a slice copy into the `Vec`. The
//! `journal_record` benchmark in `benches/engine.rs` measures it.

use herenow_core::id::{MemberKey, MemberKind, SpaceName};
use herenow_core::time::Millis;
use herenow_core::values::Heartbeat;

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
/// its record: member, `at_ms`, `meta` (see `heartbeat_records` in
/// `mod.rs`).
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
    let mut w = RecordWriter::record(out, version, 0, space, now, VARINT);
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

/// The heartbeats of one call as a record: `Change::PlainBeats` when every
/// beat is plain ([`Heartbeat::is_plain`]), else `Change::Heartbeats`.
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
    let mut w = RecordWriter::record(out, version, PLAIN_BEATS, space, now, 2 * VARINT + id.len());
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
/// or beat with extras, and giving up takes back what it wrote, leaving
/// `out` as it was.
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
    let mut w = RecordWriter::record(out, version, PLAIN_BEATS, space, now, VARINT);
    w.varint(beats.len() as u64);
    for b in beats {
        if b.member.kind != MemberKind::User || !b.is_plain() {
            w.abandon();
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
    let mut w = RecordWriter::record(out, version, PLAIN_BEATS, space, now, VARINT);
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

/// One plain beat's id: its length and bytes. Always inlined: it is a
/// few instructions, paid once per member of a batch.
#[inline(always)]
fn plain_id(w: &mut RecordWriter<'_>, b: &Heartbeat) {
    let id = b.member.id.as_str().as_bytes();
    w.room(VARINT + id.len());
    w.bytes(id);
}

/// The variant index of `Change::PlainBeats`.
const PLAIN_BEATS: u8 = 10;

/// A beat with an explicit time or metadata: rare, and kept out of the
/// plain beat's code, which every lone heartbeat runs through.
#[inline(never)]
fn beat_with_extras(w: &mut RecordWriter<'_>, b: &Heartbeat, id: &[u8]) {
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
    let mut w = RecordWriter::record(out, version, 1, space, at, VARINT);
    w.varint(members.len() as u64);
    for m in members {
        let id = m.id.as_str().as_bytes();
        w.room(KEY + id.len());
        w.key(m, id);
    }
    w.finish();
}

/// Appends one record to `out` (room reserved as the module doc says).
/// The record's bytes are in `out` as they are written; a writer that gives
/// up part way ([`RecordWriter::abandon`]) takes them back. Nothing between the
/// first byte and [`RecordWriter::finish`] can fail: only allocation could, and
/// it aborts.
struct RecordWriter<'a> {
    out: &'a mut Vec<u8>,
    /// `out`'s length before the record: where [`RecordWriter::abandon`] cuts.
    start: usize,
}

impl<'a> RecordWriter<'a> {
    #[inline]
    fn new(out: &'a mut Vec<u8>, room: usize) -> Self {
        out.reserve(room);
        let start = out.len();
        RecordWriter { out, start }
    }

    /// A record's head: the version, the change's variant, the space's
    /// name and a time, with room for `more` bytes after it. Always
    /// inlined: it runs once per record, the lone heartbeat's included,
    /// and as a call the writer would be returned through memory.
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
        let mut w = RecordWriter::new(out, HEAD + space.len() + more);
        w.pair(version, variant);
        w.bytes(space);
        w.time(time);
        w
    }

    /// Makes room for `n` more bytes.
    #[inline]
    fn room(&mut self, n: usize) {
        self.out.reserve(n);
    }

    /// The record is complete.
    #[inline]
    fn finish(self) {}

    /// Takes back every byte of the record written so far.
    #[inline]
    fn abandon(self) {
        self.out.truncate(self.start);
    }

    #[inline]
    fn byte(&mut self, b: u8) {
        self.out.push(b);
    }

    /// Two bytes in one copy.
    #[inline]
    fn pair(&mut self, a: u8, b: u8) {
        self.out.extend_from_slice(&[a, b]);
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
            // As in `long_varint`, with the length known: six groups of
            // seven bits, the continuation bit on all but the last.
            let bytes = (spread(t) | 0x0000_0080_8080_8080).to_le_bytes();
            self.out.extend_from_slice(&bytes[..6]);
        } else {
            self.varint(t);
        }
    }

    /// A varint of two bytes or more. Below 2^56 (every time until the
    /// year 4253, and every length) its groups of seven bits are spread
    /// over a word at once and the varint's bytes copied from it.
    #[inline]
    fn long_varint(&mut self, v: u64) {
        if v < 1 << 56 {
            let x = spread(v);
            // The varint's length is the number of bytes up to x's highest
            // nonzero one (at least two here); the continuation bit goes
            // on every byte but the last.
            let zeros = (x.leading_zeros() & !7) as usize;
            let n = 8 - zeros / 8;
            let more = 0x8080_8080_8080_8080u64 >> (8 + zeros);
            self.out.extend_from_slice(&(x | more).to_le_bytes()[..n]);
        } else {
            huge_varint(self.out, v);
        }
    }

    /// A string or byte string: its length, then its bytes.
    #[inline]
    fn bytes(&mut self, s: &[u8]) {
        self.varint(s.len() as u64);
        self.out.extend_from_slice(s);
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

/// `v`, below 2^56, with each group of seven bits (low group first) in a
/// byte of its own, low byte first: halves of 28 bits into 32-bit lanes,
/// then 14 into 16, then 7 into 8.
#[inline(always)]
fn spread(v: u64) -> u64 {
    let mut x = (v & 0x0FFF_FFFF) | ((v & 0x00FF_FFFF_F000_0000) << 4);
    x = (x & 0x0000_3FFF_0000_3FFF) | ((x & 0x0FFF_C000_0FFF_C000) << 2);
    (x & 0x007F_007F_007F_007F) | ((x & 0x3F80_3F80_3F80_3F80) << 1)
}

/// A varint of nine or ten bytes (no time or length is this large),
/// appended to `out`. Out of line: no record on the hot path has one.
#[cold]
#[inline(never)]
fn huge_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::RecordWriter;

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
            let mut w = RecordWriter::new(&mut out, super::VARINT);
            w.varint(v);
            w.finish();
            assert_eq!(&out[1..], &reference(v)[..], "{v}");
            // A time, whose six-byte range has a path of its own.
            let mut out = vec![9];
            let mut w = RecordWriter::new(&mut out, super::VARINT);
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
            let mut w = RecordWriter::new(&mut out, super::VARINT + n);
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
        let mut w = RecordWriter::new(&mut out, 3);
        w.pair(2, 3);
        w.room(1000);
        w.bytes(&[5; 300]);
        w.finish();
        assert_eq!(&out[..4], &[1, 2, 3, 0xac]);
        assert_eq!(out.len(), 1 + 2 + 2 + 300);
        assert!(out[5..].iter().all(|&b| b == 5));
    }
}
