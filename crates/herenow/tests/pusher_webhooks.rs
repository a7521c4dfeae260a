//! Issue 38, webhooks in Pusher's format: `herenow serve --pusher-app
//! ID:KEY:SECRET --pusher-webhook URL`.
//!
//! - `tests/pusher/webhooks.test.js` is the app's endpoint: pusher-js
//!   joins a presence channel and whispers, and the npm `pusher`
//!   library's `webhook({headers, rawBody}).isValid()` and `getEvents()`
//!   accept every request (presence, public and private channels);
//! - a receiver on 127.0.0.1 checks the body and `X-Pusher-Signature`
//!   independently of the server's signer: only presence channels' users
//!   are told;
//! - two servers on one Redis deliver each event once, client events
//!   included;
//! - events pending when a server stops (a client event among them) are
//!   delivered after a restart,
//!   on the memory store with `--data-dir` and on Redis;
//! - public and private channels subscribed by Pusher sockets (on one
//!   server, or on two sharing a Redis) are `channel_occupied` once and
//!   `channel_vacated` once; a server without `--pusher-webhook` writes
//!   nothing of them.
//!
//! Members come and go through herenow's own API here (`herenow seen` /
//! `leave` in the space `presence-…`): a presence channel is that space.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;
use support::{Server, temp_dir};

#[path = "../../herenow-server/tests/support/receiver.rs"]
mod receiver;
use receiver::{Received, Receiver, hmac_sha256, verify_pusher};

const APP: &str = "4242:herenow-key:herenow-secret-123";
const KEY: &str = "herenow-key";
const SECRET: &str = "herenow-secret-123";
/// The app's occupancy space: its occupied public and private channels.
const OCCUPANCY: &str = "pusher-channels:4242";

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>;

/// A Pusher socket to `server`, as pusher-js opens one: its socket id.
fn pusher_socket(server: &Server) -> (Ws, String) {
    let url = format!("ws://{}/app/{KEY}?protocol=7", server.addr());
    let (mut ws, _) = tungstenite::connect(url).expect("the upgrade failed");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }
    let hello = support::ws_read(&mut ws).expect("connection_established");
    assert_eq!(hello["event"], "pusher:connection_established", "{hello}");
    let data: Value = serde_json::from_str(hello["data"].as_str().unwrap()).unwrap();
    let id = data["socket_id"].as_str().unwrap().to_owned();
    (ws, id)
}

/// Subscribes `channel` (signed for a private one) and waits for its
/// `subscription_succeeded`.
fn subscribe(ws: &mut Ws, socket_id: &str, channel: &str) {
    let mut data = serde_json::json!({ "channel": channel });
    if channel.starts_with("private-") {
        let mac = hmac_sha256(
            SECRET.as_bytes(),
            format!("{socket_id}:{channel}").as_bytes(),
        );
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        data["auth"] = Value::String(format!("{KEY}:{hex}"));
    }
    let msg = serde_json::json!({ "event": "pusher:subscribe", "data": data });
    ws.send(tungstenite::Message::text(msg.to_string()))
        .unwrap();
    loop {
        let m = support::ws_read(ws).expect("an answer to the subscription");
        if m["channel"] == channel {
            assert_eq!(m["event"], "pusher_internal:subscription_succeeded", "{m}");
            return;
        }
    }
}

/// Sends the client event `client-said` with `data` on `channel`.
fn whisper(ws: &mut Ws, channel: &str, data: Value) {
    let msg = serde_json::json!({ "event": "client-said", "channel": channel, "data": data });
    ws.send(tungstenite::Message::text(msg.to_string()))
        .unwrap();
}

fn unsubscribe(ws: &mut Ws, channel: &str) {
    let msg = serde_json::json!({ "event": "pusher:unsubscribe", "data": { "channel": channel } });
    ws.send(tungstenite::Message::text(msg.to_string()))
        .unwrap();
}

