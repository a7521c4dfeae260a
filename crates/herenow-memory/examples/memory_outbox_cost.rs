//! What the webhook outbox costs the memory store's heartbeats: the same
//! work into a store whose outbox is closed and one whose outbox is open,
//! rounds alternating so the machine's noise hits both alike. Two
//! workloads, in batches of 1,000 members: steady heartbeats of members
//! already present (no event: the common case) and churn (every member
//! leaves, then joins again: two events each, captured by the open store).
//! After each round the open store's events are claimed and acknowledged,
//! as a server's delivery would (timed apart: the claim path's own rate).
//!
//! ```sh
//! cargo run --release -p herenow-memory --example memory_outbox_cost
//! ROUNDS=21 cargo run --release -p herenow-memory --example memory_outbox_cost
//! ```

use std::sync::Arc;
use std::time::Instant;

use herenow_core::outbox::OutboxOptions;
use herenow_core::{
    Heartbeat, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName, SystemClock,
    WebhookOutbox,
};
use herenow_memory::MemoryStore;

const MEMBERS: usize = 100_000;
const BATCH: usize = 1_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(11);
    let closed = MemoryStore::new(Arc::new(SystemClock), SpaceConfig::default());
    let open = MemoryStore::new(Arc::new(SystemClock), SpaceConfig::default());
    open.outbox_open(OutboxOptions {
        max_events: 1_000_000,
        ..OutboxOptions::default()
    })
    .await
    .unwrap();
    let space = SpaceName::new("load").unwrap();
    let members: Vec<MemberKey> = (0..MEMBERS)
        .map(|i| MemberKey::user(MemberId::new(&format!("user-{i}")).unwrap()))
        .collect();
    let batches: Vec<Vec<Heartbeat>> = members
        .chunks(BATCH)
        .map(|c| c.iter().cloned().map(Heartbeat::now).collect())
        .collect();
    for store in [&closed, &open] {
        for b in &batches {
            store.heartbeat(&space, b).await.unwrap();
        }
    }
    drain(&open).await;

    // (steady, churn) members per second, per store.
    let mut rates: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    let mut delivered = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let store = if which == 0 { &closed } else { &open };
            let t = Instant::now();
            for b in &batches {
                store.heartbeat(&space, b).await.unwrap();
            }
            rates[which]
                .0
                .push(MEMBERS as f64 / t.elapsed().as_secs_f64());
            let t = Instant::now();
            for (b, keys) in batches.iter().zip(members.chunks(BATCH)) {
                store.leave(&space, keys).await.unwrap();
                store.heartbeat(&space, b).await.unwrap();
            }
            rates[which]
                .1
                .push(MEMBERS as f64 / t.elapsed().as_secs_f64());
        }
        let t = Instant::now();
        let n = drain(&open).await;
        delivered.push(n as f64 / t.elapsed().as_secs_f64());
    }
    println!(
        "{rounds} rounds, {MEMBERS} members in batches of {BATCH}; medians, members per second"
    );
    for (name, (steady, churn)) in ["outbox closed", "outbox open"].iter().zip(&rates) {
        println!(
            "{name:14} steady: {:>10.0}   churn (leave + join): {:>10.0}",
            median(steady.clone()),
            median(churn.clone())
        );
    }
    let paired = |a: &[f64], b: &[f64]| median(b.iter().zip(a).map(|(n, f)| n / f).collect());
    println!(
        "open / closed (medians of per-round ratios): steady {:.3}, churn {:.3}",
        paired(&rates[0].0, &rates[1].0),
        paired(&rates[0].1, &rates[1].1)
    );
    println!(
        "claim + ack: {:.0} events per second",
        median(delivered.clone())
    );
}

/// Claims and acknowledges every event, in claims of 1,000; returns how
/// many.
async fn drain(store: &MemoryStore) -> usize {
    let mut n = 0;
    loop {
        let got = store.outbox_claim("bench", 1_000, 60_000).await.unwrap();
        if got.is_empty() {
            return n;
        }
        n += got.len();
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        store.outbox_ack(&ids).await.unwrap();
    }
}
