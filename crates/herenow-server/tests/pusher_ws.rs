//! The Pusher protocol's edges that need the server in hand (issue 38):
//! its close codes, the member cap of a presence channel, a socket that
//! falls behind in a join storm ending with the exact roster, client
//! events on presence channels, bounded frames, and the HTTP API's
//! signature check. The libraries' own view of the protocol is tested in
//! `crates/herenow/tests/pusher_js.rs` (pusher-js and the `pusher` server
//! library); here the frames are read as they are sent.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use herenow_core::{Heartbeat, Metadata, SpaceName};
use herenow_server::Config;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use support::pusher::{ID, KEY, data, hmac_hex, now_s, signed as api, socket};
use support::user_key;
use support::ws::{Client, Read, Server};

/// The test app, at most `max_presence_members` per presence channel.
fn config(max_presence_members: usize) -> Config {
    let mut config = support::pusher::config();
    config.pusher.apps[0].max_presence_members = max_presence_members;
    config
}

/// Sends a signed presence subscription for `user`.
async fn subscribe_presence(c: &mut Client, socket_id: &str, channel: &str, user: &str) {
    let channel_data = json!({"user_id": user, "user_info": {"name": user}}).to_string();
    let auth = format!(
        "{KEY}:{}",
        hmac_hex(&format!("{socket_id}:{channel}:{channel_data}"))
    );
    c.send(json!({"event": "pusher:subscribe",
        "data": {"channel": channel, "auth": auth, "channel_data": channel_data}}))
        .await;
}

