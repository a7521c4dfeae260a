//! What a read costs on a striped space: every read locks each stripe
//! and merges (ARCHITECTURE.md, "Striping"). One space of `MEMBERS`
//! members (default 100,000, all present), split over 1, 2, 4 and 8
//! stripes (`STRIPES` to choose), one thread; the median of `ROUNDS`
//! calls of each read.
//!
//! `WRITERS=n` adds n threads that write the same space all along, in
//! batches of 1,000 heartbeats of its members (each moves them to the
//! front), so reads wait for the stripes' locks as under a write load;
//! each cell is then `median/99th percentile`, and a last column gives
//! the members the writers applied per second meanwhile.
//!
//! `cargo run --release -p herenow-memory --example striped_reads`
//! `WRITERS=1 STRIPES="1 4" cargo run --release -p herenow-memory --example striped_reads`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use herenow_core::{
    Heartbeat, ListQuery, ManualClock, MemberId, MemberKey, Order, PresenceStore, SpaceConfig,
    SpaceName,
};
use herenow_memory::MemoryStore;

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

/// The median and the 99th percentile of `rounds` runs of `f`.
fn median<F: Future>(
    rt: &tokio::runtime::Runtime,
    rounds: usize,
    mut f: impl FnMut() -> F,
) -> (Duration, Duration) {
    let mut took: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            rt.block_on(f());
            started.elapsed()
        })
        .collect();
    took.sort_unstable();
    (took[rounds / 2], took[(rounds * 99 / 100).min(rounds - 1)])
}

/// Threads writing `space` until `stop`: batches of 1,000 of its
/// `members`, in turn, counted in `applied` (members). Returns once every
/// thread has applied a first batch, so reads that follow meet writes.
fn writers(
    store: &Arc<MemoryStore>,
    space: &SpaceName,
    members: usize,
    n: usize,
    stop: &Arc<AtomicBool>,
    applied: &Arc<AtomicU64>,
) -> Vec<std::thread::JoinHandle<()>> {
    let started = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..n)
        .map(|w| {
            let (store, space) = (store.clone(), space.clone());
            let (stop, applied, started) = (stop.clone(), applied.clone(), started.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let mut next = w * 7_919;
                let mut first = true;
                while !stop.load(Ordering::Relaxed) {
                    let batch: Vec<Heartbeat> = (0..1_000)
                        .map(|i| Heartbeat::now(user((next + i * 97) % members)))
                        .collect();
                    rt.block_on(store.heartbeat(&space, &batch)).unwrap();
                    applied.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    next += 1_000;
                    if first {
                        started.fetch_add(1, Ordering::Relaxed);
                        first = false;
                    }
                }
            })
        })
        .collect();
    while started.load(Ordering::Relaxed) < n as u64 {
        std::thread::sleep(Duration::from_millis(1));
    }
    threads
}

fn main() {
    let members = env("MEMBERS", 100_000);
    let rounds = env("ROUNDS", 200);
    let writing = env("WRITERS", 0);
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
    if writing > 0 {
        println!(
            "one space of {members} members, {writing} writer thread(s) all along, median/99th percentile of {rounds} calls (us):"
        );
    } else {
        println!("one space of {members} members, median of {rounds} calls (us):");
    }
    println!(
        "  stripes | page of 100, recent | page of 100, by id | count | status of 100 | online among 500 (100) | subscribe ({} kept){}",
        herenow_core::limits::MAX_SNAPSHOT,
        if writing > 0 {
            " | members written/s"
        } else {
            ""
        }
    );
    for n in stripes {
        let clock = ManualClock::new(T0);
        let store = Arc::new(
            MemoryStore::new(Arc::new(clock), SpaceConfig::default()).with_space_stripes(n),
        );
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
        let stop = Arc::new(AtomicBool::new(false));
        let applied = Arc::new(AtomicU64::new(0));
        let threads = writers(&store, &space, members, writing, &stop, &applied);
        let (started, before) = (Instant::now(), applied.load(Ordering::Relaxed));
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
        let written = applied.load(Ordering::Relaxed) - before;
        let rate = written as f64 / started.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        let cell = |(p50, p99): (Duration, Duration), digits: usize| {
            if writing > 0 {
                format!(
                    "{:.digits$}/{:.digits$}",
                    p50.as_secs_f64() * 1e6,
                    p99.as_secs_f64() * 1e6
                )
            } else {
                format!("{:.digits$}", p50.as_secs_f64() * 1e6)
            }
        };
        let tail = if writing > 0 {
            format!(" | {:.2}M", rate / 1e6)
        } else {
            String::new()
        };
        println!(
            "  {n} | {} | {} | {} | {} | {} | {}{tail}",
            cell(recent, 1),
            cell(by_id, 0),
            cell(count, 2),
            cell(status, 1),
            cell(among, 1),
            cell(subscribe, 0)
        );
    }
}
