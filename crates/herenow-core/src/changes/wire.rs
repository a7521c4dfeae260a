//! postcard's encoding of the changes on the hot path, written by hand:
//! one heartbeat call or leave per record, so every instruction here is
//! paid per call. The format is postcard's (unsigned integers, lengths
//! and enum variants as LEB128 varints, a string as its length and bytes,
//! an option as a 0/1 tag and the value, a struct as its fields in
//! order), and the tests pin these bytes to serde's encoding of the owned
//! [`Change`](super::Change).
//!
//! A record's room is reserved once, from an upper bound on its size, and
//! written through a cursor over the spare capacity, so no byte pays a
//! growth check or a zeroing.

use std::mem::MaybeUninit;

use crate::id::{MemberKey, MemberKind, SpaceName};
use crate::time::Millis;
use crate::values::Heartbeat;

/// The most bytes a varint of a `u64` takes.
const VARINT: usize = 10;

/// Most bytes of a record before its list, the space's name apart:
/// version, variant, the name's length, the time and the list's length.
const HEAD: usize = 2 + 3 * VARINT;

/// Most bytes of one member key, its id apart.
const KEY: usize = 1 + VARINT;

/// Most bytes of one beat, its id and metadata apart: a member key, an
/// optional time and optional text.
const BEAT: usize = KEY + 1 + VARINT + 1 + VARINT;

/// `Change::Heartbeats`, variant 0: space, now, then each beat as
/// `Beat { member, at_ms, meta }`.
pub(super) fn heartbeats(
    out: &mut Vec<u8>,
    version: u8,
    space: &SpaceName,
    now: Millis,
    beats: &[Heartbeat],
) {
    let texts: usize = beats
        .iter()
        .map(|b| b.member.id.as_str().len() + b.meta.as_ref().map_or(0, |m| m.as_json().len()))
        .sum();
    let bound = HEAD + space.as_str().len() + beats.len() * BEAT + texts;
    with_room(out, bound, |w| {
        w.byte(version);
        w.byte(0);
        w.str(space.as_str());
        w.varint(now);
        w.varint(beats.len() as u64);
        for b in beats {
            w.key(&b.member);
            match b.at_ms {
                None => w.byte(0),
                Some(at) => {
                    w.byte(1);
                    w.varint(at);
                }
            }
            match &b.meta {
                None => w.byte(0),
                Some(meta) => {
                    w.byte(1);
                    w.str(meta.as_json());
                }
            }
        }
    });
}

/// `Change::Leave`, variant 1: space, time, members.
pub(super) fn leave(
    out: &mut Vec<u8>,
    version: u8,
    space: &SpaceName,
    at: Millis,
    members: &[MemberKey],
) {
    let ids: usize = members.iter().map(|m| m.id.as_str().len()).sum();
    let bound = HEAD + space.as_str().len() + members.len() * KEY + ids;
    with_room(out, bound, |w| {
        w.byte(version);
        w.byte(1);
        w.str(space.as_str());
        w.varint(at);
        w.varint(members.len() as u64);
        for m in members {
            w.key(m);
        }
    });
}

/// Runs `write` over at least `bound` bytes of spare capacity of `out`,
/// then makes what it wrote part of `out`.
fn with_room(out: &mut Vec<u8>, bound: usize, write: impl FnOnce(&mut Cursor<'_>)) {
    out.reserve(bound);
    let start = out.len();
    let mut w = Cursor {
        buf: out.spare_capacity_mut(),
        at: 0,
    };
    write(&mut w);
    let len = start + w.at;
    // SAFETY: `Cursor` writes its bytes in order from the start of the
    // spare capacity and counts them in `at`, so the `at` bytes after the
    // old length are initialized; and `at` is within the capacity,
    // since every write indexes the spare slice with bounds checks.
    unsafe { out.set_len(len) };
}

/// Writes forward through spare capacity; running past it is a bug in the
/// bound, and panics (the journal then drops the half-written record).
struct Cursor<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    at: usize,
}

impl Cursor<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        self.buf[self.at].write(b);
        self.at += 1;
    }

    #[inline]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte(v as u8 | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    #[inline]
    fn str(&mut self, s: &str) {
        self.varint(s.len() as u64);
        let end = self.at + s.len();
        copy(&mut self.buf[self.at..end], s.as_bytes());
        self.at = end;
    }

    /// `MemberKey { kind, id }`, the kind as its variant's index.
    #[inline]
    fn key(&mut self, key: &MemberKey) {
        self.byte(match key.kind {
            MemberKind::User => 0,
            MemberKind::Guest => 1,
        });
        self.str(key.id.as_str());
    }
}

/// Copies `src` into `dst` (of the same length), the short ids and names
/// of the hot path as two overlapping words instead of a call to `memcpy`.
#[inline]
fn copy(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    let n = src.len();
    if (8..=16).contains(&n) {
        word::<8>(&mut dst[..8], &src[..8]);
        word::<8>(&mut dst[n - 8..], &src[n - 8..]);
    } else if (4..8).contains(&n) {
        word::<4>(&mut dst[..4], &src[..4]);
        word::<4>(&mut dst[n - 4..], &src[n - 4..]);
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            d.write(*s);
        }
    }
}

/// Copies exactly `N` bytes, as one move.
#[inline]
fn word<const N: usize>(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    let dst: &mut [MaybeUninit<u8>; N] = dst.try_into().expect("N bytes");
    let src: [u8; N] = src.try_into().expect("N bytes");
    *dst = src.map(MaybeUninit::new);
}