/// The guests (occupied channels) of the app's occupancy space, as
/// `server` lists them.
fn occupied(server: &Server) -> BTreeSet<String> {
    let list = server.json(&["online", OCCUPANCY, "--guests"]);
    list["members"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits, within 30 s, until `server` lists `channels` as occupied.
async fn occupied_now(server: &Server, channels: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while occupied(server) != set(channels) {
        assert!(Instant::now() < deadline, "{:?}", occupied(server));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every event that arrives until the outbox is drained and a moment
/// after, added to `got`.
async fn settle(rx: &mut Receiver, servers: &[&Server], got: &mut BTreeMap<String, u32>) {
    drained(servers).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Some(late) = rx.try_next() {
        for e in pusher_events(&late) {
            *got.entry(said(&e)).or_default() += 1;
        }
    }
}

/// Two sockets on `a` and `b` (the same server or two) subscribe a public
/// and a private channel, then one unsubscribes and the other closes:
/// each channel is occupied once and vacated once.
async fn two_sockets_occupy_and_vacate_once(rx: &mut Receiver, a: &Server, b: &Server) {
    let (mut one, one_id) = pusher_socket(a);
    let (mut two, two_id) = pusher_socket(b);
    for channel in ["news", "private-team"] {
        subscribe(&mut one, &one_id, channel);
        subscribe(&mut two, &two_id, channel);
    }
    occupied_now(a, &["news", "private-team"]).await;
    let expected = set(&["channel_occupied news -", "channel_occupied private-team -"]);
    let mut got = collect(rx, &expected).await;
    unsubscribe(&mut one, "news");
    unsubscribe(&mut one, "private-team");
    // The other socket still holds both: nothing is vacated yet.
    settle(rx, &[a, b], &mut got).await;
    assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), expected);
    assert_eq!(occupied(b), set(&["news", "private-team"]));
    unsubscribe(&mut two, "news");
    two.close(None).unwrap();
    let _ = two.flush();
    let vacated = set(&["channel_vacated news -", "channel_vacated private-team -"]);
    for (k, v) in collect(rx, &vacated).await {
        *got.entry(k).or_default() += v;
    }
    settle(rx, &[a, b], &mut got).await;
    let all: BTreeSet<String> = expected.union(&vacated).cloned().collect();
    assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), all);
    assert!(got.values().all(|n| *n == 1), "{got:?}");
    occupied_now(a, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_38_public_and_private_channels_are_occupied_and_vacated_once() {
    let mut rx = Receiver::start().await;
    let hook = format!("http://{}/pusher", rx.addr);
    let server = Server::start(&["--pusher-app", APP, "--pusher-webhook", &hook]);
    two_sockets_occupy_and_vacate_once(&mut rx, &server, &server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_38_a_channel_of_many_sockets_is_vacated_after_its_last() {
    // More sockets than the store keeps connections per member: the
    // server holds the channel with one connection however many of its
    // sockets subscribe, so the first 69 leaving vacate nothing.
    let mut rx = Receiver::start().await;
    let hook = format!("http://{}/pusher", rx.addr);
    let server = Server::start(&["--pusher-app", APP, "--pusher-webhook", &hook]);
    let mut sockets: Vec<Ws> = (0..70)
        .map(|_| {
            let (mut ws, id) = pusher_socket(&server);
            subscribe(&mut ws, &id, "news");
            ws
        })
        .collect();
    let occupied_once = set(&["channel_occupied news -"]);
    let mut got = collect(&mut rx, &occupied_once).await;
    let last = sockets.pop().unwrap();
    for mut ws in sockets {
        ws.close(None).unwrap();
        let _ = ws.flush();
    }
    settle(&mut rx, &[&server], &mut got).await;
    assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), occupied_once);
    assert_eq!(occupied(&server), set(&["news"]));
    let mut last = last;
    unsubscribe(&mut last, "news");
    for (k, v) in collect(&mut rx, &set(&["channel_vacated news -"])).await {
        *got.entry(k).or_default() += v;
    }
    settle(&mut rx, &[&server], &mut got).await;
    assert!(got.values().all(|n| *n == 1), "{got:?}");
    occupied_now(&server, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_38_without_pusher_webhooks_channels_are_counted_and_nothing_is_kept_to_send() {
    let server = Server::start(&["--pusher-app", APP]);
    let (mut ws, id) = pusher_socket(&server);
    subscribe(&mut ws, &id, "news");
    subscribe(&mut ws, &id, "private-team");
    // Answered after the store write: each channel is this server's
    // connection in the occupancy space, with its count (what every
    // server answers for `subscription_count` and the channel list).
    assert_eq!(occupied(&server), set(&["news", "private-team"]));
    // Without webhooks no outbox is open: nothing is kept to be sent.
    let status = server.json(&["webhooks"]);
    assert_eq!(
        (&status["enabled"], &status["outbox"]),
        (&serde_json::json!(false), &serde_json::Value::Null),
        "{status}"
    );
}

#[test]
fn issue_38_the_pusher_library_accepts_our_webhooks() {
    let dir = support::pusher_node::node_dir();
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
        "--pusher-webhook-client-events",
    ];
    let mut server = Server::start(&args);
    server.ok(&["seen", "presence-a", "ann", "bob"]);
    server.ok(&["leave", "presence-a", "ann"]);
    // A client event: kept in the outbox like the channel's occupancy.
    let (mut ws, id) = pusher_socket(&server);
    subscribe(&mut ws, &id, "private-a");
    whisper(&mut ws, "private-a", serde_json::json!({ "n": 1 }));
    let deadline = Instant::now() + Duration::from_secs(30);
    while outbox_depth(&server) != 6 {
        assert!(Instant::now() < deadline, "{}", server.json(&["webhooks"]));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A write that waits for fdatasync, which covers every record before
    // it: the lazily journaled events are on disk too.
    server.ok(&["friends", "set", "zed", "amy"]);
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
        "channel_occupied private-a -",
        "client_event private-a -",
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
            "--pusher-webhook-client-events",
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
        // A client event from a socket of each server, each told once.
        let mut sockets = Vec::new();
        for (server, channel) in [(&a, "private-a"), (&b, "private-b")] {
            let (mut ws, id) = pusher_socket(server);
            subscribe(&mut ws, &id, channel);
            whisper(&mut ws, channel, serde_json::json!({ "from": channel }));
            expected.insert(format!("channel_occupied {channel} -"));
            expected.insert(format!("client_event {channel} -"));
            sockets.push(ws);
        }
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
    async fn issue_38_channels_on_two_servers_on_one_redis_are_occupied_and_vacated_once() {
        let redis = RedisServer::standalone();
        let mut rx = Receiver::start().await;
        let hook = format!("http://{}/pusher", rx.addr);
        let a = start(&redis, &hook);
        let b = start(&redis, &hook);
        two_sockets_occupy_and_vacate_once(&mut rx, &a, &b).await;
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