async fn closed_with(s: &Server, query: &str) -> (Value, Option<u16>) {
    let mut c = s.connect_to(&format!("ws://{}{query}", s.addr)).await;
    let error = c.recv().await;
    assert_eq!(error["event"], "pusher:error");
    match c.read().await {
        Read::Closed(code) => (error, code),
        Read::Json(m) => panic!("expected the close, got {m}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_close_with_the_protocols_codes() {
    let s = Server::start_with(config(10)).await;
    for (query, code) in [
        ("/app/no-such-key?protocol=7", 4001),
        (&format!("/app/{KEY}") as &str, 4008),
        (&format!("/app/{KEY}?protocol=seven"), 4006),
        (&format!("/app/{KEY}?protocol=3"), 4007),
    ] {
        let (error, closed) = closed_with(&s, query).await;
        assert_eq!(error["data"]["code"], code, "{query}");
        assert_eq!(closed, Some(code), "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_43_a_silent_socket_is_pinged_then_closed_with_4201_within_the_interval_and_the_wait()
{
    // activity_timeout is the ping interval; the TTL stays 30 s.
    let (interval, wait) = (Duration::from_secs(1), Duration::from_secs(1));
    let s = Server::start_with(Config {
        ping_interval: interval,
        pong_wait: wait,
        ..config(10)
    })
    .await;
    let mut c = s
        .connect_to(&format!("ws://{}/app/{KEY}?protocol=7", s.addr))
        .await;
    let hello = data(&c.recv().await);
    assert_eq!(hello["activity_timeout"], 1);
    // Answered for twice the interval and the wait and more: the socket
    // lives on.
    let mut last_answer = Instant::now();
    let until = last_answer + 2 * (interval + wait) + interval;
    let mut pings = 0;
    loop {
        match tokio::time::timeout_at(until.into(), c.read()).await {
            Err(_) => break,
            Ok(Read::Json(m)) => {
                assert_eq!(m["event"], "pusher:ping", "{m}");
                pings += 1;
                c.send(json!({"event": "pusher:pong", "data": {}})).await;
                last_answer = Instant::now();
            }
            Ok(Read::Closed(code)) => panic!("closed with {code:?} though it answered"),
        }
    }
    assert!(pings >= 2, "only {pings} pings");
    // Then silence: pinged again, and closed within the interval and the
    // wait of its last answer.
    assert_eq!(c.recv().await["event"], "pusher:ping");
    assert_eq!(c.closed().await, Some(4201));
    let took = last_answer.elapsed();
    assert!(
        took + Duration::from_millis(500) >= interval + wait,
        "closed {took:?} after the last answer, before the pong wait ran out"
    );
    assert!(
        took <= interval + wait + Duration::from_secs(1),
        "closed {took:?} after the last answer: not within the interval and the wait"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_over_the_bound_closes_with_1009_and_others_go_on() {
    let s = Server::start_with(config(10)).await;
    let (mut big, _) = socket(&s).await;
    let (mut other, _) = socket(&s).await;
    big.send_text(&"x".repeat(64 * 1024)).await;
    assert_eq!(big.closed().await, Some(1009));
    other
        .send(json!({"event": "pusher:ping", "data": {}}))
        .await;
    assert_eq!(other.recv().await["event"], "pusher:pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presence_channel_at_its_cap_refuses_the_next_user_and_trims_nobody() {
    let s = Server::start_with(config(2)).await;
    let (mut a, a_id) = socket(&s).await;
    subscribe_presence(&mut a, &a_id, "presence-small", "a").await;
    assert_eq!(
        a.recv().await["event"],
        "pusher_internal:subscription_succeeded"
    );
    let (mut b, b_id) = socket(&s).await;
    subscribe_presence(&mut b, &b_id, "presence-small", "b").await;
    let ok = b.recv().await;
    assert_eq!(data(&ok)["presence"]["count"], 2);
    let (mut c, c_id) = socket(&s).await;
    subscribe_presence(&mut c, &c_id, "presence-small", "c").await;
    let refused = c.recv().await;
    assert_eq!(refused["event"], "pusher:subscription_error");
    assert_eq!(refused["channel"], "presence-small");
    assert_eq!(refused["data"]["status"], 4100);
    // A second socket of a member is no new member.
    let (mut a2, a2_id) = socket(&s).await;
    subscribe_presence(&mut a2, &a2_id, "presence-small", "a").await;
    let again = a2.recv().await;
    assert_eq!(again["event"], "pusher_internal:subscription_succeeded");
    let roster = data(&again);
    assert_eq!(roster["presence"]["count"], 2);
    let mut ids: Vec<&str> = roster["presence"]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["a", "b"]);
    // a saw b arrive, and never c.
    let added = a.recv().await;
    assert_eq!(added["event"], "pusher_internal:member_added");
    assert_eq!(data(&added)["user_id"], "b");
    a.send(json!({"event": "pusher:ping", "data": {}})).await;
    assert_eq!(a.recv().await["event"], "pusher:pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_events_on_presence_channels_carry_the_senders_user_id() {
    let s = Server::start_with(config(10)).await;
    let (mut a, a_id) = socket(&s).await;
    let (mut b, b_id) = socket(&s).await;
    subscribe_presence(&mut a, &a_id, "presence-chat", "ann").await;
    a.recv().await;
    subscribe_presence(&mut b, &b_id, "presence-chat", "ben").await;
    b.recv().await;
    assert_eq!(
        a.recv().await["event"],
        "pusher_internal:member_added",
        "ann sees ben"
    );
    a.send(json!({"event": "client-typing", "channel": "presence-chat", "data": {"on": true}}))
        .await;
    // Ben's roster may predate the feed's reading of Ann's join, which
    // then follows it as her `member_added`: what pusher-js expects of a
    // roster and its events. Anything else before the client event is
    // wrong.
    let got = loop {
        let m = b.recv().await;
        if m["event"] == "pusher_internal:member_added" && data(&m)["user_id"] == "ann" {
            continue;
        }
        break m;
    };
    assert_eq!(got["event"], "client-typing", "{got}");
    assert_eq!(got["user_id"], "ann");
    assert_eq!(got["data"]["on"], true);
    // A client event on a channel the socket has not subscribed.
    a.send(json!({"event": "client-x", "channel": "private-elsewhere", "data": {}}))
        .await;
    assert_eq!(a.recv().await["data"]["code"], Value::Null);
}

/// What pusher-js keeps of a presence channel: a roster replaced whole by
/// `subscription_succeeded`, changed by `member_added` / `member_removed`.
#[derive(Default)]
struct Roster {
    members: BTreeSet<String>,
    rosters: usize,
}

impl Roster {
    fn apply(&mut self, m: &Value) {
        match m["event"].as_str() {
            Some("pusher_internal:subscription_succeeded") => {
                let d = data(m);
                self.members = d["presence"]["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect();
                assert_eq!(d["presence"]["count"], self.members.len());
                self.rosters += 1;
            }
            Some("pusher_internal:member_added") => {
                self.members
                    .insert(data(m)["user_id"].as_str().unwrap().to_owned());
            }
            Some("pusher_internal:member_removed") => {
                self.members.remove(data(m)["user_id"].as_str().unwrap());
            }
            other => panic!("unexpected {other:?}: {m}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_behind_a_join_storm_ends_with_the_exact_roster() {
    storm_then_read(&Server::start_with(config(10_000)).await).await;
}

/// A socket subscribed to a presence channel reads nothing while 9,000
/// members join and 500 leave; then it reads as pusher-js does.
async fn storm_then_read(s: &Server) {
    const JOINS: usize = 9_000;
    const LEAVES: usize = 500;
    let (mut slow, slow_id) = socket(s).await;
    subscribe_presence(&mut slow, &slow_id, "presence-storm", "watcher").await;
    let mut roster = Roster::default();
    roster.apply(&slow.recv().await);
    // Members joining through herenow's own API, with 800 bytes of
    // user_info each: about 9 MB of member_added, more than the queue and
    // the kernel's buffers hold while the socket reads nothing.
    let storm = SpaceName::new("presence-storm").unwrap();
    let ids = support::join_storm(&s.store, "presence-storm", JOINS, 800, 1_000).await;
    let leaving: Vec<_> = ids[..LEAVES].iter().map(|id| user_key(id)).collect();
    s.store.leave(&storm, &leaving).await.unwrap();
    let mut expected: BTreeSet<String> = ids[LEAVES..].iter().cloned().collect();
    expected.insert("watcher".into());

    let done = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            match slow.read().await {
                Read::Json(m) => roster.apply(&m),
                Read::Closed(code) => panic!("the slow socket was cut with {code:?}"),
            }
            if roster.members == expected {
                return;
            }
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "the roster never matched: {} members, {} expected",
        roster.members.len(),
        expected.len()
    );
    assert!(roster.rosters >= 2, "no fresh roster after the lag");
    // And it goes on: a later join arrives as member_added.
    s.store
        .heartbeat(&storm, &[Heartbeat::now(user_key("late"))])
        .await
        .unwrap();
    loop {
        let m = slow.recv().await;
        roster.apply(&m);
        if roster.members.contains("late") {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_stops_reading_is_closed_with_4100() {
    // The stall limit is the TTL when shorter than 30 s: 10 s here.
    let s = Server::start_with(Config {
        ws_ttl: Duration::from_secs(10),
        ws_ping: Duration::from_secs(3),
        ..config(10_000)
    })
    .await;
    // A small receive buffer, so the server's writes jam after little
    // data on any machine (loopback buffers grow to megabytes).
    let mut stuck = s
        .connect_small(
            &format!("ws://{}/app/{KEY}?protocol=7&client=test", s.addr),
            16 * 1024,
        )
        .await;
    let hello = stuck.recv().await;
    let id = data(&hello)["socket_id"].as_str().unwrap().to_owned();
    subscribe_presence(&mut stuck, &id, "presence-jam", "stuck").await;
    // Subscribed before the crowd comes: each arrival is a member event.
    let ok = stuck.recv().await;
    assert_eq!(
        ok["event"], "pusher_internal:subscription_succeeded",
        "{ok}"
    );
    let space = SpaceName::new("presence-jam").unwrap();
    let meta = Metadata::from_json(&format!(r#"{{"pad":"{}"}}"#, "x".repeat(800))).unwrap();
    let beats: Vec<Heartbeat> = (0..9_000)
        .map(|i| Heartbeat {
            member: user_key(&format!("j{i}")),
            at_ms: None,
            meta: Some(meta.clone()),
        })
        .collect();
    for chunk in beats.chunks(1_000) {
        s.store.heartbeat(&space, chunk).await.unwrap();
    }
    // Members keep coming and going while it reads nothing, as in a busy
    // channel, so its queue stays full.
    let churn = {
        let store = s.store.clone();
        let space = space.clone();
        let meta = meta.clone();
        tokio::spawn(async move {
            let members: Vec<_> = (0..50).map(|i| user_key(&format!("churn{i}"))).collect();
            let beats: Vec<Heartbeat> = members
                .iter()
                .map(|m| Heartbeat {
                    member: m.clone(),
                    at_ms: None,
                    meta: Some(meta.clone()),
                })
                .collect();
            loop {
                store.heartbeat(&space, &beats).await.unwrap();
                store.leave(&space, &members).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    // It reads nothing for longer than the stall limit (a server cannot
    // read a socket whose writes are jammed either); then it reads what
    // is left, up to the close.
    tokio::time::sleep(Duration::from_secs(13)).await;
    assert_eq!(stuck.closed().await, Some(4100));
    churn.abort();
    let _ = churn.await;
    let churned: Vec<_> = (0..50).map(|i| user_key(&format!("churn{i}"))).collect();
    s.store.leave(&space, &churned).await.unwrap();
    // The stuck one is in its grace (closed without a goodbye), then gone.
    s.clock.advance(Duration::from_secs(6));
    s.state.tick().await;
    // The others are served: a fresh socket subscribes at once.
    let (mut fresh, fresh_id) = socket(&s).await;
    subscribe_presence(&mut fresh, &fresh_id, "presence-jam", "fresh").await;
    let roster = data(&fresh.recv().await);
    assert_eq!(roster["presence"]["count"], 9_001, "the stuck one left");
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_api_refuses_every_bad_signature_and_changes_nothing() {
    let s = Server::start_with(config(10)).await;
    let (mut c, _) = socket(&s).await;
    c.send(json!({"event": "pusher:subscribe", "data": {"channel": "news"}}))
        .await;
    assert_eq!(
        c.recv().await["event"],
        "pusher_internal:subscription_succeeded"
    );
    let path = format!("/apps/{ID}/events");
    let forged = r#"{"name":"e","channel":"news","data":"forged"}"#;
    let now = now_s();
    for (why, timestamp, tamper) in [
        ("an old timestamp", now - 601, None),
        ("a future timestamp", now + 601, None),
        ("another body", now, Some(("body_md5=", "body_md5=0"))),
        (
            "a changed signature",
            now,
            Some(("auth_signature=", "auth_signature=0")),
        ),
        ("another key", now, Some((KEY, "other-key"))),
    ] {
        let (status, _) = api(&s, "POST", &path, forged, &[], timestamp, tamper).await;
        assert_eq!(status, 401, "{why}");
    }
    // The app id is part of the path.
    let (status, _) = api(&s, "POST", "/apps/78/events", forged, &[], now, None).await;
    assert_eq!(status, 404);
    let real = r#"{"name":"e","channel":"news","data":"real"}"#;
    let (status, body) = api(&s, "POST", &path, real, &[], now, None).await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    let got = c.recv().await;
    assert_eq!(
        (got["event"].as_str(), got["data"].as_str()),
        (Some("e"), Some("real"))
    );

    // Queries: a prefix filter, and user_count only for presence channels.
    let (status, body) = api(
        &s,
        "GET",
        &format!("/apps/{ID}/channels"),
        "",
        &[("filter_by_prefix", "ne")],
        now,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"channels": {"news": {}}})
    );
    let (status, _) = api(
        &s,
        "GET",
        &format!("/apps/{ID}/channels/news"),
        "",
        &[("info", "user_count")],
        now,
        None,
    )
    .await;
    assert_eq!(status, 400);
    // An info the channel cannot answer: refused, and nothing sent.
    let asks = r#"{"name":"e","channel":"news","data":"x","info":"user_count"}"#;
    let (status, _) = api(&s, "POST", &path, asks, &[], now, None).await;
    assert_eq!(status, 400);
    let last = r#"{"name":"e","channel":"news","data":"last"}"#;
    assert_eq!(api(&s, "POST", &path, last, &[], now, None).await.0, 200);
    assert_eq!(
        c.recv().await["data"],
        "last",
        "the refused event was not sent"
    );
    // Over 100 channels in one event.
    let channels: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
    let many = json!({"name": "e", "channels": channels, "data": "x"}).to_string();
    let (status, _) = api(&s, "POST", &path, &many, &[], now, None).await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_43_shutdown_closes_with_4200_after_handing_the_presence_channels_to_the_grace() {
    let mut s = Server::start_with(config(10)).await;
    let (mut c, id) = socket(&s).await;
    subscribe_presence(&mut c, &id, "presence-bye", "ann").await;
    assert_eq!(
        c.recv().await["event"],
        "pusher_internal:subscription_succeeded"
    );
    let space = SpaceName::new("presence-bye").unwrap();
    let ann = user_key("ann");
    let conns = s
        .store
        .live_connections()
        .unwrap()
        .connections(&space, std::slice::from_ref(&ann))
        .await
        .unwrap();
    assert_eq!(conns[0].len(), 1, "the socket is ann's live connection");
    s.stop().await;
    assert_eq!(c.closed().await, Some(4200), "reconnect at once, elsewhere");
    let conns = s
        .store
        .live_connections()
        .unwrap()
        .connections(&space, &[ann])
        .await
        .unwrap();
    assert!(
        conns[0].len() == 1 && conns[0][0].lingering,
        "handed to the grace before the close: {conns:?}"
    );
}

/// Two servers sharing one Redis: a presence channel is one roster.
#[cfg(feature = "redis")]
mod on_redis {

    use herenow_core::ManualClock;

    use herenow_testkit as common;

    use super::*;
    use crate::support::T0;

    async fn server_on(redis: &common::RedisServer, clock: &ManualClock) -> Server {
        Server::on_redis(&redis.url(), config(10_000), clock).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_socket_behind_a_join_storm_ends_with_the_exact_roster_on_redis() {
        let redis = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        storm_then_read(&server_on(&redis, &clock).await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_users_sockets_on_two_servers_are_one_member() {
        let redis = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        let a = server_on(&redis, &clock).await;
        let b = server_on(&redis, &clock).await;
        let (mut ben, ben_id) = socket(&b).await;
        subscribe_presence(&mut ben, &ben_id, "presence-x", "ben").await;
        assert_eq!(data(&ben.recv().await)["presence"]["count"], 1);

        let (mut ann_a, ann_a_id) = socket(&a).await;
        subscribe_presence(&mut ann_a, &ann_a_id, "presence-x", "ann").await;
        let roster = data(&ann_a.recv().await);
        assert_eq!(
            roster["presence"]["count"], 2,
            "ben, from server b: {roster}"
        );
        let added = ben.recv().await;
        assert_eq!(added["event"], "pusher_internal:member_added");
        assert_eq!(data(&added)["user_id"], "ann");
        assert_eq!(data(&added)["user_info"]["name"], "ann");

        // Ann's second socket, on b: no new member.
        let (mut ann_b, ann_b_id) = socket(&b).await;
        subscribe_presence(&mut ann_b, &ann_b_id, "presence-x", "ann").await;
        assert_eq!(data(&ann_b.recv().await)["presence"]["count"], 2);

        // Either server answers the same distinct users, and the same
        // subscriptions: ben's, and ann's on each server.
        let now = now_s();
        for s in [&a, &b] {
            let path = format!("/apps/{ID}/channels/presence-x");
            let info = [("info", "user_count,subscription_count")];
            let (status, body) = api(s, "GET", &path, "", &info, now, None).await;
            assert_eq!(status, 200);
            let info: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(
                (
                    info["user_count"].as_u64(),
                    info["subscription_count"].as_u64(),
                    info["occupied"].as_bool()
                ),
                (Some(2), Some(3), Some(true)),
                "{info}"
            );
        }

        // Her socket on a goes: ben sees nothing; her last goes: removed
        // once its grace is over (the servers' ticks sweep it).
        ann_a.close().await;
        ann_b.close().await;
        clock.advance(Duration::from_secs(6));
        let removed = ben.recv().await;
        assert_eq!(
            removed["event"], "pusher_internal:member_removed",
            "{removed}"
        );
        assert_eq!(data(&removed)["user_id"], "ann");
    }

    /// `GET /apps/{ID}/channels/{channel}`'s count and the channel list
    /// as one server answers them.
    async fn counts(s: &Server, channel: &str) -> (Value, Value) {
        let now = now_s();
        let path = format!("/apps/{ID}/channels/{channel}");
        let info = [("info", "subscription_count")];
        let (status, body) = api(s, "GET", &path, "", &info, now, None).await;
        assert_eq!(status, 200, "{body}");
        let one: Value = serde_json::from_str(&body).unwrap();
        let path = format!("/apps/{ID}/channels");
        let (status, body) = api(s, "GET", &path, "", &[], now, None).await;
        assert_eq!(status, 200, "{body}");
        let all: Value = serde_json::from_str(&body).unwrap();
        (one, all["channels"].clone())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_public_channels_count_and_listing_are_the_same_on_every_server() {
        let redis = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        let a = server_on(&redis, &clock).await;
        let b = server_on(&redis, &clock).await;
        let (mut a1, _) = socket(&a).await;
        let (mut a2, _) = socket(&a).await;
        let (mut b1, _) = socket(&b).await;
        support::pusher::subscribe(&mut a1, "news").await;
        support::pusher::subscribe(&mut a2, "news").await;
        support::pusher::subscribe(&mut b1, "news").await;
        for s in [&a, &b] {
            let (one, all) = counts(s, "news").await;
            assert_eq!(one, json!({"occupied": true, "subscription_count": 3}));
            assert_eq!(all, json!({"news": {}}), "one channel, listed by both");
        }
        // Server a's sockets go: b's remains, counted by both.
        a1.send(json!({"event": "pusher:unsubscribe", "data": {"channel": "news"}}))
            .await;
        a2.close().await;
        // The unsubscribe is not answered: a ping after it is, so it has
        // been handled (and its count written) once the pong comes.
        a1.send(json!({"event": "pusher:ping", "data": {}})).await;
        assert_eq!(a1.recv().await["event"], "pusher:pong");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (one, _) = counts(&a, "news").await;
            if one["subscription_count"] == 1 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "still {one}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(counts(&b, "news").await.0["subscription_count"], 1);
        // The last goes: the channel is vacant and unlisted everywhere.
        b1.close().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (one, all) = counts(&b, "news").await;
            if one == json!({"occupied": false, "subscription_count": 0}) && all == json!({}) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "still {one} {all}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (one, all) = counts(&a, "news").await;
        assert_eq!(
            (one["subscription_count"].clone(), all),
            (json!(0), json!({}))
        );
    }
}

#[tokio::test]
async fn the_channel_list_holds_the_apps_presence_channels_and_no_other_space() {
    let s = Server::start_with(config(10_000)).await;
    // Spaces around the presence channels' run of names, present through
    // herenow's own API: never listed.
    for space in [
        "a-room",
        "presence",
        "pusher-x",
        "zz-room",
        "2:presence-other-app",
    ] {
        let space = SpaceName::new(space).unwrap();
        s.store
            .heartbeat(&space, &[Heartbeat::now(user_key("ann"))])
            .await
            .unwrap();
    }
    // A presence channel present through herenow's API is occupied too.
    let api_side = SpaceName::new("presence-api").unwrap();
    s.store
        .heartbeat(&api_side, &[Heartbeat::now(user_key("bob"))])
        .await
        .unwrap();
    let mut held = Vec::new();
    for channel in ["presence-b1", "presence-b2", "presence-c"] {
        let (mut c, id) = socket(&s).await;
        subscribe_presence(&mut c, &id, channel, "cy").await;
        assert_eq!(
            c.recv().await["event"],
            "pusher_internal:subscription_succeeded"
        );
        held.push(c);
    }
    let list = |prefix: &'static str| {
        let s = &s;
        async move {
            let path = format!("/apps/{ID}/channels");
            let (status, body) = api(
                s,
                "GET",
                &path,
                "",
                &[("filter_by_prefix", prefix)],
                now_s(),
                None,
            )
            .await;
            assert_eq!(status, 200, "{body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            let names: Vec<String> = v["channels"].as_object().unwrap().keys().cloned().collect();
            names
        }
    };
    assert_eq!(
        list("").await,
        ["presence-api", "presence-b1", "presence-b2", "presence-c"]
    );
    assert_eq!(list("presence-b").await, ["presence-b1", "presence-b2"]);
    assert_eq!(list("presence-b1").await, ["presence-b1"]);
    assert_eq!(list("presence-;").await, Vec::<String>::new());
    assert_eq!(list("a-").await, Vec::<String>::new());
}

#[tokio::test]
async fn two_apps_never_share_a_presence_channel() {
    const KEY2: &str = "second-key";
    const SECRET2: &str = "second-secret-5678";
    let mut cfg = config(10_000);
    cfg.pusher
        .apps
        .push(format!("88:{KEY2}:{SECRET2}").parse().unwrap());
    let s = Server::start_with(cfg).await;
    let (mut ann, ann_id) = socket(&s).await;
    subscribe_presence(&mut ann, &ann_id, "presence-room", "ann").await;
    assert_eq!(data(&ann.recv().await)["presence"]["count"], 1);

    // The second app's socket, in a channel of the same name.
    let mut bob = s
        .connect_to(&format!("ws://{}/app/{KEY2}?protocol=7", s.addr))
        .await;
    let bob_id = data(&bob.recv().await)["socket_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let channel_data = json!({"user_id": "bob"}).to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET2.as_bytes()).unwrap();
    mac.update(format!("{bob_id}:presence-room:{channel_data}").as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    bob.send(
        json!({"event": "pusher:subscribe", "data": {"channel": "presence-room",
        "auth": format!("{KEY2}:{hex}"), "channel_data": channel_data}}),
    )
    .await;
    let roster = data(&bob.recv().await);
    assert_eq!(roster["presence"]["ids"], json!(["bob"]), "{roster}");

    // The first app's channel goes on without bob.
    let (mut cat, cat_id) = socket(&s).await;
    subscribe_presence(&mut cat, &cat_id, "presence-room", "cat").await;
    let roster = data(&cat.recv().await);
    let mut ids: Vec<String> = serde_json::from_value(roster["presence"]["ids"].clone()).unwrap();
    ids.sort();
    assert_eq!(ids, ["ann", "cat"]);
    let added = ann.recv().await;
    assert_eq!(added["event"], "pusher_internal:member_added");
    assert_eq!(data(&added)["user_id"], "cat", "{added}");
    let (status, body) = api(
        &s,
        "GET",
        &format!("/apps/{ID}/channels/presence-room/users"),
        "",
        &[],
        now_s(),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let users: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(users["users"].as_array().unwrap().len(), 2, "{users}");
    // herenow's own API sees both: the first app's channel is the space of
    // its name, the second's is `88:` and its name.
    let first = SpaceName::new("presence-room").unwrap();
    let second = SpaceName::new("88:presence-room").unwrap();
    assert_eq!(s.store.count(&first, None).await.unwrap().users, 2);
    assert_eq!(s.store.count(&second, None).await.unwrap().users, 1);
}
