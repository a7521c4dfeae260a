//! `herenow serve --store redis://…` and `redis+cluster://…` end to end:
//! two real server processes over one `redis-server` (and one 3-master
//! cluster) started by the test, written through one and read and
//! subscribed through the other; a Redis that cannot be reached at start
//! and `--data-dir` with Redis are refused loudly.
//!
//! Servers are started by `support::Server` (shared with `e2e.rs`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use herenow_testkit::{RedisCluster, RedisServer, raw_command};

mod support;
use support::{DEADLINE, RefusedPort, Server, herenow, now_ms, stderr, ws_read, ws_with_token};

/// `GET path` on `server`: the status code and the body.
fn get(server: &Server, path: &str) -> (u16, String) {
    let addr = server.addr();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, answer)
}

/// Opens `GET /v1/spaces/SPACE/events` on `server` and waits for its
/// snapshot, so the stream is subscribed before the caller makes anything
/// happen.
fn subscribe(server: &Server, space: &str) -> EventStream {
    let addr = server.addr();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(
        s,
        "GET /v1/spaces/{space}/events HTTP/1.1\r\nHost: {addr}\r\n\
         Accept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut stream = EventStream {
        socket: s,
        seen: String::new(),
    };
    stream.wait_for(&["event: snapshot"]);
    stream
}

/// An open event stream, read as raw text (HTTP chunk headers included,
/// which never split an event's short lines here).
struct EventStream {
    socket: TcpStream,
    seen: String,
}

