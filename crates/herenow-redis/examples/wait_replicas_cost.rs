//! What waiting for a replica (`RedisOptions::wait_replicas`, the
//! server's `--redis-wait-replicas 1`) costs heartbeats: the same work
//! through a store that acknowledges once the master has a write and one
//! that waits for its replica (`WAIT 1`), rounds alternating, on a Redis
//! Cluster of three masters with a replica each that this example starts
//! itself. Two workloads over six spaces (two per master), every round at
//! a new time so each heartbeat really writes (an unchanged score is not
//! replicated, and `WAIT` would have nothing to wait for):
//!
//! - batches: one caller, 1,000 members per call, calls one after another;
//! - singles: 256 concurrent callers, one member per call (the flusher
//!   merges them into rounds, and the waits into one per slot at a time).
//!
//! It prints heartbeats per second for each, the medians and the median of
//! the per-round ratios (the machine is shared: rounds next to each other
//! see the same noise), the `WAIT`s and `ROLE`s the masters ran per
//! heartbeat of the waiting store (`INFO commandstats`), and the writes it
//! acknowledged without its replica (expected 0). `ROUNDS` (default 11)
//! sets the rounds.
//!
//! ```sh
//! cargo run --release -p herenow-redis --example wait_replicas_cost
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use herenow_core::{
    Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;
/// Members per space.
const MEMBERS: usize = 5_000;
const SPACES: usize = 6;
const CALLERS: usize = 256;

/// Calls of `cmd` every running node of `cluster` has run.
fn calls(cluster: &herenow_testkit::RedisCluster, cmd: &str) -> u64 {
    let prefix = format!("cmdstat_{cmd}:calls=");
    cluster
        .nodes
        .iter()
        .filter_map(|n| herenow_testkit::raw_command(n.port, "INFO commandstats").ok())
        .flat_map(|stats| {
            stats
                .lines()
                .filter_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .filter_map(|rest| rest.split(',').next().and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

async fn connect(url: &str, clock: &ManualClock, prefix: &str, wait: u16) -> RedisStore {
    RedisStore::connect(
        url,
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        RedisOptions {
            prefix: prefix.into(),
            wait_replicas: wait,
            ..RedisOptions::default()
        },
    )
    .await
    .unwrap()
}

/// Every member of every space, in calls of 1,000, one after another.
async fn batches(s: &RedisStore, spaces: &[SpaceName], members: &[MemberKey]) {
    for sp in spaces {
        for chunk in members.chunks(1_000) {
            let beats: Vec<Heartbeat> = chunk.iter().cloned().map(Heartbeat::now).collect();
            s.heartbeat(sp, &beats).await.unwrap();
        }
    }
}

/// `n` heartbeats, one member per call, from [`CALLERS`] concurrent
/// callers spread over the spaces.
async fn singles(s: &Arc<RedisStore>, spaces: &[SpaceName], members: &[MemberKey], n: usize) {
    let per = n / CALLERS;
    let tasks: Vec<_> = (0..CALLERS)
        .map(|c| {
            let s = s.clone();
            let sp = spaces[c % spaces.len()].clone();
            let members: Vec<MemberKey> = (0..per)
                .map(|i| members[(c * per + i) % members.len()].clone())
                .collect();
            tokio::spawn(async move {
                for m in members {
                    s.heartbeat(&sp, &[Heartbeat::now(m)]).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

fn median(v: &[f64]) -> f64 {
    let mut x = v.to_vec();
    x.sort_by(f64::total_cmp);
    x[x.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cluster = herenow_testkit::RedisCluster::start_with_replicas(Duration::from_secs(5));
    let url = cluster.url();
    let clock = ManualClock::new(T0);
    let plain = Arc::new(connect(&url, &clock, "plain", 0).await);
    let waiting = Arc::new(connect(&url, &clock, "wait", 1).await);
    let spaces: Vec<SpaceName> = (0..SPACES)
        .map(|i| SpaceName::new(&format!("cost-{i}")).unwrap())
        .collect();
    let members: Vec<MemberKey> = (0..MEMBERS)
        .map(|i| MemberKey::user(MemberId::new(&format!("u{i:06}")).unwrap()))
        .collect();
    // Present first, in both.
    batches(&plain, &spaces, &members).await;
    batches(&waiting, &spaces, &members).await;
    let total = SPACES * MEMBERS;
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(11);
    let mut rates: [Vec<f64>; 4] = Default::default();
    let (waits0, roles0) = (calls(&cluster, "wait"), calls(&cluster, "role"));
    let mut waited = 0;
    for round in 0..rounds {
        let rows: [(&str, &Arc<RedisStore>, bool); 4] = [
            ("batches, no wait", &plain, false),
            ("batches, WAIT 1 ", &waiting, false),
            ("singles, no wait", &plain, true),
            ("singles, WAIT 1 ", &waiting, true),
        ];
        for (i, (what, s, single)) in rows.into_iter().enumerate() {
            clock.advance(Duration::from_millis(1_000));
            let t = Instant::now();
            let n = if single {
                let n = total / 4;
                singles(s, &spaces, &members, n).await;
                n
            } else {
                batches(s, &spaces, &members).await;
                total
            };
            let rate = n as f64 / t.elapsed().as_secs_f64();
            if i % 2 == 1 {
                waited += n;
            }
            println!("round {round} {what}: {rate:>9.0} heartbeats/s ({n})");
            rates[i].push(rate);
        }
    }
    let (waits, roles) = (
        calls(&cluster, "wait") - waits0,
        calls(&cluster, "role") - roles0,
    );
    println!("medians over {rounds} rounds (3 masters + 3 replicas on this machine):");
    for (i, what) in ["batches of 1,000", "single heartbeats, 256 callers"]
        .iter()
        .enumerate()
    {
        let (p, w) = (&rates[2 * i], &rates[2 * i + 1]);
        let ratios: Vec<f64> = w.iter().zip(p).map(|(w, p)| w / p).collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
        println!(
            "  {what}: no wait {:.0}/s, WAIT 1 {:.0}/s; per-round WAIT/no-wait median {:.2}x \
             (range {lo:.2}-{hi:.2})",
            median(p),
            median(w),
            median(&ratios),
        );
    }
    println!(
        "  the waiting store: {waited} heartbeats, {waits} WAITs ({:.0} heartbeats per WAIT), \
         {roles} ROLEs; writes acknowledged without the replica: {}",
        waited as f64 / waits.max(1) as f64,
        waiting.stats().unreplicated
    );
}
