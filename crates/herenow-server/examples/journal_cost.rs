//! What the journal costs heartbeats, in the engine: the same heartbeats
//! into a memory store without a journal and into one journaling to a
//! temporary directory, alternated in one run so the machine's noise hits
//! both alike. Issue 8's target: at most 10 % slower.
//!
//! ```sh
//! cargo run --release -p herenow-server --example journal_cost
//! ROUNDS=41 cargo run --release -p herenow-server --example journal_cost
//! BATCHES=0 ROUNDS=1 valgrind --tool=callgrind target/release/examples/journal_cost   # single heartbeats alone
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use herenow_core::{
    Heartbeat, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName, SystemClock,
};
use herenow_memory::MemoryStore;
use herenow_server::{Backend, Snapshots};

const USERS: usize = 100_000;
const BATCH: usize = 1_000;
const BATCHES_PER_ROUND: usize = 200;
const SINGLES_PER_ROUND: usize = 50_000;

/// `name` from the environment (a count), else `default`: `BATCHES=0`
/// leaves only single heartbeats, for profiling them alone.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = std::env::temp_dir().join(format!("herenow-journal-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let plain = Arc::new(MemoryStore::new(
        Arc::new(SystemClock),
        SpaceConfig::default(),
    ));
    let journaled = Arc::new(MemoryStore::new(
        Arc::new(SystemClock),
        SpaceConfig::default(),
    ));
    // The journal as the server opens it for a data directory (nothing to
    // restore or replay in a fresh one).
    let backend = Backend::memory_on_disk(
        journaled.clone(),
        Snapshots {
            dir: dir.clone(),
            interval: Duration::from_secs(3600),
        },
    )
    .await
    .expect("journal");
    let space = SpaceName::new("load").unwrap();
    let users: Vec<MemberKey> = (0..USERS)
        .map(|i| MemberKey::user(MemberId::new(&format!("user-{i}")).unwrap()))
        .collect();
    let batches: Vec<Vec<Heartbeat>> = users
        .chunks(BATCH)
        .map(|c| c.iter().cloned().map(Heartbeat::now).collect())
        .collect();

    let batches_per_round = env_count("BATCHES", BATCHES_PER_ROUND);
    let singles_per_round = env_count("SINGLES", SINGLES_PER_ROUND).max(1);
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(15);
    let mut rates: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs right after
        // the other's writes.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let store = if which == 0 { &plain } else { &journaled };
            let started = Instant::now();
            for b in 0..batches_per_round {
                store
                    .heartbeat(&space, &batches[b % batches.len()])
                    .await
                    .unwrap();
            }
            let members = (batches_per_round * BATCH) as f64;
            rates[which]
                .0
                .push(members / started.elapsed().as_secs_f64());

            let started = Instant::now();
            for i in 0..singles_per_round {
                let beat = [Heartbeat::now(users[(i * 7919) % USERS].clone())];
                store.heartbeat(&space, &beat).await.unwrap();
            }
            rates[which]
                .1
                .push(singles_per_round as f64 / started.elapsed().as_secs_f64());
        }
    }
    let stats = backend.journal_stats().expect("a journal");
    println!("{rounds} rounds; medians (members per second)");
    for (name, (batch, single)) in ["journal off", "journal on"].iter().zip(&rates) {
        println!(
            "{name:12} batches of {BATCH}: {:>11.0}   single heartbeats: {:>10.0}",
            median(batch.clone()),
            median(single.clone())
        );
    }
    // Each round measures off and on back to back, so the ratio within a
    // round is the least disturbed by the machine's load drifting.
    let paired = |off: &[f64], on: &[f64]| median(on.iter().zip(off).map(|(n, f)| n / f).collect());
    println!(
        "journal on / off: batches {:.3}, single {:.3} (medians of per-round ratios: {:.3}, {:.3}); \
         journal wrote {} records, {} bytes, {} fdatasyncs",
        median(rates[1].0.clone()) / median(rates[0].0.clone()),
        median(rates[1].1.clone()) / median(rates[0].1.clone()),
        paired(&rates[0].0, &rates[1].0),
        paired(&rates[0].1, &rates[1].1),
        stats.records,
        stats.bytes,
        stats.syncs
    );
    drop(backend);
    let _ = std::fs::remove_dir_all(&dir);
}
