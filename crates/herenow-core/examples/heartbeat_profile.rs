//! A fixed workload for profiling the heartbeat path under a cache
//! simulator: 1M members, then `ROUNDS` heartbeats to random members.
//!
//! `valgrind --tool=cachegrind --cache-sim=yes \
//!   target/release/examples/heartbeat_profile [fill|beat]`
//!
//! `fill` stops after building the space, so the difference between the
//! two runs is the heartbeats alone.

use herenow_core::memory::Space;
use herenow_core::{Heartbeat, MemberId, MemberKey, MemberKind, SpaceConfig, SpaceName};

const N: usize = 1_000_000;
const ROUNDS: usize = 2_000_000;

fn main() {
    let beat = std::env::args().nth(1).as_deref() != Some("fill");
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
    if beat {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for r in 0..ROUNDS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.touch(
                MemberKind::User,
                &ids[(x % N as u64) as usize],
                now + (r as u64 >> 6),
            );
        }
    }
    println!("{} members", s.len());
}
