//! Issue 13, "Fuzz the parsers": no decoder allocates by a length it has
//! not checked against the bytes there. Lengths in journal records and
//! snapshot bodies claiming 4 GiB are refused (the `fuzz` tests beside
//! each decoder assert the errors); this measures what refusing them
//! allocates, with a counting allocator, so a preallocation sized by a
//! claimed length would show as gigabytes here.
//!
//! One test in its own binary: the allocator counts every thread, and
//! nothing else runs beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use herenow_core::cursor::{Cursor, IdCursor};
use herenow_core::{ManualClock, Order, SpaceConfig};
use herenow_memory::MemoryStore;
use herenow_memory::changes::Change;

/// The system allocator, counting bytes in use and their peak.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = IN_USE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes in use above the start while `f` runs.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = IN_USE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// `body` as a version 4 snapshot, checksum and all.
fn snapshot(body: &[u8]) -> Vec<u8> {
    let mut out = b"herenow snapshot\n".to_vec();
    out.extend_from_slice(&4u32.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// Refusing any claim of 4 GiB (or 2^64) costs at most this: serde caps a
/// sequence's preallocation at 1 MiB whatever its claimed length.
const BOUND: usize = 2 << 20;

#[test]
fn issue_13_claimed_lengths_are_not_allocated() {
    let huge = u64::from(u32::MAX);
    let mut records = Vec::new();
    // Heartbeats in space "a" at 0 claiming 4 Gi beats (one whole beat
    // there, then nothing); a space name of 4 GiB; a friend list of 4 Gi
    // ids; outbox acks of 2^64 - 1 ids.
    for (prefix, claim, rest) in [
        (&[1u8, 0, 1, b'a', 0][..], huge, &[0u8, 1, b'b', 0, 0][..]),
        (&[1, 0][..], huge, &b"abc"[..]),
        (&[1, 3, 1, b'a'][..], huge, &b"abc"[..]),
        (&[1, 8][..], u64::MAX, &b"abc"[..]),
    ] {
        let mut r = prefix.to_vec();
        varint(claim, &mut r);
        r.extend_from_slice(rest);
        records.push(r);
    }
    for r in &records {
        let (decoded, peak) = peak_of(|| Change::decode(r));
        let e = decoded.expect_err("a record claiming 4 GiB decoded");
        assert!(peak < BOUND, "decoding {r:?} allocated {peak} bytes");
        println!("journal record {r:?}: {e}; {peak} bytes at peak");
    }

    let store = MemoryStore::new(
        Arc::new(ManualClock::new(1_700_000_000_000)),
        SpaceConfig::default(),
    );
    let mut taken = Vec::new();
    varint(1_700_000_000_000, &mut taken);
    let mut bodies = Vec::new();
    // 4 Gi spaces; a space name of 4 GiB; 4 Gi friend sets; 2^64 - 1
    // outbox events after an empty store.
    for (tail, claim) in [
        (&[][..], huge),
        (&[1][..], huge),
        (&[0][..], huge),
        (&[0, 0, 0, 0, 0][..], u64::MAX),
    ] {
        let mut b = taken.clone();
        b.extend_from_slice(tail);
        varint(claim, &mut b);
        bodies.push(snapshot(&b));
    }
    for b in &bodies {
        let (restored, peak) = peak_of(|| store.restore(b));
        let e = restored.expect_err("a snapshot claiming 4 GiB restored");
        assert!(peak < BOUND, "restoring allocated {peak} bytes");
        println!("snapshot body claiming 4 GiB: {e}; {peak} bytes at peak");
    }

    let cursor = format!("i.u.{}", "61".repeat(1 << 20));
    let (decoded, peak) = peak_of(|| Cursor::decode(&cursor, Order::Id));
    assert!(decoded.is_err() && IdCursor::decode(&cursor).is_none());
    assert!(peak < 1024, "a 2 MiB cursor allocated {peak} bytes");
    println!("2 MiB cursor: refused, {peak} bytes at peak");
}
