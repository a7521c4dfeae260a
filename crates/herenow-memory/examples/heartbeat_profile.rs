//! A fixed workload for profiling the heartbeat path under a cache
//! simulator: 1M members, then `ROUNDS` heartbeats to random members.
//!
//! `valgrind --tool=cachegrind --cache-sim=yes \
//!   target/release/examples/heartbeat_profile [fill|beat|batch]`
//!
//! `fill` stops after building the space, so the difference between a
//! run and it is the heartbeats alone: `beat` sends them one at a time
//! ([`Space::touch`]), `batch` in batches of 1,000 ([`Space::heartbeat`]).
//! Outside the simulator it also prints the time per heartbeat, the
//! fastest of `REPEAT` passes (the minimum resists other load on the
//! machine better than a mean); in `batch` that includes building each
//! batch (cloning 1,000 ids).

use std::time::Instant;

use herenow_core::{Heartbeat, MemberId, MemberKey, MemberKind, SpaceConfig, SpaceName};
use herenow_memory::Space;

const N: usize = 1_000_000;
const ROUNDS: usize = 2_000_000;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "beat".into());
    let repeat: usize = std::env::var("REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let now = 1_700_000_000_000u64;
    let ids: Vec<MemberId> = (0..N)
        .map(|i| MemberId::new(&format!("user:{i:07}")).unwrap())
        .collect();
    let mut s = Space::new(SpaceName::new("p").unwrap(), SpaceConfig::default(), now);
    for (c, chunk) in ids.chunks(10_000).enumerate() {
        let beats: Vec<Heartbeat> = chunk
            .iter()
            .enumerate()
            .map(|(i, id)| Heartbeat {
                member: MemberKey::user(id.clone()),
                at_ms: Some(now - 600_000 + ((c * 10_000 + i) as u64 * 600_000 / N as u64)),
                meta: None,
            })
            .collect();
        s.heartbeat(&beats, now).unwrap();
    }
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut random = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % N as u64) as usize
    };
    // The ids in the order they are sent, read front to back as a server
    // reads a parsed request (built in every mode, `fill` included, so the
    // difference of two runs is the heartbeats alone).
    let sent: Vec<MemberId> = (0..ROUNDS).map(|_| ids[random()].clone()).collect();
    let mut best = f64::INFINITY;
    let mut clock = now;
    for _ in 0..repeat {
        let start = Instant::now();
        match mode.as_str() {
            "beat" => {
                for (r, id) in sent.iter().enumerate() {
                    s.touch(MemberKind::User, id, clock + (r as u64 >> 6));
                }
            }
            "batch" => {
                let mut batch = Vec::with_capacity(1000);
                for (r, ids) in sent.chunks(1000).enumerate() {
                    batch.clear();
                    batch.extend(
                        ids.iter()
                            .map(|id| Heartbeat::now(MemberKey::user(id.clone()))),
                    );
                    s.heartbeat(&batch, clock + ((r as u64 * 1000) >> 6))
                        .unwrap();
                }
            }
            _ => break,
        }
        best = best.min(start.elapsed().as_nanos() as f64 / ROUNDS as f64);
        // The clock goes on as it went: 1 ms per 64 beats (per batch).
        clock += (ROUNDS as u64 >> 6) + 1;
    }
    println!("{} members", s.len());
    if best.is_finite() {
        println!("{mode}: {best:.0} ns per heartbeat (fastest of {repeat})");
    }
}
