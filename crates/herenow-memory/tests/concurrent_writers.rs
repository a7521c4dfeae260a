//! Issue 10: queries stay right while several threads write one space.
//!
//! Writer threads send batches of heartbeats (which wait for the space's
//! lock when they collide) and single heartbeats to a set of "hot" members, and move the clock, while
//! the test pages through the space in both orders, again and again.
//! Keyset pagination promises that a member whose heartbeat did not change
//! during the paging is neither skipped nor repeated: every "still" member
//! appears exactly once per pass, in order. A hot member may move ahead of
//! the cursor in most-recent order (and then be skipped) but is never
//! repeated; in id order nobody moves, so every member appears once.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use herenow_core::{
    Clock, Heartbeat, KindFilter, ListQuery, ManualClock, MemberId, MemberKey, Order,
    PresenceStore, SpaceConfig, SpaceName,
};
use herenow_memory::MemoryStore;

const T0: u64 = 1_700_000_000_000;
const STILL: usize = 3_000;
const HOT: usize = 4_000;
const WRITERS: usize = 4;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn user(prefix: &str, i: usize) -> MemberKey {
    MemberKey::user(MemberId::new(&format!("{prefix}{i:05}")).unwrap())
}

/// Pages through the whole space in `order`, `limit` at a time; checks
/// each page's order and returns how often each member appeared.
fn page_through(
    rt: &tokio::runtime::Runtime,
    store: &MemoryStore,
    space: &SpaceName,
    order: Order,
    limit: usize,
) -> HashMap<String, u32> {
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut cursor = None;
    loop {
        let query = ListQuery {
            window_ms: None,
            kinds: KindFilter::Users,
            order: Some(order),
            limit,
            cursor,
        };
        let page = rt.block_on(store.list(space, &query)).unwrap();
        assert!(page.members.len() <= limit);
        for pair in page.members.windows(2) {
            match order {
                Order::Recent => assert!(
                    pair[0].last_seen_ms >= pair[1].last_seen_ms,
                    "a most-recent page out of order: {pair:?}"
                ),
                Order::Id => assert!(
                    pair[0].member.id < pair[1].member.id,
                    "a by-id page out of order: {pair:?}"
                ),
            }
        }
        for m in &page.members {
            *seen.entry(m.member.id.as_str().to_owned()).or_default() += 1;
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return seen,
        }
    }
}

#[test]
fn issue_10_paging_under_concurrent_writers_skips_and_repeats_no_still_member() {
    // A whole space: colliding batches wait for its lock.
    let (store, written) = paging_under_concurrent_writers(1);
    assert!(written > 0);
    assert_eq!(store.space_stripes(), 1);
    // A space split over stripes: the writers' batches go to every
    // stripe, in parallel where they can, and paging merges them.
    let (store, _) = paging_under_concurrent_writers(3);
    assert_eq!(store.space_stripes(), 3);
}

