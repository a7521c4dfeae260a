//! What moving one busy space between threads costs: the `bench-server.sh`
//! batch load (ten batches of 1,000 ids, rotated, into one space of 10,000
//! members) applied by one thread, then by two threads taking turns (a
//! strict ping-pong: every batch finds the space last written by the other
//! core), then by two threads contending freely for the space's mutex.
//!
//! `cargo run --release -p herenow-memory --example space_handoff`
//! (`taskset -c 0,1` to name the cores; `ROUNDS` batches per mode,
//! `THREADS` the writer counts, `STRIPES` the stripe counts of the striped
//! columns).
//!
//! The time inside the lock per batch is what a busy space can take: one
//! thread keeps the space in its own caches, two threads taking turns pay
//! a transfer from the other core for every line a heartbeat touches.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use herenow_core::{
    Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName,
};
use herenow_memory::MemoryStore;
use herenow_memory::Space;

const NOW: u64 = 1_700_000_000_000;

fn batches() -> Vec<Vec<Heartbeat>> {
    (0..10)
        .map(|b| {
            (0..1000)
                .map(|i| Heartbeat {
                    member: MemberKey::user(
                        MemberId::new(&format!("user-{}", b * 1000 + i)).unwrap(),
                    ),
                    at_ms: None,
                    meta: None,
                })
                .collect()
        })
        .collect()
}

fn space(batches: &[Vec<Heartbeat>]) -> Space {
    let mut s = Space::new(SpaceName::new("load").unwrap(), SpaceConfig::default(), NOW);
    for b in batches {
        s.heartbeat(b, NOW).unwrap();
    }
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// One thread, `rounds` batches: the time of each apply.
fn one_thread(batches: &[Vec<Heartbeat>], rounds: usize) -> Duration {
    let mut s = space(batches);
    let mut took = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let started = Instant::now();
        s.heartbeat(&batches[r % batches.len()], NOW + 1 + r as u64)
            .unwrap();
        took.push(started.elapsed());
    }
    median(took)
}

/// Two threads applying batches in strict turns: the time of each apply.
fn ping_pong(batches: &Arc<Vec<Vec<Heartbeat>>>, rounds: usize) -> Duration {
    let s = Arc::new(Mutex::new(space(batches)));
    let turn = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|me| {
            let (s, turn, batches) = (s.clone(), turn.clone(), batches.clone());
            std::thread::spawn(move || {
                let mut took = Vec::new();
                let mut r = me;
                while r < rounds {
                    while turn.load(Ordering::Acquire) != r {
                        std::hint::spin_loop();
                    }
                    let started = Instant::now();
                    s.lock()
                        .heartbeat(&batches[r % batches.len()], NOW + 1 + r as u64)
                        .unwrap();
                    took.push(started.elapsed());
                    turn.store(r + 1, Ordering::Release);
                    r += 2;
                }
                took
            })
        })
        .collect();
    let all: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    median(all)
}

/// One thread applying batches another thread copied just before (as a
/// space's writer applies what another request's thread parsed): the time
/// of each apply.
fn remote_beats(batches: &Arc<Vec<Vec<Heartbeat>>>, rounds: usize) -> Duration {
    let mut s = space(batches);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Heartbeat>>(4);
    let producer = {
        let batches = batches.clone();
        std::thread::spawn(move || {
            for r in 0..rounds {
                if tx.send(batches[r % batches.len()].clone()).is_err() {
                    break;
                }
            }
        })
    };
    let mut took = Vec::with_capacity(rounds);
    for (r, beats) in rx.iter().enumerate() {
        let started = Instant::now();
        s.heartbeat(&beats, NOW + 1 + r as u64).unwrap();
        took.push(started.elapsed());
    }
    producer.join().unwrap();
    median(took)
}

/// `n` threads contending for the mutex, applying `rounds` batches in
/// all, each a fresh copy made by its thread (as a request's parsed
/// heartbeats are): the time of each apply inside the lock, and batches
/// per second overall.
fn contended(batches: &Arc<Vec<Vec<Heartbeat>>>, rounds: usize, n: usize) -> (Duration, f64) {
    let s = Arc::new(Mutex::new(space(batches)));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (s, next, batches) = (s.clone(), next.clone(), batches.clone());
            std::thread::spawn(move || {
                let mut took = Vec::new();
                loop {
                    let r = next.fetch_add(1, Ordering::Relaxed);
                    if r >= rounds {
                        break took;
                    }
                    let beats = batches[r % batches.len()].clone();
                    let mut g = s.lock();
                    let t = Instant::now();
                    g.heartbeat(&beats, NOW + 1 + r as u64).unwrap();
                    took.push(t.elapsed());
                }
            })
        })
        .collect();
    let all: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let rate = rounds as f64 / started.elapsed().as_secs_f64();
    (median(all), rate)
}

/// `n` threads writing one space of a [`MemoryStore`] of `stripes`
/// stripes, `rounds` batches in all, each a fresh copy: batches per
/// second.
fn store_writers(
    batches: &Arc<Vec<Vec<Heartbeat>>>,
    rounds: usize,
    n: usize,
    stripes: usize,
) -> f64 {
    let clock = ManualClock::new(NOW);
    let store = Arc::new(
        MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default())
            .with_space_stripes(stripes),
    );
    let name = SpaceName::new("load").unwrap();
    let block_on = |f| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    };
    for b in batches.iter() {
        block_on(store.heartbeat(&name, b)).unwrap();
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (store, next, batches, name) =
                (store.clone(), next.clone(), batches.clone(), name.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                loop {
                    let r = next.fetch_add(1, Ordering::Relaxed);
                    if r >= rounds {
                        break;
                    }
                    let beats = batches[r % batches.len()].clone();
                    rt.block_on(store.heartbeat(&name, &beats)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    rounds as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let threads: Vec<usize> = std::env::var("THREADS")
        .unwrap_or_else(|_| "2".into())
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    let batches = Arc::new(batches());
    let one = one_thread(&batches, rounds);
    let pp = ping_pong(&batches, rounds);
    let remote = remote_beats(&batches, rounds);
    let per = |d: Duration| d.as_nanos() as f64 / 1000.0;
    let m = |batches_per_s: f64| batches_per_s * 1000.0 / 1e6;
    println!("apply of one batch of 1,000 (median over {rounds}):");
    println!("  one thread:            {:>7.1} us", per(one));
    println!(
        "  two threads in turns:  {:>7.1} us ({:.2}x)",
        per(pp),
        per(pp) / per(one)
    );
    println!(
        "  beats copied by another thread: {:>7.1} us ({:.2}x)",
        per(remote),
        per(remote) / per(one)
    );
    for &n in &threads {
        let (cont, rate) = contended(&batches, rounds, n);
        println!(
            "  {n} threads contending: {:>7.1} us ({:.2}x); {:.2}M members/s",
            per(cont),
            per(cont) / per(one),
            m(rate)
        );
    }
    let stripes: Vec<usize> = std::env::var("STRIPES")
        .unwrap_or_else(|_| "2".into())
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    println!("a MemoryStore, one space, {rounds} batches of 1,000 from n threads (M members/s):");
    let mut header = "  n | whole".to_string();
    for s in &stripes {
        header += &format!(" | {s} stripes");
    }
    println!("{header}");
    for &n in &threads {
        let mut row = format!("  {n}");
        for stripes in std::iter::once(1).chain(stripes.iter().copied()) {
            row += &format!(" | {:.2}", m(store_writers(&batches, rounds, n, stripes)));
        }
        println!("{row}");
    }
}
