//! Issue 38, webhooks in Pusher's format: `herenow serve --pusher-app
//! ID:KEY:SECRET --pusher-webhook URL`.
//!
//! - `tests/pusher/webhooks.test.js` is the app's endpoint: pusher-js
//!   joins a presence channel and whispers, and the npm `pusher`
//!   library's `webhook({headers, rawBody}).isValid()` and `getEvents()`
//!   accept every request;
//! - a receiver on 127.0.0.1 checks the body and `X-Pusher-Signature`
//!   independently of the server's signer: only presence channels' users
//!   are told;
//! - two servers on one Redis deliver each event once;
//! - events pending when a server stops are delivered after a restart,
//!   on the memory store with `--data-dir` and on Redis.
//!
//! Members come and go through herenow's own API here (`herenow seen` /
//! `leave` in the space `presence-…`): a presence channel is that space.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;
use support::{Server, temp_dir};

#[path = "../../herenow-server/tests/support/receiver.rs"]
mod receiver;
use receiver::{Received, Receiver, verify_pusher};

const APP: &str = "4242:herenow-key:herenow-secret-123";
const KEY: &str = "herenow-key";
const SECRET: &str = "herenow-secret-123";

/// The Node test folder, its packages installed (see `pusher_js.rs`).
fn node_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pusher");
    assert!(
        Command::new("node").arg("--version").output().is_ok(),
        "node not found: install Node.js and npm (apt-get install nodejs npm)"
    );
    if !dir.join("node_modules/pusher-js").is_dir() || !dir.join("node_modules/pusher").is_dir() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .status()
            .expect("run npm ci");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    dir
}

#[test]
fn issue_38_the_pusher_library_accepts_our_webhooks() {
    let dir = node_dir();
    let out = Command::new("node")
        .args(["--test", "--test-reporter=spec", "webhooks.test.js"])
        .current_dir(&dir)
        .env("HERENOW_BIN", support::BIN)
        .env("PUSHER_APP", APP)
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "webhooks.test.js failed:\n{stdout}\n{stderr}"
    );
    println!("{stdout}");
}

/// A request's events, after checking it is signed as Pusher signs.
fn pusher_events(request: &Received) -> Vec<Value> {
    assert_eq!(request.content_type, "application/json");
    assert_eq!(request.pusher_key, KEY);
    assert!(
        verify_pusher(SECRET, &request.body, &request.pusher_signature),
        "a bad signature: {}",
        request.pusher_signature
    );
    let body: Value = serde_json::from_slice(&request.body).expect("a JSON body");
    assert!(body["time_ms"].as_u64().is_some(), "{body}");
    body["events"].as_array().expect("events").clone()
}

/// `name channel user_id` of an event (`-` without a user).
fn said(e: &Value) -> String {
    format!(
        "{} {} {}",
        e["name"].as_str().unwrap(),
        e["channel"].as_str().unwrap(),
        e["user_id"].as_str().unwrap_or("-")
    )
}

/// Every event said, until `expected` all arrived, counting each.
async fn collect(rx: &mut Receiver, expected: &BTreeSet<String>) -> BTreeMap<String, u32> {
    let mut got: BTreeMap<String, u32> = BTreeMap::new();
    while !expected.iter().all(|e| got.contains_key(e)) {
        let request = rx.next_within(Duration::from_secs(30)).await;
        for e in pusher_events(&request) {
            *got.entry(said(&e)).or_default() += 1;
        }
    }
    got
}