/// The scenario, on spaces of `stripes` stripes: returns the store and
/// how many writes were made.
fn paging_under_concurrent_writers(stripes: usize) -> (Arc<MemoryStore>, u64) {
    let clock = ManualClock::new(T0);
    let store = Arc::new(
        MemoryStore::new(Arc::new(clock.clone()), SpaceConfig::default())
            .with_space_stripes(stripes),
    );
    let space = SpaceName::new("busy").unwrap();
    let rt = runtime();
    // Everyone present before the paging starts, last seen over the past
    // minute; still members are never written again.
    let seed: Vec<Heartbeat> = (0..STILL)
        .map(|i| user("still-", i))
        .chain((0..HOT).map(|i| user("hot-", i)))
        .enumerate()
        .map(|(n, member)| Heartbeat {
            member,
            at_ms: Some(T0 - 60_000 + (n as u64 * 60_000) / (STILL + HOT) as u64),
            meta: None,
        })
        .collect();
    for chunk in seed.chunks(1_000) {
        rt.block_on(store.heartbeat(&space, chunk)).unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (store, space, stop, written, clock) = (
                store.clone(),
                space.clone(),
                stop.clone(),
                written.clone(),
                clock.clone(),
            );
            std::thread::spawn(move || {
                let rt = runtime();
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1);
                let mut next = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % HOT as u64) as usize
                };
                // The clock before each member's latest write: its last
                // seen can be no older once the write is acknowledged.
                let mut latest: HashMap<usize, u64> = HashMap::new();
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let size = if round % 4 == 3 { 1 } else { 200 };
                    let picked: Vec<usize> = (0..size).map(|_| next()).collect();
                    let beats: Vec<Heartbeat> = picked
                        .iter()
                        .map(|&i| Heartbeat {
                            member: user("hot-", i),
                            at_ms: None,
                            meta: None,
                        })
                        .collect();
                    let before = clock.now_ms();
                    let report = rt.block_on(store.heartbeat(&space, &beats)).unwrap();
                    assert_eq!(report.accepted + report.stale, size as u64);
                    // Read your writes: the acknowledged heartbeat shows.
                    let first = [beats[0].member.clone()];
                    let now = rt.block_on(store.status(&space, &first)).unwrap();
                    assert!(
                        now[0].last_seen_ms >= Some(before),
                        "{now:?} before {before}"
                    );
                    for i in picked {
                        latest.insert(i, before);
                    }
                    written.fetch_add(1, Ordering::Relaxed);
                    if w == 0 && round.is_multiple_of(8) {
                        clock.advance(Duration::from_millis(1));
                    }
                    round += 1;
                }
                latest
            })
        })
        .collect();

    // Page through while the writers run: passes in both orders, with
    // pages small enough that writes land between them. On a busy
    // machine a pass may run while no writer does (their threads not
    // started yet, or not scheduled): it still checks its pages, and
    // passing needs 6 passes that writes landed during.
    let started = Instant::now();
    let mut passes = 0;
    let mut concurrent = 0;
    while concurrent < 6 || started.elapsed() < Duration::from_secs(2) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "only {concurrent} of {passes} passes had writes land during them"
        );
        let before = written.load(Ordering::Relaxed);
        let (order, limit) = match passes % 3 {
            0 => (Order::Recent, 50),
            1 => (Order::Id, 50),
            _ => (Order::Recent, 7),
        };
        let seen = page_through(&rt, &store, &space, order, limit);
        for i in 0..STILL {
            let id = user("still-", i).id;
            assert_eq!(
                seen.get(id.as_str()).copied(),
                Some(1),
                "{id} in a {order:?} pass with limit {limit}"
            );
        }
        for i in 0..HOT {
            let id = user("hot-", i).id;
            let times = seen.get(id.as_str()).copied().unwrap_or(0);
            match order {
                Order::Id => assert_eq!(times, 1, "{id} in a by-id pass"),
                Order::Recent => assert!(times <= 1, "{id} repeated in a most-recent pass"),
            }
        }
        assert_eq!(seen.len(), seen.values().filter(|&&n| n == 1).count());
        if written.load(Ordering::Relaxed) > before {
            concurrent += 1;
        }
        passes += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let mut latest: HashMap<usize, u64> = HashMap::new();
    for w in writers {
        for (i, before) in w.join().unwrap() {
            let at = latest.entry(i).or_default();
            *at = (*at).max(before);
        }
    }
    // No acknowledged write was lost.
    let hot: Vec<MemberKey> = (0..HOT).map(|i| user("hot-", i)).collect();
    let statuses = rt.block_on(store.status(&space, &hot)).unwrap();
    for (i, st) in statuses.iter().enumerate() {
        if let Some(&before) = latest.get(&i) {
            assert!(
                st.last_seen_ms >= Some(before),
                "{st:?} written at {before}"
            );
        }
    }
    // Every member is still stored, none twice.
    let counts = rt.block_on(store.count(&space, None)).unwrap();
    assert_eq!(counts.users, (STILL + HOT) as u64);
    let written = written.load(Ordering::Relaxed);
    (store, written)
}
