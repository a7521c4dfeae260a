//! Engine benchmarks: one thread, one space of 1M members.
//!
//! `cargo bench -p herenow-memory --bench engine`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use herenow_core::{Heartbeat, ListQuery, MemberId, MemberKey, MemberKind, SpaceConfig, SpaceName};
use herenow_memory::Space;
use herenow_memory::changes::ChangeRef;

const N: usize = 1_000_000;
const NOW: u64 = 1_700_000_000_000;

fn ids(n: usize) -> Vec<MemberId> {
    (0..n)
        .map(|i| MemberId::new(&format!("user:{i:07}")).unwrap())
        .collect()
}

/// 1M users last seen over the past 10 minutes (0.6 ms apart), inserted
/// oldest first as a live space would have received them.
fn full_space(ids: &[MemberId]) -> Space {
    let mut s = Space::new(
        SpaceName::new("bench").unwrap(),
        SpaceConfig::default(),
        NOW,
    );
    let beats: Vec<Heartbeat> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| Heartbeat {
            member: MemberKey::user(id.clone()),
            at_ms: Some(NOW - 600_000 + (i as u64 * 600_000 / N as u64)),
            meta: None,
        })
        .collect();
    for chunk in beats.chunks(10_000) {
        s.heartbeat(chunk, NOW).unwrap();
    }
    s
}

/// A fixed pseudo-random order over `n` (xorshift), so heartbeats hit
/// members all over the slab, as real traffic does.
fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

fn engine(c: &mut Criterion) {
    let ids = ids(N);
    let mut space = full_space(&ids);
    let order = shuffled(N);

    let mut g = c.benchmark_group("heartbeat_1M");
    g.throughput(Throughput::Elements(1));
    let (mut i, mut now) = (0usize, NOW);
    // The ids in the order they are sent, read front to back: a server
    // finds a heartbeat's id in the request it has just parsed, not at a
    // random place in a 24 MB array (`ids[order[i]]` was a memory round
    // trip of the harness's own before the engine's first).
    let sent: Vec<MemberId> = order.iter().map(|&j| ids[j].clone()).collect();
    g.bench_function("existing_member_random", |b| {
        b.iter(|| {
            // The clock moves 1 ms every 64 heartbeats: ~64k beats/s.
            i += 1;
            if i & 63 == 0 {
                now += 1;
            }
            black_box(space.touch(MemberKind::User, &sent[i % N], now));
        })
    });
    drop(sent);
    let batch: Vec<Vec<Heartbeat>> = order
        .chunks(1000)
        .take(200)
        .map(|c| {
            c.iter()
                .map(|&j| Heartbeat::now(MemberKey::user(ids[j].clone())))
                .collect()
        })
        .collect();
    g.throughput(Throughput::Elements(1000));
    let mut k = 0usize;
    g.bench_function("batch_of_1000", |b| {
        b.iter(|| {
            k += 1;
            now += 1;
            black_box(space.heartbeat(&batch[k % batch.len()], now).unwrap());
        })
    });
    g.finish();

    let mut g = c.benchmark_group("query_1M");
    let top = ListQuery {
        limit: 100,
        ..Default::default()
    };
    g.bench_function("top_100_recent", |b| {
        b.iter(|| black_box(space.list(&top, now).unwrap()))
    });
    g.bench_function("count_window_10m", |b| {
        b.iter(|| black_box(space.count(Some(600_000), now).unwrap()))
    });
    g.bench_function("count_window_1m", |b| {
        b.iter(|| black_box(space.count(Some(60_000), now).unwrap()))
    });
    g.bench_function("count_window_7m13s", |b| {
        b.iter(|| black_box(space.count(Some(433_000), now).unwrap()))
    });
    let friends: Vec<MemberKey> = order
        .iter()
        .step_by(N / 500)
        .take(500)
        .map(|&j| MemberKey::user(ids[j].clone()))
        .collect();
    g.bench_function("online_friends_500", |b| {
        b.iter(|| black_box(space.online_among(&friends, None, 100, now).unwrap()))
    });
    let lookups: Vec<MemberKey> = order
        .iter()
        .take(1000)
        .map(|&j| MemberKey::user(ids[j].clone()))
        .collect();
    g.throughput(Throughput::Elements(1000));
    g.bench_function("status_batch_1000", |b| {
        b.iter(|| black_box(space.status(&lookups, now).unwrap()))
    });
    g.finish();
}

/// What a heartbeat call costs to journal: its record encoded into the
/// journal's buffer (`ChangeRef::encode_into`), a lone heartbeat of ids
/// of varied lengths and a batch of 1,000.
fn journal_record(c: &mut Criterion) {
    let space = SpaceName::new("load").unwrap();
    let singles: Vec<[Heartbeat; 1]> = (0..100_000)
        .map(|i| {
            [Heartbeat::now(MemberKey::user(
                MemberId::new(&format!("user-{}", (i * 7919) % 100_000)).unwrap(),
            ))]
        })
        .collect();
    let batch: Vec<Heartbeat> = ids(1000)
        .into_iter()
        .map(|id| Heartbeat::now(MemberKey::user(id)))
        .collect();
    let mut buf: Vec<u8> = Vec::with_capacity(4 << 20);
    let mut g = c.benchmark_group("journal_record");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("single_heartbeat", |b| {
        b.iter(|| {
            if buf.len() > 1 << 20 {
                buf.clear();
            }
            i += 1;
            if i == singles.len() {
                i = 0;
            }
            let change = ChangeRef::Heartbeats {
                space: &space,
                now: NOW + i as u64,
                beats: &singles[i],
            };
            change.encode_into(black_box(&mut buf));
        })
    });
    g.throughput(Throughput::Elements(1000));
    g.bench_function("batch_of_1000", |b| {
        b.iter(|| {
            if buf.len() > 1 << 20 {
                buf.clear();
            }
            let change = ChangeRef::Heartbeats {
                space: &space,
                now: NOW,
                beats: &batch,
            };
            change.encode_into(black_box(&mut buf));
        })
    });
    g.finish();
}

criterion_group!(benches, engine, journal_record);
criterion_main!(benches);
