//! What moving one busy space between threads costs: the `bench-server.sh`
//! batch load (ten batches of 1,000 ids, rotated, into one space of 10,000
//! members) applied by one thread, then by two threads taking turns (a
//! strict ping-pong: every batch finds the space last written by the other
//! core), then by two threads contending freely for the space's mutex.
//!
//! `cargo run --release -p herenow-core --example space_handoff`
//! (`taskset -c 0,1` to name the cores; `ROUNDS` batches per mode).
//!
//! The time inside the lock per batch is what a busy space can take: one
//! thread keeps the space in its own caches, two threads taking turns pay
//! a transfer from the other core for every line a heartbeat touches.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use herenow_core::memory::Space;
use herenow_core::{Heartbeat, MemberId, MemberKey, SpaceConfig, SpaceName};
use parking_lot::Mutex;

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

/// Two threads contending for the mutex, each applying `rounds / 2`
/// batches: the time of each apply, and batches per second overall.
fn contended(batches: &Arc<Vec<Vec<Heartbeat>>>, rounds: usize) -> (Duration, f64) {
    let s = Arc::new(Mutex::new(space(batches)));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (s, next, batches) = (s.clone(), next.clone(), batches.clone());
            std::thread::spawn(move || {
                let mut took = Vec::new();
                loop {
                    let r = next.fetch_add(1, Ordering::Relaxed);
                    if r >= rounds {
                        break took;
                    }
                    let mut g = s.lock();
                    let t = Instant::now();
                    g.heartbeat(&batches[r % batches.len()], NOW + 1 + r as u64)
                        .unwrap();
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

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let batches = Arc::new(batches());
    let one = one_thread(&batches, rounds);
    let pp = ping_pong(&batches, rounds);
    let (cont, rate) = contended(&batches, rounds);
    let per = |d: Duration| d.as_nanos() as f64 / 1000.0;
    println!("apply of one batch of 1,000 (median over {rounds}):");
    println!(
        "  one thread:            {:>7.1} us  ({:.1} ns/member)",
        per(one) / 1.0,
        per(one)
    );
    println!(
        "  two threads in turns:  {:>7.1} us  ({:.1} ns/member, {:.2}x)",
        per(pp),
        per(pp),
        per(pp) / per(one)
    );
    println!(
        "  two threads contending:{:>7.1} us  ({:.1} ns/member, {:.2}x); {:.0} batches/s = {:.2}M members/s",
        per(cont),
        per(cont),
        per(cont) / per(one),
        rate,
        rate * 1000.0 / 1e6
    );
}
