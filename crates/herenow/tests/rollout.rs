//! Presence that neither flickers nor lies when a server goes away (issue
//! 43), with the real clients: `tests/pusher/rollout.js` puts 100
//! pusher-js members and 100 members of herenow's browser client (over
//! `/v1/ws`) on server A of two `herenow serve` on one Redis (or a Redis
//! Cluster), through a local TCP proxy standing in for a load balancer,
//! with observers of both protocols on server B. The proxy then sends new
//! connections to B and A is stopped:
//!
//! - SIGTERM, a rolling restart: every member reconnects to B, and no
//!   observer sees a member leave or join; rosters and APIs end exact;
//! - SIGKILL, a crash: members who come back through B never leave; those
//!   who do not are gone for the observers and in B's APIs within 5 s and
//!   the grace.

mod support;

use std::process::Command;

use herenow_testkit::{RedisCluster, RedisServer};
use support::Server;
use support::pusher_node::{machine_lock, node_dir};

const APP: &str = "4242:herenow-key:herenow-secret-123";
const SECRET: &str = "rollout-token-secret-rollout-token-secret";

/// Starts A and B on `store`, runs rollout.js in `mode`, checks A stopped
/// as told; the script's output.
fn go_away(store: &str, mode: &str) -> String {
    go_away_with(store, mode, "5s")
}

/// [`go_away`] with servers started with `--grace GRACE` (`0` or `5s`).
fn go_away_with(store: &str, mode: &str, grace: &str) -> String {
    // Hundreds of sockets and two servers: one such test at a time.
    let _turn = machine_lock("rollout");
    let dir = node_dir();
    let args = [
        "--store",
        store,
        "--pusher-app",
        APP,
        "--token-secret",
        SECRET,
        "--grace",
        grace,
    ];
    let mut a = Server::start(&args);
    let b = Server::start(&args);
    let out = Command::new("node")
        .args(["--experimental-websocket", "rollout.js"])
        .current_dir(&dir)
        .env("A_URL", a.url())
        .env("B_URL", b.url())
        .env("A_PID", a.pid().to_string())
        .env("PUSHER_APP", APP)
        .env("MODE", mode)
        .env("MEMBERS", "100")
        .env("GRACE_MS", if grace == "0" { "0" } else { "5000" })
        .output()
        .expect("run node rollout.js");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let status = a.wait_exit();
    assert!(
        out.status.success(),
        "rollout.js {mode} failed:\n{stdout}\n{stderr}\nA's log:\n{}\nB's log:\n{}",
        a.log(),
        b.log()
    );
    match mode {
        "term" => assert!(status.success(), "A after SIGTERM: {status:?}\n{}", a.log()),
        _ => assert!(!status.success(), "A after SIGKILL: {status:?}"),
    }
    assert!(!b.log().contains("panicked"), "B's log:\n{}", b.log());
    println!("{stdout}");
    stdout
}

#[test]
fn a_rolling_restart_on_redis_shows_no_member_leave() {
    let redis = RedisServer::standalone();
    let out = go_away(&redis.url(), "term");
    assert!(
        out.contains("members seen leaving by the observers: 0"),
        "{out}"
    );
}

#[test]
fn a_rolling_restart_on_a_redis_cluster_shows_no_member_leave() {
    let cluster = RedisCluster::start();
    let out = go_away(&cluster.url(), "term");
    assert!(
        out.contains("members seen leaving by the observers: 0"),
        "{out}"
    );
}

#[test]
fn a_crashed_server_leaves_no_ghosts_and_returning_members_never_leave() {
    let redis = RedisServer::standalone();
    let out = go_away(&redis.url(), "kill");
    assert!(out.contains("did not come back were gone"), "{out}");
}

#[test]
fn a_crashed_server_on_a_redis_cluster_leaves_no_ghosts() {
    let cluster = RedisCluster::start();
    let out = go_away(&cluster.url(), "kill");
    assert!(out.contains("did not come back were gone"), "{out}");
}

#[test]
fn without_a_grace_a_rolling_restart_shows_every_member_leave_and_come_back() {
    let redis = RedisServer::standalone();
    let out = go_away_with(&redis.url(), "term", "0");
    assert!(
        out.contains("without a grace: members seen leaving by the observers: 200"),
        "{out}"
    );
}
