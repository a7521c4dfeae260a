//! Memory per member: fills one space with 1M members and reports the
//! engine's heap estimate and the process's resident-set growth.
//!
//! `cargo run --release -p herenow-memory --example memory [N] [ID_PREFIX]`

use herenow_core::{Heartbeat, MemberId, MemberKey, SpaceConfig, SpaceName};
use herenow_memory::Space;

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let prefix = args.next().unwrap_or_else(|| "user:".into());
    let now = 1_700_000_000_000u64;
    // Build the heartbeats first so their memory is not counted.
    let beats: Vec<Heartbeat> = (0..n)
        .map(|i| Heartbeat {
            member: MemberKey::user(MemberId::new(&format!("{prefix}{i:07}")).unwrap()),
            at_ms: Some(now - 600_000 + (i as u64 * 600_000 / n as u64)),
            meta: None,
        })
        .collect();
    let id_len = beats[0].member.id.as_str().len();
    let before = rss_bytes();
    let mut s = Space::new(SpaceName::new("mem").unwrap(), SpaceConfig::default(), now);
    for chunk in beats.chunks(10_000) {
        s.heartbeat(chunk, now).unwrap();
        // A store hands each write's notes of joins to its last-seen table
        // (measured on its own: `remembered_memory`); a bare space keeps
        // them until taken, which is not the engine's memory.
        drop(s.take_sightings());
    }
    let after = rss_bytes();
    println!("members: {n}, id length: {id_len} bytes");
    println!(
        "engine heap estimate: {:.1} bytes/member",
        s.heap_bytes() as f64 / n as f64
    );
    println!(
        "resident set growth:  {:.1} bytes/member",
        (after - before) as f64 / n as f64
    );
}