impl EventStream {
    /// Reads until one event block contains every needle, within
    /// [`DEADLINE`]; returns that block.
    fn wait_for(&mut self, needles: &[&str]) -> String {
        let started = Instant::now();
        let mut buf = [0u8; 8192];
        loop {
            if let Some(block) = self
                .seen
                .split("\n\n")
                .find(|b| needles.iter().all(|n| b.contains(n)))
            {
                return block.to_owned();
            }
            assert!(
                started.elapsed() < DEADLINE,
                "no event with {needles:?}; stream so far:\n{}",
                self.seen
            );
            match self.socket.read(&mut buf) {
                Ok(0) => panic!("stream ended; so far:\n{}", self.seen),
                Ok(n) => self
                    .seen
                    .push_str(&String::from_utf8_lossy(&buf[..n]).replace("\r\n", "\n")),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("reading the stream: {e}"),
            }
        }
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no members in {page}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Heartbeats through A; list, count, status and events through B.
fn two_servers_share_one_state(store: &str) {
    let a = Server::start(&["--store", store]);
    let b = Server::start(&["--store", store]);
    let mut events = subscribe(&b, "lobby");

    a.ok(&["seen", "lobby", "ada", "grace"]);
    a.ok(&["seen", "lobby", "10.0.0.7", "--guest"]);

    let online = b.json(&["online", "lobby", "--all"]);
    let mut got = ids(&online);
    got.sort();
    assert_eq!(got, ["10.0.0.7", "ada", "grace"], "{online}");
    let count = b.json(&["count", "lobby"]);
    assert_eq!(count["users"], 2, "{count}");
    assert_eq!(count["guests"], 1, "{count}");
    let status = b.json(&["status", "lobby", "ada", "nobody"]);
    assert_eq!(status["members"][0]["status"], "online", "{status}");
    assert_eq!(status["members"][1]["status"], "offline", "{status}");

    // A's heartbeats reach B's subscriber through Redis pub/sub.
    let join = events.wait_for(&["event: join", r#""id":"ada""#]);
    assert!(join.contains(r#""space":"lobby""#), "{join}");
    events.wait_for(&["event: join", r#""id":"10.0.0.7""#, r#""kind":"guest""#]);

    // And the other way round: a leave through B, seen by A.
    b.ok(&["leave", "lobby", "grace"]);
    events.wait_for(&["event: leave", r#""id":"grace""#]);
    let online = a.json(&["online", "lobby"]);
    assert_eq!(ids(&online), ["ada"], "{online}");

    for (s, op) in [(&a, "heartbeat"), (&b, "list")] {
        assert_eq!(get(s, "/readyz").0, 200, "{}", s.log());
        let (_, metrics) = get(s, "/metrics");
        assert!(metrics.contains(r#"store="redis""#), "{metrics}");
        // Each server times its calls to Redis by what they were for.
        assert!(
            timed_calls(&metrics, op) >= 1.0,
            "no {op} call timed:\n{metrics}"
        );
    }
}

/// How many of a server's calls to Redis for `op` its `/metrics` text
/// counts.
fn timed_calls(metrics: &str, op: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("herenow_redis_command_duration_seconds_count{")
                && l.contains(&format!(r#"op="{op}""#))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn two_servers_share_one_redis_server() {
    let redis = RedisServer::standalone();
    two_servers_share_one_state(&redis.url());
}

#[test]
fn two_servers_share_one_redis_cluster() {
    let cluster = RedisCluster::start();
    two_servers_share_one_state(&cluster.url());
}

#[test]
fn serve_fails_fast_when_redis_cannot_be_reached() {
    // A port nobody listens on, held so for the whole test.
    let refused = RefusedPort::new();
    let store = format!("redis://127.0.0.1:{}", refused.port);
    let started = Instant::now();
    let out = herenow()
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("herenow: "), "{err}");
    assert!(last.contains(&store), "the address is named: {err}");
    assert!(out.stdout.is_empty(), "it must not have started listening");
}

#[test]
fn serve_refuses_a_data_dir_with_redis() {
    let out = herenow()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "redis://127.0.0.1:1",
            "--data-dir",
            "/tmp/herenow-never-created",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--data-dir"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(!std::path::Path::new("/tmp/herenow-never-created").exists());
}

#[test]
fn serve_refuses_unknown_stores_naming_the_accepted_ones() {
    let out = herenow()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "valkey://127.0.0.1:6379",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    for needle in ["redis[s]+cluster://", "rediss: TLS"] {
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }
}

/// `rediss://`: herenow talks to a TLS-only Redis port whose certificate a
/// test CA signed, trusting that CA through `SSL_CERT_FILE`; without it the
/// certificate is refused at start, loudly.
#[test]
fn serve_speaks_tls_to_redis_and_checks_the_certificate() {
    let redis = RedisServer::standalone_tls();
    let ca = redis.ca_file();
    let ca = ca.to_str().unwrap();

    // Not trusted: the server refuses to start rather than talk in clear
    // or skip the check.
    let out = herenow()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            &redis.tls_url(),
        ])
        .env("SSL_CERT_FILE", "/nonexistent/ca.pem")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("127.0.0.1"), "{}", stderr(&out));

    let server = Server::start_with_env(&["--store", &redis.tls_url()], &[("SSL_CERT_FILE", ca)]);
    server.ok(&["seen", "tls-room", "ada"]);
    let online = server.ok(&["online", "tls-room", "--json"]);
    let v: Value = serde_json::from_str(&online).unwrap();
    assert_eq!(v["members"][0]["id"], "ada", "{online}");
    // It went through TLS into that Redis: its plain port sees the key.
    let keys = raw_command(redis.port, "KEYS *tls-room*").unwrap();
    assert!(keys.contains("tls-room"), "{keys}");
}

/// Seed 001's code (`ZADD whos_online:users <unix seconds> <name>`,
/// `ZRANGEBYSCORE` for the last 15 minutes) and herenow on the same key:
/// each sees the other's who's-online.
#[test]
fn serve_shares_seed_001s_sorted_set_with_the_seeds_code() {
    let redis = RedisServer::standalone();
    let server = Server::start(&[
        "--store",
        &redis.url(),
        "--redis-layout",
        "sorted-set",
        "--redis-key",
        "whos_online:users",
    ]);
    server.ok(&["seen", "lobby", "ada"]);
    let now = now_ms() / 1000;
    // What the seed's reader sees: herenow wrote whole seconds.
    let seen = raw_command(
        redis.port,
        &format!(
            "ZRANGEBYSCORE whos_online:users {} +inf WITHSCORES",
            now - 900
        ),
    )
    .unwrap();
    assert!(seen.contains("ada"), "{seen}");
    // What the seed's writer does, read back by herenow.
    raw_command(redis.port, &format!("ZADD whos_online:users {now} sally")).unwrap();
    let online = server.json(&["online", "lobby"]);
    let mut got = ids(&online);
    got.sort();
    assert_eq!(got, ["ada", "sally"], "{online}");
    let status = server.json(&["status", "lobby", "sally"]);
    assert_eq!(status["members"][0]["last_seen_ms"], now * 1000, "{status}");
    // Metadata has no place in the seed's layout: a clear 501, not a guess.
    let out = herenow()
        .args([
            "seen",
            "lobby",
            "ada",
            "--meta",
            r#"{"a":1}"#,
            "--server",
            server.url(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("unsupported"), "{}", stderr(&out));
    // A seed's layout times its calls too.
    let (_, metrics) = get(&server, "/metrics");
    assert!(timed_calls(&metrics, "heartbeat") >= 1.0, "{metrics}");
}

/// Issue 13, "Seed 000 in place": under `--redis-layout rotation`,
/// `herenow online site` (no order asked) answers over seed 000's sets, by
/// id, and the answer says `"order": "id"`; asking for `--order recent`
/// is still a clear 501.
#[test]
fn issue_13_herenow_online_answers_over_seed_000s_sets() {
    let redis = RedisServer::standalone();
    let server = Server::start(&[
        "--store",
        &redis.url(),
        "--redis-layout",
        "rotation",
        "--redis-key",
        "wo_user_{generation}",
    ]);
    // The seed's report_user, and a member of the generation before.
    raw_command(redis.port, "SADD wo_user_current carol").unwrap();
    raw_command(redis.port, "SADD wo_user_old bob").unwrap();
    server.ok(&["seen", "site", "ada"]);
    let online = server.json(&["online", "site"]);
    assert_eq!(ids(&online), ["ada", "bob", "carol"], "{online}");
    assert_eq!(online["order"], "id", "{online}");
    let table = server.ok(&["online", "site"]);
    assert!(table.contains("carol"), "{table}");
    let out = herenow()
        .args([
            "online",
            "site",
            "--order",
            "recent",
            "--server",
            server.url(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("unsupported"), "{}", stderr(&out));
}

/// Issue 35, "a store seam of capabilities": a seed's layout keeps no
/// webhook outbox and no spaces' endpoints, so `--webhook` and a lone
/// `--webhook-secret` are refused at start (a configuration error, exit
/// 2), naming the flag and the layout, before the "listening" line; nor
/// live connections, so `--pusher-app` (presence channels) is refused too.
#[test]
fn issue_35_serve_refuses_webhook_flags_on_a_seed_layout() {
    let redis = RedisServer::standalone();
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    for (flags, needle) in [
        (
            &[
                "--webhook",
                "https://example.com/hook",
                "--webhook-secret",
                secret,
            ][..],
            "--webhook needs",
        ),
        (&["--webhook-secret", secret][..], "--webhook-secret needs"),
        (
            &["--pusher-app", "1:app-key:a-secret-long-enough-for-pusher"][..],
            "--pusher-app needs",
        ),
    ] {
        let out = herenow()
            .args(["serve", "--listen", "127.0.0.1:0", "--store", &redis.url()])
            .args([
                "--redis-layout",
                "sorted-set",
                "--redis-key",
                "whos_online:users",
            ])
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{flags:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("redis layout sorted-set"),
            "{flags:?}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn serve_refuses_layout_flags_that_do_not_fit() {
    for (args, needle) in [
        (&["--redis-layout", "rotation"][..], "--store redis"),
        (
            &[
                "--store",
                "redis://127.0.0.1:1",
                "--redis-layout",
                "rotation",
            ][..],
            "--redis-key",
        ),
        (
            &["--store", "redis://127.0.0.1:1", "--redis-key", "k"][..],
            "--redis-layout",
        ),
        (
            &[
                "--store",
                "redis://127.0.0.1:1",
                "--redis-layout",
                "buckets",
            ][..],
            "minute-buckets",
        ),
    ] {
        let out = herenow()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
}

/// Issue 4's "no ghosts" across servers: a user connected by WebSocket to
/// server A, whose process is then killed (SIGKILL: no detach, no close
/// frame), is offline on server B once the connection's TTL has run out —
/// B's sweep closes connections nobody pings any more.
#[test]
fn a_killed_server_leaves_no_ghosts() {
    let redis = RedisServer::standalone();
    let url = redis.url();
    let args = [
        "--store",
        &url,
        "--token-secret",
        "one-secret-for-both-servers-32-bytes-long",
        "--ws-ttl",
        "2s",
    ];
    let mut a = Server::start(&args);
    let b = Server::start(&args);
    let token = b.ok(&["token", "ann", "--space", "room:ghost"]);
    let (mut ws, welcome) = ws_with_token(&a, token.trim());
    assert_eq!(welcome.expect("welcome")["type"], "welcome");
    ws.send(tungstenite::Message::text(
        r#"{"type":"join","space":"room:ghost","ref":1}"#,
    ))
    .unwrap();
    assert_eq!(ws_read(&mut ws).expect("ok")["type"], "ok");
    let online = |s: &Server| s.json(&["online", "room:ghost"])["members"].clone();
    assert_eq!(online(&b)[0]["id"], "ann", "B sees the socket on A");

    a.kill();
    let killed = Instant::now();
    // The bound: the TTL, plus B's sweep interval, plus the sweep lease A
    // may have held when it died (10 s by default), plus slack for a
    // loaded machine. Polled, not slept: B answers as soon as it knows.
    let bound = Duration::from_secs(2 + 1 + 10 + 5);
    loop {
        let members = online(&b);
        if members.as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(
            killed.elapsed() < bound,
            "ann is still online {:?} after A died: {members}",
            killed.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("ghost gone {:?} after the kill", killed.elapsed());
    let status = b.json(&["status", "room:ghost", "ann"]);
    assert_eq!(status["members"][0]["status"], "offline", "{status}");
    drop(ws);
}

/// `--redis-shards`: a space split over 4 shard keys (their own hash tags)
/// answers as one; sharding without herenow's Redis layout is refused.
#[test]
fn serve_splits_spaces_over_redis_shards() {
    let redis = RedisServer::standalone();
    let server = Server::start(&["--store", &redis.url(), "--redis-shards", "4"]);
    let ids: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let mut args = vec!["seen", "big"];
    args.extend(ids.iter().map(String::as_str));
    server.ok(&args);
    let count = server.json(&["count", "big"]);
    assert_eq!(count["users"], 40, "{count}");
    let page = server.json(&["online", "big", "--limit", "25"]);
    assert_eq!(page["members"].as_array().unwrap().len(), 25, "{page}");
    // The members are spread over the shards' keys.
    for shard in ["{big}", "{big#1}", "{big#2}", "{big#3}"] {
        let keys = raw_command(redis.port, &format!("EXISTS herenow:{shard}:u")).unwrap();
        assert_eq!(keys.trim(), ":1", "{shard}: {keys}");
    }

    let out = herenow()
        .args(["serve", "--listen", "127.0.0.1:0", "--redis-shards", "4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--redis-shards"), "{}", stderr(&out));
}
