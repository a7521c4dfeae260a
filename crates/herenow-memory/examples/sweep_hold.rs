//! How long expiry holds a space: 1M members last seen over 10 minutes, the
//! clock moved past their retention, then `tick` in steps of `TICK_BUDGET`
//! until all are gone. Prints the median and longest hold.
//!
//! `cargo run --release -p herenow-memory --example sweep_hold`

use std::time::Instant;

use herenow_core::{Heartbeat, MemberId, MemberKey, SpaceConfig, SpaceName};
use herenow_memory::{Space, TICK_BUDGET};

fn main() {
    let n = 1_000_000u64;
    let now = 1_700_000_000_000u64;
    let mut s = Space::new(
        SpaceName::new("sweep").unwrap(),
        SpaceConfig::default(),
        now,
    );
    let beats: Vec<Heartbeat> = (0..n)
        .map(|i| Heartbeat {
            member: MemberKey::user(MemberId::new(&format!("user:{i:07}")).unwrap()),
            at_ms: Some(now - 600_000 + i * 600_000 / n),
            meta: None,
        })
        .collect();
    for chunk in beats.chunks(10_000) {
        s.heartbeat(chunk, now).unwrap();
    }
    // Everyone is past the 15-minute retention.
    let later = now + 16 * 60_000;
    let mut holds = Vec::new();
    loop {
        let started = Instant::now();
        let work = s.tick(later, TICK_BUDGET);
        // As `MemoryStore::tick` does: the hold ends here, and what a
        // compaction let go of is freed after it.
        let retired = s.take_retired();
        holds.push(started.elapsed().as_micros() as u64);
        drop(retired);
        if !work.more {
            break;
        }
    }
    assert!(s.is_empty());
    holds.sort_unstable();
    println!(
        "{} steps of at most {TICK_BUDGET} members: median hold {} us, p99 {} us, longest {} us",
        holds.len(),
        holds[holds.len() / 2],
        holds[holds.len() * 99 / 100],
        holds[holds.len() - 1]
    );
}