fn outbox_depth(server: &Server) -> u64 {
    server.json(&["webhooks"])["outbox"]["depth"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

/// Waits, within 30 s, until every server's view of the outbox is empty.
async fn drained(servers: &[&Server]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while servers.iter().any(|s| outbox_depth(s) != 0) {
        assert!(
            Instant::now() < deadline,
            "never acknowledged: {}",
            servers[0].json(&["webhooks"])
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_38_presence_channels_are_told_in_pushers_format_and_nothing_else() {
    let mut rx = Receiver::start().await;
    let hook = format!("http://{}/pusher", rx.addr);
    let server = Server::start(&["--pusher-app", APP, "--pusher-webhook", &hook]);
    // Not a presence channel, and a guest: nothing Pusher tells.
    server.ok(&["seen", "lobby", "ann"]);
    server.ok(&["seen", "presence-room", "g1", "--guest"]);
    server.ok(&["seen", "presence-room", "ann", "bob"]);
    server.ok(&["leave", "presence-room", "ann"]);
    let expected = set(&[
        "channel_occupied presence-room -",
        "member_added presence-room ann",
        "member_added presence-room bob",
        "member_removed presence-room ann",
    ]);
    let mut got = collect(&mut rx, &expected).await;
    // Every event finished (the lobby's and the guest's at once, wanted
    // by no endpoint): whatever else was sent has arrived.
    drained(&[&server]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    while let Some(late) = rx.try_next() {
        for e in pusher_events(&late) {
            *got.entry(said(&e)).or_default() += 1;
        }
    }
    assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), expected);
    assert!(got.values().all(|n| *n == 1), "{got:?}");
    let view = server.json(&["webhooks"]);
    let endpoint = &view["endpoints"][0];
    assert_eq!(endpoint["name"], "pusher:0:4242:127.0.0.1", "{view}");
    assert_eq!(endpoint["delivered"], 4, "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_38_pusher_webhooks_pending_at_a_kill_are_delivered_after_a_restart() {
    let dir = temp_dir("pusher-webhooks-restart");
    // The endpoint is down: its port closes every connection at once
    // (held, so no other test's receiver binds it meanwhile).
    let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = down.local_addr().unwrap();
    let refusing = tokio::spawn(async move {
        loop {
            if let Ok((socket, _)) = down.accept().await {
                drop(socket);
            }
        }
    });
    let hook = format!("http://{addr}/pusher");
    let args = [
        "--data-dir",
        dir.to_str().unwrap(),
        "--pusher-app",
        APP,
        "--pusher-webhook",
        &hook,
    ];
    let mut server = Server::start(&args);
    server.ok(&["seen", "presence-a", "ann", "bob"]);
    server.ok(&["leave", "presence-a", "ann"]);
    // A write that waits for fdatasync, which covers every record before
    // it: the lazily journaled events are on disk too.
    server.ok(&["friends", "set", "zed", "amy"]);
    assert_eq!(outbox_depth(&server), 4);
    server.kill();
    refusing.abort();
    let _ = refusing.await;

    let mut rx = Receiver::on(tokio::net::TcpListener::bind(addr).await.unwrap());
    let server = Server::start(&args);
    let expected = set(&[
        "channel_occupied presence-a -",
        "member_added presence-a ann",
        "member_added presence-a bob",
        "member_removed presence-a ann",
    ]);
    let got = collect(&mut rx, &expected).await;
    assert!(got.values().all(|n| *n == 1), "{got:?}");
    drained(&[&server]).await;
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use herenow_testkit::{RedisCluster, RedisServer};

    fn start(redis: &RedisServer, hook: &str) -> Server {
        start_on(&redis.url(), hook)
    }

    fn start_on(store: &str, hook: &str) -> Server {
        Server::start(&[
            "--store",
            store,
            "--pusher-app",
            APP,
            "--pusher-webhook",
            hook,
            "--webhook-timeout",
            "1s",
            "--webhook-reclaim",
            "2s",
        ])
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn issue_38_two_servers_on_one_redis_deliver_each_pusher_event_once() {
        let redis = RedisServer::standalone();
        two_servers_deliver_each_event_once(&redis.url()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn issue_38_two_servers_on_a_redis_cluster_deliver_each_pusher_event_once() {
        let cluster = RedisCluster::start();
        two_servers_deliver_each_event_once(&cluster.url()).await;
    }

    async fn two_servers_deliver_each_event_once(store: &str) {
        let mut rx = Receiver::start().await;
        let hook = format!("http://{}/pusher", rx.addr);
        let a = start_on(store, &hook);
        let b = start_on(store, &hook);
        let mut expected = BTreeSet::new();
        for s in 0..6 {
            let channel = format!("presence-{s}");
            // Members join through one server and leave through the other.
            a.ok(&["seen", &channel, "ann", "bob"]);
            b.ok(&["leave", &channel, "ann", "bob"]);
            for name in ["channel_occupied", "channel_vacated"] {
                expected.insert(format!("{name} {channel} -"));
            }
            for who in ["ann", "bob"] {
                expected.insert(format!("member_added {channel} {who}"));
                expected.insert(format!("member_removed {channel} {who}"));
            }
        }
        let mut got = collect(&mut rx, &expected).await;
        drained(&[&a, &b]).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        while let Some(late) = rx.try_next() {
            for e in pusher_events(&late) {
                *got.entry(said(&e)).or_default() += 1;
            }
        }
        assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), expected);
        let twice: Vec<_> = got.iter().filter(|(_, n)| **n != 1).collect();
        assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn issue_38_pusher_events_pending_on_redis_are_delivered_after_a_restart() {
        let redis = RedisServer::standalone();
        let refused = support::RefusedPort::new();
        let mut first = start(&redis, &format!("http://127.0.0.1:{}/pusher", refused.port));
        first.ok(&["seen", "presence-r", "ann"]);
        first.ok(&["leave", "presence-r", "ann"]);
        // Claimed by the first server, which fails to deliver and stops.
        let deadline = Instant::now() + Duration::from_secs(30);
        while first.json(&["webhooks"])["outbox"]["pending"] != 4 {
            assert!(Instant::now() < deadline, "{}", first.json(&["webhooks"]));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(first.terminate().success(), "{}", first.log());

        let mut rx = Receiver::start().await;
        let second = start(&redis, &format!("http://{}/pusher", rx.addr));
        let expected = set(&[
            "channel_occupied presence-r -",
            "member_added presence-r ann",
            "member_removed presence-r ann",
            "channel_vacated presence-r -",
        ]);
        let got = collect(&mut rx, &expected).await;
        assert!(got.values().all(|n| *n == 1), "{got:?}");
        drained(&[&second]).await;
    }
}
