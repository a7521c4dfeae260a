//! The heartbeat path of a large space: the one-pass relink and the
//! prefetching batch against the plain paths they replace.

use herenow_core::event::Event;
use herenow_core::id::{MemberId, MemberKey};
use herenow_core::policy::SpaceConfig;
use herenow_core::store::{Heartbeat, HeartbeatReport};

use super::Space;

const T0: u64 = 1_700_000_000_000;

fn key(i: u64) -> MemberKey {
    let id = MemberId::new(&format!("m{i}")).unwrap();
    if i.is_multiple_of(5) {
        MemberKey::guest(id)
    } else {
        MemberKey::user(id)
    }
}

fn beat(i: u64, at: u64) -> Heartbeat {
    Heartbeat {
        member: key(i),
        at_ms: Some(at),
        meta: None,
    }
}

/// 2,000 members over eight minutes, a third of them crowded into one
/// second so its block keeps per-millisecond counts.
fn large_space() -> (Space, Vec<u64>) {
    let mut s = Space::new(
        herenow_core::id::SpaceName::new("t").unwrap(),
        SpaceConfig::default(),
        T0,
    );
    let mut seen = Vec::new();
    let beats: Vec<Heartbeat> = (0..2000u64)
        .map(|i| {
            let at = if i.is_multiple_of(3) {
                T0 - 200_000 - (i % 900)
            } else {
                T0 - 480_000 + i * 240
            };
            seen.push(at);
            beat(i, at)
        })
        .collect();
    for chunk in beats.chunks(500) {
        s.heartbeat(chunk, T0).unwrap();
    }
    (s, seen)
}

/// Heartbeats that move members to the head, within their own block,
/// and to older places (backfills), with stale ones and new members.
fn moves(now: u64) -> Vec<Heartbeat> {
    (0..700u64)
        .map(|n| {
            let i = (n * 7919) % 2300;
            let at = match n % 6 {
                0 => T0 - 200_000 - (i % 900) + 3,
                1 => now - 90_000,
                2 => T0 - 600_000,
                _ => now,
            };
            beat(i, at)
        })
        .collect()
}

fn drain(rx: &mut herenow_core::EventReceiver) -> Vec<Event> {
    std::iter::from_fn(|| rx.try_recv().unwrap().map(|e| (*e).clone())).collect()
}

#[test]
fn a_batch_agrees_with_its_beats_one_at_a_time() {
    let now = T0 + 1_000;
    let (mut batched, mut seen) = large_space();
    let (mut single, _) = large_space();
    let mut rx_batched = batched.subscribe(now).events;
    let mut rx_single = single.subscribe(now).events;
    let beats = moves(now);
    let report = batched.heartbeat(&beats, now).unwrap();
    let mut one_by_one = HeartbeatReport::default();
    for b in &beats {
        let r = single.heartbeat(std::slice::from_ref(b), now).unwrap();
        one_by_one.accepted += r.accepted;
        one_by_one.joined += r.joined;
        one_by_one.stale += r.stale;
    }
    assert_eq!(report, one_by_one);
    assert!(report.stale > 0 && report.joined > 0);
    let events = drain(&mut rx_batched);
    assert!(!events.is_empty());
    assert_eq!(events, drain(&mut rx_single));
    batched.check_invariants();
    single.check_invariants();

    // Window counts stay exact through the moves.
    for b in &beats {
        let i: u64 = b.member.id.as_str()[1..].parse().unwrap();
        let at = b.at_ms.unwrap();
        match seen.get_mut(i as usize) {
            Some(old) if at >= *old => *old = at,
            Some(_) => {}
            None if now - at < SpaceConfig::default().retention_ms => {
                seen.resize(i as usize, 0);
                seen.push(at);
            }
            None => {}
        }
    }
    for window in [1, 500, 90_000, 200_500, 201_000, 480_000, 600_000] {
        let mut expect = [0u64; 2];
        for (i, &at) in seen.iter().enumerate() {
            if at != 0 && at >= now - window {
                expect[key(i as u64).kind.index()] += 1;
            }
        }
        let c = batched.count(Some(window), now).unwrap();
        assert_eq!([c.users, c.guests], expect, "window {window}");
    }
}

/// Runs the sweep at `now` until it has nothing left to do.
fn sweep(s: &mut Space, now: u64) {
    for _ in 0..10_000 {
        let work = s.tick(now, 2_048);
        s.check_invariants();
        if !work.more {
            return;
        }
    }
    panic!("the sweep never finished");
}

/// After a clock jump: the space is consistent, keeps no block index and
/// grew by less than a megabyte over `before` bytes.
fn assert_index_dropped(s: &Space, before: usize) {
    s.check_invariants();
    assert!(s.blocks.is_none(), "an index across the jump");
    assert!(
        s.heap_bytes() < before + (1 << 20),
        "{} bytes",
        s.heap_bytes()
    );
}

/// A step of the server's clock by years leaves the members' times too far
/// apart for a block index: the space drops it rather than grow it by a
/// block per second of the jump (gigabytes), answers the same meanwhile,
/// and builds it again once the members left behind are swept.
#[test]
fn a_clock_jump_drops_the_block_index_instead_of_growing_it() {
    const YEARS: u64 = 10 * 365 * 86_400_000;
    let later = T0 + YEARS;
    let (mut s, _) = large_space();
    assert!(s.blocks.is_some());
    let before = s.heap_bytes();
    // 700 members (500 old ones, 200 new ones) seen at the jumped time.
    let beats: Vec<Heartbeat> = (1500..2200u64).map(|i| beat(i, later)).collect();
    let report = s.heartbeat(&beats, later).unwrap();
    assert_eq!((report.accepted, report.joined), (700, 200), "{report:?}");
    assert_index_dropped(&s, before);
    let c = s.count(Some(60_000), later).unwrap();
    assert_eq!(c.users + c.guests, 700);

    // The members left behind are past their retention: once they are
    // swept, the rest fit an index again.
    sweep(&mut s, later);
    assert_eq!(s.len(), 700);
    assert!(s.blocks.is_some(), "no index once the range fits");
    let c = s.count(Some(60_000), later).unwrap();
    assert_eq!(c.users + c.guests, 700);
}

/// A step back by years: members joining at the clock's new time are far
/// older than those stored; the index is dropped the same way, not grown
/// backwards across the jump.
#[test]
fn a_clock_stepped_back_does_not_grow_the_block_index_either() {
    let earlier = T0 - 10 * 365 * 86_400_000;
    let (mut s, _) = large_space();
    let before = s.heap_bytes();
    let beats: Vec<Heartbeat> = (2000..2200u64).map(|i| beat(i, earlier)).collect();
    s.heartbeat(&beats, earlier).unwrap();
    assert_index_dropped(&s, before);
    s.count(Some(60_000), earlier).unwrap();
    sweep(&mut s, earlier);
}
