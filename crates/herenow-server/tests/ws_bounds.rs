//! The WebSocket protocol (docs/PROTOCOL.md) against a real listener,
//! where a socket goes wrong or runs into a bound: every bad message
//! before and after `hello`, the bounds (spaces, rate, abuse, frame size,
//! slow readers, connections), timeouts, the liveness ping, ghost expiry
//! by the store's clock, and shutdown. The messages' normal course is in
//! `ws.rs`.
//!
//! Time: the store runs on a `ManualClock` the tests move; the socket
//! timeouts are real (a 2 s TTL where a test waits for one). Nothing
//! sleeps to wait for state: tests wait for messages, or poll the store,
//! with a deadline.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use herenow_core::{EventKind, Heartbeat, LeaveReason, Metadata, SpaceName, Status};
use herenow_server::Config;
use serde_json::{Value, json};
use support::http::raw_get;
use support::ws::{Read, Server};
use support::{PATIENCE, T0, user_key};
use tokio_tungstenite::tungstenite::Message;

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

/// The next store event, within the deadline.
async fn next_store_event(
    sub: &mut herenow_core::Subscription,
) -> std::sync::Arc<herenow_core::Event> {
    tokio::time::timeout(PATIENCE, sub.events.recv())
        .await
        .expect("no event")
        .unwrap()
}

