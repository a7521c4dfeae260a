//! What the webhook outbox costs heartbeats: the same work through a store
//! whose outbox is closed and one whose outbox is open, rounds alternating,
//! on a redis-server this example starts itself. Two workloads, in batches
//! of 1,000 members: steady heartbeats of members already present (no
//! event: the common case) and churn (every member leaves, then joins
//! again: two events each, captured by the open store). Between rounds the open
//! store's events are claimed and acknowledged, as a server's delivery
//! would (timed apart: the claim path's own rate). A third workload makes
//! 2,000 members leave and join one call at a time (every script call an
//! event: the capture's fixed costs at their worst). It prints members per second (one caller, batches sent
//! one after another) and Redis' own time per member from `INFO
//! commandstats` (every command, scripts and the index update alike).
//!
//! ```sh
//! cargo run --release -p herenow-redis --example outbox_cost
//! ```

use std::sync::Arc;
use std::time::Instant;

use herenow_core::outbox::OutboxOptions;
use herenow_core::{
    Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName,
    WebhookOutbox,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;
const MEMBERS: usize = 20_000;
const ROUNDS: usize = 9;
/// Members that leave and join one call at a time per round.
const SINGLY: usize = 2_000;

#[derive(Clone, Copy)]
enum Work {
    Steady,
    Churn,
    Singly,
}

/// Redis' time in every command since the last `CONFIG RESETSTAT`, in µs.
fn redis_usec(port: u16) -> f64 {
    let stats = herenow_testkit::raw_command(port, "INFO commandstats").unwrap();
    let mut usec = 0f64;
    for line in stats.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        if name == "info" || name == "config" {
            continue;
        }
        for f in rest.split(',') {
            if let Some(v) = f.strip_prefix("usec=") {
                usec += v.parse::<f64>().unwrap();
            }
        }
    }
    usec
}

async fn connect(url: &str, clock: &ManualClock, prefix: &str) -> RedisStore {
    RedisStore::connect(
        url,
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        RedisOptions {
            prefix: prefix.into(),
            ..RedisOptions::default()
        },
    )
    .await
    .unwrap()
}

/// Runs `work`, returning members per second and Redis µs per member.
async fn timed(port: u16, n: usize, work: impl std::future::Future<Output = ()>) -> (f64, f64) {
    herenow_testkit::raw_command(port, "CONFIG RESETSTAT").unwrap();
    let t = Instant::now();
    work.await;
    let secs = t.elapsed().as_secs_f64();
    (n as f64 / secs, redis_usec(port) / n as f64)
}

async fn steady(s: &RedisStore, sp: &SpaceName, members: &[MemberKey]) {
    for chunk in members.chunks(1_000) {
        let beats: Vec<Heartbeat> = chunk.iter().cloned().map(Heartbeat::now).collect();
        s.heartbeat(sp, &beats).await.unwrap();
    }
}

/// Everyone leaves, then comes back (present again after, as before).
async fn churn(s: &RedisStore, sp: &SpaceName, members: &[MemberKey]) {
    for chunk in members.chunks(1_000) {
        s.leave(sp, chunk).await.unwrap();
    }
    steady(s, sp, members).await;
}

/// Each of `members` leaves and comes back, one call each: a script call
/// per event, the capture's fixed costs paid by every one.
async fn churn_singly(s: &RedisStore, sp: &SpaceName, members: &[MemberKey]) {
    for m in members {
        s.leave(sp, std::slice::from_ref(m)).await.unwrap();
        s.heartbeat(sp, &[Heartbeat::now(m.clone())]).await.unwrap();
    }
}

async fn drain(s: &RedisStore) -> usize {
    let mut n = 0;
    loop {
        let got = s.outbox_claim("bench", 1_000, 60_000).await.unwrap();
        if got.is_empty() {
            return n;
        }
        n += got.len();
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        s.outbox_ack(&ids).await.unwrap();
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = herenow_testkit::RedisServer::standalone();
    let url = server.url();
    let clock = ManualClock::new(T0);
    let closed = connect(&url, &clock, "closed").await;
    let open = connect(&url, &clock, "open").await;
    open.outbox_open(OutboxOptions::default()).await.unwrap();
    let members: Vec<MemberKey> = (0..MEMBERS)
        .map(|i| MemberKey::user(MemberId::new(&format!("u{i:07}")).unwrap()))
        .collect();
    let sp = SpaceName::new("cost").unwrap();
    // Present first, in both.
    steady(&closed, &sp, &members).await;
    steady(&open, &sp, &members).await;
    drain(&open).await;
    let mut runs: [Vec<(f64, f64)>; 6] = Default::default();
    let mut claims = Vec::new();
    for round in 0..ROUNDS {
        clock.advance(std::time::Duration::from_millis(1_000));
        let rows = [
            ("steady, closed", &closed, Work::Steady),
            ("steady, open  ", &open, Work::Steady),
            ("churn,  closed", &closed, Work::Churn),
            ("churn,  open  ", &open, Work::Churn),
            ("singly, closed", &closed, Work::Singly),
            ("singly, open  ", &open, Work::Singly),
        ];
        for (i, (what, s, work)) in rows.into_iter().enumerate() {
            let (n, (rate, usec)) = match work {
                Work::Churn => (
                    2 * MEMBERS,
                    timed(server.port, 2 * MEMBERS, churn(s, &sp, &members)).await,
                ),
                Work::Steady => (
                    MEMBERS,
                    timed(server.port, MEMBERS, steady(s, &sp, &members)).await,
                ),
                Work::Singly => {
                    let few = &members[..SINGLY];
                    (
                        2 * SINGLY,
                        timed(server.port, 2 * SINGLY, churn_singly(s, &sp, few)).await,
                    )
                }
            };
            let t = Instant::now();
            let events = drain(&open).await;
            let drained = events as f64 / t.elapsed().as_secs_f64();
            if events > 0 {
                claims.push(drained);
            }
            println!(
                "round {round} {what}: {rate:>9.0} member-calls/s, redis {usec:.2} us/member \
                 ({n} calls; then {events} events claimed and acknowledged, {drained:.0}/s)"
            );
            runs[i].push((rate, usec));
        }
    }
    // Medians: the machine is shared, and a round now and then is slow
    // for reasons of its own.
    let median = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    claims.sort_by(f64::total_cmp);
    println!("medians over {ROUNDS} rounds:");
    println!(
        "  claim + ack (batches of 1,000, one space): {:.0} events/s",
        claims[claims.len() / 2]
    );
    for (i, what) in ["steady", "churn", "churn one per call"].iter().enumerate() {
        let (c, o) = (&runs[2 * i], &runs[2 * i + 1]);
        let (cr, cu) = (median(c, |x| x.0), median(c, |x| x.1));
        let (or, ou) = (median(o, |x| x.0), median(o, |x| x.1));
        println!(
            "  {what}: closed {cr:.0}/s {cu:.2} us, open {or:.0}/s {ou:.2} us: \
             open/closed {:.2}x rate, {:.2}x redis time",
            or / cr,
            ou / cu
        );
    }
}
