//! Memory per remembered user, and the sweep's cost, in the embedded
//! store. `scripts/bench-remembered.sh` runs it beside Redis's cost for a
//! sorted set holding the same ids and times.
//!
//! N users (default 10 million, 12-byte ids) heartbeat into one space and
//! leave: all of them are then remembered. Reported: the `Seen` table's
//! bytes per remembered user (what remembering costs: the id itself is
//! not stored), the process's resident-set growth per user from before the
//! heartbeats to after the leaves and the compaction of the emptied space,
//! and, once past the horizon, how long the sweep's rounds take.
//!
//! `cargo run --release -p herenow-memory --example remembered_memory [N]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use herenow_core::{
    Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName,
};
use herenow_memory::MemoryStore;

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn id(i: usize) -> String {
    format!("user:{i:07}")
}

const T0: u64 = 1_700_000_000_000;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let clock = ManualClock::new(T0);
    let store = MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default());
    let space = SpaceName::new("mem").unwrap();
    let before = rss_bytes();
    for start in (0..n).step_by(10_000) {
        let keys: Vec<MemberKey> = (start..(start + 10_000).min(n))
            .map(|i| MemberKey::user(MemberId::new(&id(i)).unwrap()))
            .collect();
        let beats: Vec<Heartbeat> = keys.iter().cloned().map(Heartbeat::now).collect();
        store.heartbeat(&space, &beats).await.unwrap();
        store.leave(&space, &keys).await.unwrap();
    }
    // Let background work compact the emptied space.
    for _ in 0..4 {
        store.tick().await.unwrap();
    }
    let after = rss_bytes();
    let (entries, bytes) = store.seen_usage();
    println!("remembered users: {entries} (ids of {} bytes)", id(0).len());
    println!(
        "Seen table: {:.1} bytes per remembered user ({bytes} bytes)",
        bytes as f64 / entries as f64
    );
    println!(
        "resident set growth: {:.1} bytes per remembered user",
        after.saturating_sub(before) as f64 / n as f64
    );

    // Past the horizon: how long each round of background work takes
    // while the sweep clears the table.
    clock.advance(Duration::from_millis(SpaceConfig::default().remember_ms));
    let (mut rounds, mut longest, mut total) = (0u32, Duration::ZERO, Duration::ZERO);
    let mut holds = Vec::new();
    let started = Instant::now();
    while store.seen_usage().0 > 0 && started.elapsed() < Duration::from_secs(600) {
        let t = Instant::now();
        let report = store.tick().await.unwrap();
        holds.push(report.max_hold_us);
        let took = t.elapsed();
        longest = longest.max(took);
        total += took;
        rounds += 1;
    }
    holds.sort_unstable();
    let hold = |q: f64| holds[((holds.len() - 1) as f64 * q) as usize];
    println!(
        "sweep: {rounds} rounds to forget them all; a round takes {:.2} ms on average, \
         {:.2} ms at most",
        total.as_secs_f64() * 1e3 / f64::from(rounds.max(1)),
        longest.as_secs_f64() * 1e3,
    );
    println!(
        "longest hold of one shard per round: median {} us, p99 {} us, max {} us",
        hold(0.5),
        hold(0.99),
        hold(1.0)
    );
}