#[tokio::test]
async fn bad_messages_before_hello_get_errors_then_a_bad_token_closes() {
    let s = Server::start().await;
    let mut c = s.connect().await;
    assert_eq!(
        c.error(json!({"type": "join", "space": "room"})).await,
        "hello-first"
    );
    for (text, code) in [
        ("{", "bad-json"),
        ("[1]", "bad-json"),
        ("\"x\"", "bad-json"),
        ("not json at all", "bad-json"),
        (r#"{"type":"nope","ref":5}"#, "bad-message"),
        (r#"{"ref":6}"#, "bad-message"),
    ] {
        c.send_text(text).await;
        let e = c.recv().await;
        assert_eq!(
            (&e["type"], &e["code"]),
            (&json!("error"), &json!(code)),
            "{text}"
        );
        match text {
            r#"{"type":"nope","ref":5}"# => assert_eq!(e["ref"], 5),
            r#"{"ref":6}"# => assert_eq!(e["ref"], 6),
            _ => assert!(e.get("ref").is_none(), "{e}"),
        }
    }
    c.ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    let e = c.recv().await;
    assert_eq!(e["code"], "bad-message");
    // Still open, still waiting for hello; a bad token closes with 4001.
    c.send(json!({"type": "hello", "token": "not-a-jwt"})).await;
    assert_eq!(c.closed().await, Some(4001));
}

#[tokio::test]
async fn bad_messages_after_hello_get_errors_and_the_socket_stays_open() {
    let s = Server::start().await;
    let (mut c, _) = s.hello("ann", &["room:1"]).await;
    let big_meta: String = "x".repeat(1100);
    for (msg, code) in [
        (json!({"type": "join"}), "bad-message"),
        (json!({"type": "join", "space": 1}), "bad-message"),
        // A variant's index is no type (serde would take 1 for `join`).
        (json!({"type": 1, "space": "room:1"}), "bad-message"),
        (
            json!({"type": "join", "space": "room:1", "x": 1}),
            "bad-message",
        ),
        (json!({"type": "invisible", "on": "yes"}), "bad-message"),
        (json!({"type": "update", "space": "room:1"}), "bad-message"),
        (
            json!({"type": "join", "space": "room:2"}),
            "space-not-allowed",
        ),
        (
            json!({"type": "subscribe", "space": "room:2"}),
            "space-not-allowed",
        ),
        (
            json!({"type": "join", "space": "no spaces"}),
            "bad-space-name",
        ),
        (
            json!({"type": "join", "space": "room:1", "meta": [1]}),
            "bad-metadata",
        ),
        (
            json!({"type": "join", "space": "room:1", "meta": {"x": big_meta}}),
            "bad-metadata",
        ),
        (
            json!({"type": "subscribe", "space": "room:1", "page_size": 0}),
            "bad-limit",
        ),
        (
            json!({"type": "subscribe", "space": "room:1", "page_size": 1001}),
            "bad-limit",
        ),
    ] {
        assert_eq!(c.error(msg.clone()).await, code, "{msg}");
    }
    // The refusal's sentence starts with the field at fault.
    for (msg, starts) in [
        (json!({"type": "join", "space": 1}), "space: invalid type"),
        (
            json!({"type": "watch", "users": ["bob", 7]}),
            "users[1]: invalid type",
        ),
    ] {
        let reply = c.request(msg.clone()).await;
        let said = reply["message"].as_str().unwrap_or_default();
        assert!(said.starts_with(starts), "{msg} → {reply}");
    }
    // A ref that is not a ref cannot be echoed.
    for bad_ref in [json!("r".repeat(65)), json!(1.5), json!({"a": 1})] {
        c.send(json!({"type": "ping", "ref": bad_ref})).await;
        let e = c.recv().await;
        assert_eq!(
            (&e["type"], &e["code"]),
            (&json!("error"), &json!("bad-message"))
        );
        assert!(e.get("ref").is_none(), "{e}");
    }
    // 18 errors, fewer than the 20 that would close it: still open.
    assert_eq!(c.request(json!({"type": "ping"})).await["type"], "pong");
    // Nothing was joined.
    assert!(
        s.store
            .live_connections()
            .unwrap()
            .connections(&space("room:1"), &[user_key("ann")])
            .await
            .unwrap()[0]
            .is_empty()
    );
}

#[tokio::test]
async fn sixteen_spaces_joined_and_sixteen_subscribed_at_most() {
    let s = Server::start().await;
    let (mut j, _) = s.hello("ann", &["*"]).await;
    for i in 0..16 {
        j.ok(json!({"type": "join", "space": format!("s{i}")}))
            .await;
    }
    assert_eq!(
        j.error(json!({"type": "join", "space": "s16"})).await,
        "too-many-spaces"
    );
    // Joining one it already joined is fine: an update.
    j.ok(json!({"type": "join", "space": "s3", "meta": {"a": 1}}))
        .await;

    let (mut w, _) = s.hello("bo", &["*"]).await;
    for i in 0..16 {
        w.subscribe(&format!("s{i}")).await;
    }
    assert_eq!(
        w.error(json!({"type": "subscribe", "space": "s16"})).await,
        "too-many-spaces"
    );
    // Subscribing again to one it has restarts its snapshot.
    let again = w.subscribe("s0").await;
    assert_eq!(again.len(), 1);
}

#[tokio::test]
async fn a_burst_beyond_twenty_messages_is_rate_limited() {
    let s = Server::start().await;
    let (mut c, _) = s.hello("ann", &["*"]).await;
    // The hello took one token: 19 left, 10 more a second.
    for i in 0..30 {
        c.ws.feed(Message::text(json!({"type": "ping", "ref": i}).to_string()))
            .await
            .unwrap();
    }
    c.ws.flush().await.unwrap();
    let (mut pongs, mut limited) = (0, 0);
    for i in 0..30 {
        let m = c.recv().await;
        assert_eq!(m["ref"], i, "replies come in order, each with its ref");
        match m["type"].as_str() {
            Some("pong") => pongs += 1,
            Some("error") => {
                assert_eq!(m["code"], "rate-limited");
                limited += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(pongs >= 19, "{pongs} pongs");
    assert!(limited >= 1, "nothing was rate limited");
    assert!(
        limited < 20,
        "{limited}: the abuse limit was not meant to be reached"
    );
}

#[tokio::test]
async fn twenty_errors_within_ten_seconds_close_with_4008() {
    let s = Server::start().await;
    let (mut c, _) = s.hello("ann", &["*"]).await;
    for _ in 0..20 {
        c.ws.feed(Message::text("{")).await.unwrap();
    }
    c.ws.flush().await.unwrap();
    let mut errors = 0;
    loop {
        match c.read().await {
            Read::Json(m) => {
                assert_eq!(m["type"], "error");
                errors += 1;
            }
            Read::Closed(code) => {
                assert_eq!(code, Some(4008));
                break;
            }
        }
    }
    assert_eq!(errors, 20, "each error was answered before the close");
}

#[tokio::test]
async fn a_message_over_64_kib_closes_with_1009() {
    let s = Server::start().await;
    let (mut c, _) = s.hello("ann", &["room"]).await;
    c.ok(json!({"type": "join", "space": "room"})).await;
    // Just under the limit: an error, the socket stays open.
    let pad = "x".repeat(60 * 1024);
    assert_eq!(
        c.error(json!({"type": "ping", "pad": pad})).await,
        "bad-message"
    );
    let huge = format!(r#"{{"type":"ping","pad":"{}"}}"#, "x".repeat(70 * 1024));
    c.send_text(&huge).await;
    assert_eq!(c.closed().await, Some(1009));
    // The connection was handed to the grace on the way out.
    lingering(&s, &space("room"), "ann").await;
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_closes_with_1007() {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let s = Server::start().await;
    let (mut c, _) = s.hello("ann", &["room"]).await;
    c.ok(json!({"type": "join", "space": "room"})).await;
    let frame = Frame::message(vec![0xff, 0xfe, 0x7b], OpCode::Data(Data::Text), true);
    c.ws.send(Message::Frame(frame)).await.unwrap();
    assert_eq!(c.closed().await, Some(1007));
    lingering(&s, &space("room"), "ann").await;
}

#[tokio::test]
async fn no_hello_in_time_closes_with_4003() {
    let s = Server::start_with(Config {
        ws_ttl: Duration::from_secs(2),
        ws_ping: Duration::from_secs(1),
        ..Config::default()
    })
    .await;
    let mut c = s.connect().await;
    // The hello timeout is 10 s, or the TTL when shorter.
    assert_eq!(c.closed().await, Some(4003));
}

#[tokio::test]
async fn a_silent_connection_is_closed_with_4004_and_leaves() {
    let s = Server::start_with(Config {
        ws_ttl: Duration::from_secs(2),
        ws_ping: Duration::from_secs(1),
        ..Config::default()
    })
    .await;
    let mut sub = s.store.subscribe(&space("room")).await.unwrap();
    let (mut c, w) = s.hello("ann", &["room"]).await;
    assert_eq!(w["ttl_ms"], 2000);
    assert_eq!(w["ping_ms"], 1000);
    c.ok(json!({"type": "join", "space": "room"})).await;
    assert_eq!(next_store_event(&mut sub).await.kind, EventKind::Join);
    // Then nothing for the TTL.
    assert_eq!(c.closed().await, Some(4004));
    // Ann is in her grace: still present, nothing told; she leaves when
    // it ends, at the store's first sweep after it.
    lingering(&s, &space("room"), "ann").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(150), sub.events.recv())
            .await
            .is_err(),
        "an event during the grace"
    );
    s.clock.advance(Duration::from_secs(5));
    s.state.tick().await;
    let e = next_store_event(&mut sub).await;
    assert_eq!(
        (
            e.kind,
            e.member.id.as_str(),
            e.conn.as_ref().map(|c| c.as_str())
        ),
        (EventKind::Leave, "ann", w["conn"].as_str())
    );
}

#[tokio::test]
async fn a_connection_that_stops_pinging_is_dropped_by_the_store_within_the_ttl() {
    // The socket stays open (the server cannot tell a dead network from a
    // quiet client until its own timer fires); the store's record expires
    // on its clock: a ghost is gone at the first sweep after the TTL.
    let s = Server::start().await;
    let room = space("room");
    let mut sub = s.store.subscribe(&room).await.unwrap();
    let (mut c, w) = s.hello("ann", &["room"]).await;
    c.ok(json!({"type": "join", "space": "room"})).await;
    assert_eq!(next_store_event(&mut sub).await.kind, EventKind::Join);

    s.clock.advance(Duration::from_secs(29));
    s.state.tick().await;
    let conns = s
        .store
        .live_connections()
        .unwrap()
        .connections(&room, &[user_key("ann")])
        .await
        .unwrap();
    assert_eq!(conns[0].len(), 1, "still within the TTL");

    s.clock.advance(Duration::from_secs(2));
    s.state.tick().await;
    let e = next_store_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason, e.conn.as_ref().map(|c| c.as_str())),
        (
            EventKind::Leave,
            Some(LeaveReason::Timeout),
            w["conn"].as_str()
        )
    );
    assert!(
        s.store
            .live_connections()
            .unwrap()
            .connections(&room, &[user_key("ann")])
            .await
            .unwrap()[0]
            .is_empty()
    );
    let st = s.store.status(&room, &[user_key("ann")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
}

#[tokio::test]
async fn pings_keep_presence_alive_and_write_at_most_once_a_second() {
    let s = Server::start().await;
    let room = space("room");
    let mut sub = s.store.subscribe(&room).await.unwrap();
    let (mut c, _) = s.hello("ann", &["room"]).await;
    c.ok(json!({"type": "join", "space": "room"})).await;
    assert_eq!(next_store_event(&mut sub).await.kind, EventKind::Join);
    let expires = |s: &Server| {
        let store = s.store.clone();
        let room = room.clone();
        async move {
            store
                .live_connections()
                .unwrap()
                .connections(&room, &[user_key("ann")])
                .await
                .unwrap()[0][0]
                .expires_ms
        }
    };
    assert_eq!(expires(&s).await, T0 + 30_000);

    // A ping re-attaches: the connection lives a TTL from now.
    s.clock.advance(Duration::from_secs(20));
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["server_time_ms"], T0 + 20_000);
    assert_eq!(expires(&s).await, T0 + 50_000);
    // Another within a second is answered, not written.
    s.clock.advance(Duration::from_secs(1));
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["server_time_ms"], T0 + 21_000);
    assert_eq!(expires(&s).await, T0 + 50_000);

    // So the store drops the connection at T0 + 50 s, not 51 s.
    s.clock.advance(Duration::from_secs(28));
    s.state.tick().await;
    assert_eq!(
        s.store.status(&room, &[user_key("ann")]).await.unwrap()[0].status,
        Status::Online
    );
    s.clock.advance(Duration::from_secs(2));
    s.state.tick().await;
    let e = next_store_event(&mut sub).await;
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Leave, Some(LeaveReason::Timeout))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_reading_gets_lagged_then_4009() {
    // A 6 s TTL: a queue without room for 2 s (a third of it) means the
    // reader stopped; a slow one would have made room by then.
    let s = Server::start_with(Config {
        ws_ttl: Duration::from_secs(6),
        ws_ping: Duration::from_secs(2),
        ..Config::default()
    })
    .await;
    let (mut slow, _) = s.hello("slow", &["*"]).await;
    slow.ok(json!({"type": "join", "space": "here"})).await;
    assert!(slow.subscribe("crowd").await.is_empty());

    // Events of about 1 KiB each, until the server gives up on the reader
    // (it hands its presence in `here` to the grace before closing). Kernel buffers take a
    // few megabytes first, then the queue's 1,024 messages; then the
    // queue stays full for the stall limit.
    let crowd = space("crowd");
    let here = space("here");
    let pad = "x".repeat(900);
    let produced = tokio::time::timeout(Duration::from_secs(60), async {
        let mut round = 0u64;
        loop {
            // New metadata every round: 200 `update` events.
            let meta =
                Metadata::from_json(&format!(r#"{{"pad":"{pad}","round":{round}}}"#)).unwrap();
            let beats: Vec<Heartbeat> = (0..200)
                .map(|i| Heartbeat {
                    member: user_key(&format!("m{i}")),
                    at_ms: None,
                    meta: Some(meta.clone()),
                })
                .collect();
            s.store.heartbeat(&crowd, &beats).await.unwrap();
            round += 1;
            tokio::task::yield_now().await;
            let gone = s
                .store
                .live_connections()
                .unwrap()
                .connections(&here, &[user_key("slow")])
                .await
                .unwrap()[0]
                .iter()
                .all(|c| c.lingering);
            if gone {
                return round;
            }
        }
    })
    .await
    .expect("the slow reader was never cut off");
    assert!(produced > 1);

    // Now read what was queued: events, a lagged notice, the close.
    let (mut events, mut lagged) = (0, 0);
    let code = loop {
        match slow.read().await {
            Read::Json(m) => match m["type"].as_str() {
                Some("event") => events += 1,
                Some("lagged") => {
                    assert_eq!(m["space"], "crowd");
                    assert!(m["missed"].as_u64().unwrap() >= 1);
                    lagged += 1;
                }
                Some("snapshot") => {}
                other => panic!("unexpected {other:?}"),
            },
            Read::Closed(code) => break code,
        }
    };
    assert_eq!(code, Some(4009));
    assert!(lagged >= 1, "no lagged notice before the close");
    assert!(events >= 1_000, "only {events} events before the close");
}

#[tokio::test]
async fn websocket_connections_are_bounded() {
    let s = Server::start_with(Config {
        max_ws_connections: 1,
        ..Config::default()
    })
    .await;
    let (first, _) = s.hello("ann", &["*"]).await;
    let err = tokio_tungstenite::connect_async(format!("ws://{}/v1/ws", s.addr))
        .await
        .unwrap_err();
    let tokio_tungstenite::tungstenite::Error::Http(response) = err else {
        panic!("expected an HTTP refusal, got {err:?}");
    };
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let problem: Value = serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
    assert_eq!(problem["code"], "too-many-connections");

    // Its slot frees when it closes.
    first.close().await;
    tokio::time::timeout(PATIENCE, async {
        while s.state.open_websockets() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the slot was never freed");
    let (mut again, _) = s.hello("bo", &["*"]).await;
    assert_eq!(again.request(json!({"type": "ping"})).await["type"], "pong");
}

#[tokio::test]
async fn a_clients_ping_gets_its_pong_and_its_close_a_close() {
    let s = Server::start().await;
    let (mut c, _) = s.hello("ann", &["room"]).await;
    c.ws.send(Message::Ping(b"still there?".to_vec().into()))
        .await
        .unwrap();
    let pong = tokio::time::timeout(PATIENCE, c.ws.next()).await;
    assert!(
        matches!(&pong, Ok(Some(Ok(Message::Pong(p)))) if &p[..] == b"still there?"),
        "{pong:?}"
    );
    c.ws.close(None).await.unwrap();
    // The server answers the close with its own, which ends the stream.
    let answer = tokio::time::timeout(PATIENCE, c.ws.next()).await;
    assert!(
        matches!(answer, Ok(Some(Ok(Message::Close(_))))),
        "{answer:?}"
    );
    let end = tokio::time::timeout(PATIENCE, c.ws.next()).await;
    assert!(matches!(end, Ok(None)), "{end:?}");
}

#[tokio::test]
async fn a_plain_get_is_not_an_upgrade() {
    let s = Server::start().await;
    let url = format!("http://{}/v1/ws", s.addr);
    let answer = raw_get(s.addr, "/v1/ws").await;
    assert!(answer.starts_with("HTTP/1.1 4"), "{url}: {answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    // An unknown query parameter is refused before any upgrade.
    let answer = raw_get(s.addr, "/v1/ws?tokn=x").await;
    assert!(answer.contains("unknown-parameter"), "{answer}");
}

#[tokio::test]
async fn issue_43_shutdown_hands_everyone_to_the_grace_and_closes_with_1012() {
    let mut s = Server::start().await;
    let room = space("room");
    let mut sub = s.store.subscribe(&room).await.unwrap();
    let (mut ann, _) = s.hello("ann", &["room"]).await;
    let (mut bo, _) = s.hello("bo", &["room"]).await;
    ann.ok(json!({"type": "join", "space": "room"})).await;
    bo.ok(json!({"type": "join", "space": "room"})).await;
    bo.subscribe("room").await;
    for _ in 0..2 {
        assert_eq!(next_store_event(&mut sub).await.kind, EventKind::Join);
    }
    // `serve` returns only after every socket task ended.
    s.stop().await;
    assert_eq!(s.state.open_websockets(), 0);
    // Both are still present, lingering for the grace: reconnected to
    // another server within it, nobody would be told anything.
    for user in ["ann", "bo"] {
        let conns = connections(&s, &room, user).await;
        assert!(conns.len() == 1 && conns[0].lingering, "{user}: {conns:?}");
    }
    // Service restart: reconnect at once.
    assert_eq!(ann.closed().await, Some(1012));
    assert_eq!(bo.closed().await, Some(1012));
    // Nobody came back: they leave once the grace is over.
    s.clock.advance(Duration::from_millis(
        herenow_core::SpaceConfig::default().grace_ms + 1,
    ));
    s.store.tick().await.unwrap();
    let mut left = BTreeSet::new();
    for _ in 0..2 {
        let e = next_store_event(&mut sub).await;
        assert_eq!(e.kind, EventKind::Leave);
        left.insert(e.member.id.to_string());
    }
    assert_eq!(left, BTreeSet::from(["ann".to_owned(), "bo".to_owned()]));
}

/// `user`'s live connections in `space`, as the store has them.
async fn connections(s: &Server, space: &SpaceName, user: &str) -> Vec<herenow_core::Connection> {
    let mut conns = s
        .store
        .live_connections()
        .unwrap()
        .connections(space, &[user_key(user)])
        .await
        .unwrap();
    conns.pop().unwrap()
}

/// Polls the store, with a deadline, until `user`'s connection in
/// `space` lingers (its socket ended without a goodbye); when it was
/// seen to.
async fn lingering(s: &Server, space: &SpaceName, user: &str) -> Instant {
    tokio::time::timeout(PATIENCE, async {
        loop {
            if connections(s, space, user)
                .await
                .iter()
                .any(|c| c.lingering)
            {
                return Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{user}'s connection never ended"))
}

/// What the liveness tests allow past `ping_interval + pong_wait` for
/// the scheduling of a busy machine.
const SLACK: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_43_a_socket_that_answers_no_ping_is_closed_within_the_interval_and_the_wait() {
    // The TTL stays 30 s: what closes the silent socket is the probe.
    let (interval, wait) = (Duration::from_secs(1), Duration::from_secs(1));
    let s = Server::start_with(Config {
        ping_interval: interval,
        pong_wait: wait,
        ..Config::default()
    })
    .await;
    let room = space("room");
    let (mut silent, _) = s.hello("ann", &["room"]).await;
    let (mut answering, _) = s.hello("bo", &["room"]).await;
    answering.ok(json!({"type": "join", "space": "room"})).await;
    silent.ok(json!({"type": "join", "space": "room"})).await;
    // ann's last frame: the join just answered.
    let since = Instant::now();
    // bo's client reads (tungstenite answers each Ping as it reads it) but
    // sends no message, for twice the interval and the wait and more;
    // ann's reads nothing, so its Pings go unanswered.
    let until = since + 2 * (interval + wait) + interval;
    let reading = tokio::spawn(async move {
        let mut pings = 0;
        loop {
            match tokio::time::timeout_at(until.into(), answering.ws.next()).await {
                Err(_) => return (answering, pings),
                Ok(Some(Ok(Message::Ping(_)))) => pings += 1,
                Ok(other) => panic!("the answering socket read {other:?}"),
            }
        }
    });

    let closed = lingering(&s, &room, "ann").await;
    let took = closed - since;
    assert!(
        took + Duration::from_millis(500) >= interval + wait,
        "closed after {took:?}, before the pong wait ran out"
    );
    assert!(
        took <= interval + wait + SLACK,
        "closed after {took:?}: not within the interval and the wait"
    );
    // Its member is in the grace: still online, nobody told.
    assert_eq!(
        s.store.status(&room, &[user_key("ann")]).await.unwrap()[0].status,
        Status::Online
    );
    // Once its task is gone (the close written, the socket dropped), the
    // client finds the Ping and the close behind it.
    tokio::time::timeout(PATIENCE, async {
        while s.state.open_websockets() > 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the silent socket's task never ended");
    assert_eq!(silent.closed().await, Some(4005));

    // The socket that answered is open past the interval and the wait.
    let (mut answering, pings) = reading.await.unwrap();
    assert!(pings >= 2, "only {pings} pings in {:?}", until - since);
    assert_eq!(
        answering.request(json!({"type": "ping"})).await["type"],
        "pong"
    );
    assert!(!connections(&s, &room, "bo").await[0].lingering);
}
