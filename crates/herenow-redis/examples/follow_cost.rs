//! What announcing status changes on users' channels costs Redis: batches
//! of 1,000 heartbeats that are all joins, then all leaves, on a
//! redis-server (and a 3-master cluster) this example starts itself;
//! Redis' own time per member from `INFO commandstats`.
//!
//! ```sh
//! cargo run --release -p herenow-redis --example follow_cost
//! ```

use std::sync::Arc;

use herenow_core::{
    Heartbeat, ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName,
};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;

fn evalsha_usec(ports: &[u16]) -> (f64, f64) {
    let mut calls = 0f64;
    let mut usec = 0f64;
    for &p in ports {
        let stats = herenow_testkit::raw_command(p, "INFO commandstats").unwrap();
        for line in stats.lines() {
            if let Some(rest) = line.strip_prefix("cmdstat_evalsha:") {
                for f in rest.split(',') {
                    let (k, v) = f.split_once('=').unwrap();
                    match k {
                        "calls" => calls += v.parse::<f64>().unwrap(),
                        "usec" => usec += v.parse::<f64>().unwrap(),
                        _ => {}
                    }
                }
            }
        }
    }
    (calls, usec)
}

async fn run(what: &str, url: &str, ports: &[u16]) {
    let clock = ManualClock::new(T0);
    let s = RedisStore::connect(
        url,
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        RedisOptions::default(),
    )
    .await
    .unwrap();
    let sp = SpaceName::new("cost").unwrap();
    let members: Vec<MemberKey> = (0..100_000)
        .map(|i| MemberKey::user(MemberId::new(&format!("u:{i:09}")).unwrap()))
        .collect();
    for round in 0..3 {
        for &p in ports {
            herenow_testkit::raw_command(p, "CONFIG RESETSTAT").unwrap();
        }
        for chunk in members.chunks(1_000) {
            let beats: Vec<Heartbeat> = chunk.iter().cloned().map(Heartbeat::now).collect();
            s.heartbeat(&sp, &beats).await.unwrap();
        }
        let (c, u) = evalsha_usec(ports);
        println!(
            "{what} round {round}: joins  {:.2} us/member ({c} calls)",
            u / 100_000.0
        );
        for &p in ports {
            herenow_testkit::raw_command(p, "CONFIG RESETSTAT").unwrap();
        }
        for chunk in members.chunks(1_000) {
            s.leave(&sp, chunk).await.unwrap();
        }
        let (c, u) = evalsha_usec(ports);
        println!(
            "{what} round {round}: leaves {:.2} us/member ({c} calls)",
            u / 100_000.0
        );
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = herenow_testkit::RedisServer::standalone();
    run("standalone", &server.url(), &[server.port]).await;
    let cluster = herenow_testkit::RedisCluster::start();
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    run("cluster", &cluster.url(), &ports).await;
}
