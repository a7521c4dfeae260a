//! Issue 13: a partition, not a refusal. Redis runs in a network
//! namespace of the test's own, behind a veth pair; the path is cut for
//! 20 s by taking the namespace's end of the pair down: the host's end
//! loses its carrier and silently drops what it sends, the namespace sends
//! nothing (no RST, no FIN: connections just go silent, and new ones wait
//! for a SYN-ACK that never comes), then it is healed. No request may
//! hang past the server's timeouts, nothing acknowledged may be lost, and
//! the server must recover by itself.
//!
//! Needs root (or CAP_NET_ADMIN) and a kernel with network namespaces;
//! where either is missing the test says so and passes without running,
//! as the issue asks. (`tc netem` would drop packets with the link up,
//! but its module is missing on the machines here.)
#![cfg(feature = "redis")]

mod support;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use herenow_core::{ManualClock, SpaceConfig};
use herenow_redis::{RedisOptions, RedisStore};
use herenow_server::Config;
use serde_json::json;
use support::http::Api;
use support::{T0, redis_state};

/// A namespace holding a redis-server, reachable over a veth pair; all
/// removed on drop.
struct Isolated {
    ns: String,
    host_if: String,
    redis: Child,
    addr: String,
}

fn run(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Isolated {
    /// `None` (with the reason printed) where namespaces or netem cannot
    /// be used here.
    fn start() -> Option<Isolated> {
        let id = std::process::id() % 60_000;
        let ns = format!("hn-part-{id}");
        let (host_if, ns_if) = (format!("hnh{id}"), format!("hnr{id}"));
        let octet = 1 + id % 250;
        let (host_ip, ns_ip) = (format!("10.213.{octet}.1"), format!("10.213.{octet}.2"));
        if !run(&["ip", "netns", "add", &ns]) {
            eprintln!("partition test skipped: `ip netns add` is not allowed here");
            return None;
        }
        let ok = run(&[
            "ip", "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
        ]) && run(&["ip", "link", "set", &ns_if, "netns", &ns])
            && run(&[
                "ip",
                "addr",
                "add",
                &format!("{host_ip}/30"),
                "dev",
                &host_if,
            ])
            && run(&["ip", "link", "set", &host_if, "up"])
            && run(&[
                "ip",
                "netns",
                "exec",
                &ns,
                "ip",
                "addr",
                "add",
                &format!("{ns_ip}/30"),
                "dev",
                &ns_if,
            ])
            && run(&[
                "ip", "netns", "exec", &ns, "ip", "link", "set", &ns_if, "up",
            ])
            && run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);
        if !ok {
            eprintln!("partition test skipped: could not set up a veth pair");
            run(&["ip", "link", "del", &host_if]);
            run(&["ip", "netns", "del", &ns]);
            return None;
        }
        let port = 6379;
        let redis = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                &herenow_testkit::server_binary(),
                "--bind",
                &ns_ip,
            ])
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts in the namespace");
        let addr = format!("{ns_ip}:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_millis(200))
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "redis in the namespace never answered"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Isolated {
            ns,
            host_if,
            redis,
            addr,
        })
    }

    /// Cuts the path (every packet dropped, nothing closed), or heals it.
    fn cut(&self, cut: bool) {
        let ns_if = self.host_if.replacen("hnh", "hnr", 1);
        let state = if cut { "down" } else { "up" };
        assert!(run(&[
            "ip", "netns", "exec", &self.ns, "ip", "link", "set", &ns_if, state,
        ]));
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        let _ = self.redis.kill();
        let _ = self.redis.wait();
        run(&["ip", "link", "del", &self.host_if]);
        run(&["ip", "netns", "del", &self.ns]);
    }
}

/// The API over a Redis store at `url` with short timeouts.
async fn harness(url: &str) -> (Api, Arc<RedisStore>, ManualClock) {
    let clock = ManualClock::new(T0);
    let store = Arc::new(
        RedisStore::connect(
            url,
            Arc::new(clock.clone()),
            SpaceConfig::default(),
            RedisOptions {
                timeout: Duration::from_millis(500),
                ..RedisOptions::default()
            },
        )
        .await
        .expect("connect to the test's redis"),
    );
    let config = Config {
        request_timeout: Duration::from_secs(2),
        ..Config::default()
    };
    let h = Api::over(redis_state(store.clone(), &config), clock.clone());
    (h, store, clock)
}

/// Heartbeats and reads while `cut` keeps Redis unreachable for `secs`:
/// none hangs, heartbeats are acknowledged; after `cut(false)` the server
/// recovers by itself and every acknowledged heartbeat is in Redis.
async fn ride_out(h: &Api, store: &RedisStore, clock: &ManualClock, cut: impl Fn(bool), secs: u64) {
    h.post("/v1/spaces/lobby/heartbeat", json!({"id": "before"}))
        .await
        .ok();
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);

    cut(true);
    let cut_at = Instant::now();
    let mut acknowledged = Vec::new();
    let mut i = 0;
    while cut_at.elapsed() < Duration::from_secs(secs) {
        clock.advance(Duration::from_millis(100));
        let id = format!("during-{i}");
        i += 1;
        let started = Instant::now();
        let beat = h
            .post("/v1/spaces/lobby/heartbeat", json!({ "id": id }))
            .await;
        let read = h.get("/v1/spaces/lobby/online").await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "a heartbeat and a read took {took:?} while Redis was unreachable"
        );
        if beat.status.is_success() {
            acknowledged.push(id);
        }
        assert!(
            read.status == StatusCode::OK || read.status == StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            read.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !acknowledged.is_empty(),
        "heartbeats are buffered and acknowledged meanwhile"
    );
    h.get("/readyz").await.unavailable("not-ready");

    cut(false);
    // Recovers by itself: the replayer pings and writes the buffer back.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !store.is_ready() {
        assert!(
            Instant::now() < deadline,
            "never recovered after Redis was back: {:?}",
            store.stats()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
    let mut ids: Vec<serde_json::Value> =
        acknowledged.iter().map(|id| json!({ "id": id })).collect();
    ids.push(json!({"id": "before"}));
    let st = h
        .post("/v1/spaces/lobby/status", json!({ "members": ids }))
        .await
        .ok();
    for m in st["members"].as_array().unwrap() {
        assert!(
            !m["last_seen_ms"].is_null(),
            "an acknowledged heartbeat was lost: {m}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_of_twenty_seconds_hangs_nothing_and_loses_nothing() {
    let Some(net) = Isolated::start() else {
        return;
    };
    let (h, store, clock) = harness(&format!("redis://{}", net.addr)).await;
    ride_out(&h, &store, &clock, |c| net.cut(c), 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stops_answering_hangs_nothing_and_loses_nothing() {
    // SIGSTOP: the process holds its connections open and answers nothing,
    // the worst kind of slow.
    let redis = herenow_testkit::RedisServer::standalone();
    let (h, store, clock) = harness(&redis.url()).await;
    let signal = |stop: bool| {
        if stop {
            redis.pause();
        } else {
            redis.resume();
        }
    };
    ride_out(&h, &store, &clock, signal, 10).await;
}
