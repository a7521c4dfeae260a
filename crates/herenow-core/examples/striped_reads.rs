//! What a read costs on a striped space: every read locks each stripe
//! and merges (ARCHITECTURE.md, "Striping"). One space of `MEMBERS`
//! members (default 100,000, all present), split over 1, 2, 4 and 8
//! stripes (`STRIPES` to choose), one thread, no writers; the median of
//! `ROUNDS` calls of each read.
//!
//! `cargo run --release -p herenow-core --example striped_reads`

use std::sync::Arc;
use std::time::{Duration, Instant};

use herenow_core::{
    Heartbeat, ListQuery, ManualClock, MemberId, MemberKey, MemoryStore, Order, PresenceStore,
    SpaceConfig, SpaceName,
};

const T0: u64 = 1_700_000_000_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn user(i: usize) -> MemberKey {
    MemberKey::user(MemberId::new(&format!("user-{i}")).unwrap())
}

/// The median time of `rounds` runs of `f`.
fn median<F: Future>(
    rt: &tokio::runtime::Runtime,
    rounds: usize,
    mut f: impl FnMut() -> F,
) -> Duration {
    let mut took: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            rt.block_on(f());
            started.elapsed()
        })
        .collect();
    took.sort_unstable();
    took[rounds / 2]
}

fn main() {
    let members = env("MEMBERS", 100_000);
    let rounds = env("ROUNDS", 200);
    let stripes: Vec<usize> = std::env::var("STRIPES")
        .unwrap_or_else(|_| "1 2 4 8".into())
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let space = SpaceName::new("big").unwrap();
    let some: Vec<MemberKey> = (0..100).map(|i| user(i * 997 % members)).collect();
    let friends: Vec<MemberKey> = (0..500).map(|i| user(i * 389 % members)).collect();
    println!("one space of {members} members, median of {rounds} calls (us):");
    println!(
        "  stripes | page of 100, recent | page of 100, by id | count | status of 100 | online among 500 (100) | subscribe ({} kept)",
        herenow_core::limits::MAX_SNAPSHOT
    );
    for n in stripes {
        let clock = ManualClock::new(T0);
        let store = MemoryStore::new(Arc::new(clock), SpaceConfig::default()).with_space_stripes(n);
        let beats: Vec<Heartbeat> = (0..members)
            .map(|i| Heartbeat {
                member: user(i),
                at_ms: Some(T0 - 50_000 + (i as u64 * 50_000) / members as u64),
                meta: None,
            })
            .collect();
        for chunk in beats.chunks(10_000) {
            rt.block_on(store.heartbeat(&space, chunk)).unwrap();
        }
        let page = |order| ListQuery {
            order: Some(order),
            limit: 100,
            ..ListQuery::default()
        };
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let recent = median(&rt, rounds, || async {
            store.list(&space, &page(Order::Recent)).await.unwrap();
        });
        let by_id = median(&rt, rounds.min(20), || async {
            store.list(&space, &page(Order::Id)).await.unwrap();
        });
        let count = median(&rt, rounds, || async {
            store.count(&space, None).await.unwrap();
        });
        let status = median(&rt, rounds, || async {
            store.status(&space, &some).await.unwrap();
        });
        let among = median(&rt, rounds, || async {
            store
                .online_among(&space, &friends, None, 100)
                .await
                .unwrap();
        });
        let subscribe = median(&rt, rounds.min(50), || async {
            store.subscribe(&space).await.unwrap();
        });
        println!(
            "  {n} | {:.1} | {:.0} | {:.2} | {:.1} | {:.1} | {:.0}",
            us(recent),
            us(by_id),
            us(count),
            us(status),
            us(among),
            us(subscribe)
        );
    }
}
