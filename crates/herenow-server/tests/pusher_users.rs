//! Pusher users (issue 38): `pusher:signin`, the user's channel
//! `#server-to-user-{id}`, the Watchlist, `terminate_connections`, and
//! events relayed between two servers on one Redis, read as the frames
//! are sent. pusher-js's own view is `crates/herenow/tests/pusher_users.rs`.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::pusher::{ID, KEY, api, config, data, signin, socket, subscribe, trigger};
use support::ws::{Client, Server};

/// The next message, which must be `event`.
async fn expect(c: &mut Client, event: &str) -> Value {
    let m = c.recv().await;
    assert_eq!(m["event"], event, "{m}");
    m
}

/// A ping answered: the socket is alive and nothing came before the pong.
async fn alive(c: &mut Client) {
    c.send(json!({"event": "pusher:ping", "data": {}})).await;
    expect(c, "pusher:pong").await;
}

/// The watchlist events of one message, as (name, sorted ids).
fn watch_events(m: &Value) -> Vec<(String, Vec<String>)> {
    assert_eq!(m["event"], "pusher_internal:watchlist_events", "{m}");
    data(m)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut ids: Vec<String> = e["user_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            ids.sort();
            (e["name"].as_str().unwrap().to_owned(), ids)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_in_socket_gets_its_users_events_and_no_one_elses() {
    let s = Server::start_with(config()).await;
    let (mut ann, ann_id) = socket(&s).await;
    let user_data = json!({"id": "ann", "user_info": {"name": "Ann"}});
    signin(&mut ann, &ann_id, &user_data).await;
    let ok = expect(&mut ann, "pusher:signin_success").await;
    let echoed: Value = serde_json::from_str(data(&ok)["user_data"].as_str().unwrap()).unwrap();
    assert_eq!(echoed, user_data);
    // pusher-js subscribes its own user's channel; another's is refused.
    subscribe(&mut ann, "#server-to-user-ann").await;
    ann.send(json!({"event": "pusher:subscribe", "data": {"channel": "#server-to-user-bob"}}))
        .await;
    let refused = expect(&mut ann, "pusher:subscription_error").await;
    assert_eq!(refused["data"]["status"], 403);
    // A socket not signed in cannot listen in either.
    let (mut eve, _) = socket(&s).await;
    eve.send(json!({"event": "pusher:subscribe", "data": {"channel": "#server-to-user-ann"}}))
        .await;
    expect(&mut eve, "pusher:subscription_error").await;

    trigger(&s, "#server-to-user-ann", "note", "{\"n\":1}").await;
    let note = expect(&mut ann, "note").await;
    assert_eq!(note["channel"], "#server-to-user-ann");
    assert_eq!(data(&note)["n"], 1);
    alive(&mut eve).await;
    // Signed in once per connection.
    signin(&mut ann, &ann_id, &json!({"id": "bob"})).await;
    assert_eq!(
        expect(&mut ann, "pusher:error").await["data"]["code"],
        Value::Null
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_signins_are_refused_as_the_protocol_says() {
    let s = Server::start_with(config()).await;
    // A bad signature: 4009, then the close 4009.
    let (mut c, id) = socket(&s).await;
    let user_data = json!({"id": "ann"}).to_string();
    c.send(json!({"event": "pusher:signin",
        "data": {"auth": format!("{KEY}:{}", "0".repeat(64)), "user_data": user_data}}))
        .await;
    assert_eq!(expect(&mut c, "pusher:error").await["data"]["code"], 4009);
    assert_eq!(c.closed().await, Some(4009));
    // Signed with another socket's id, or by another key: the same.
    let (mut c, _) = socket(&s).await;
    signin(&mut c, &id, &json!({"id": "ann"})).await;
    assert_eq!(expect(&mut c, "pusher:error").await["data"]["code"], 4009);
    assert_eq!(c.closed().await, Some(4009));

    // Signed, but user_data that cannot be used: an error, the socket
    // stays, not signed in.
    let long_watchlist: Vec<String> = (0..101).map(|i| format!("u{i}")).collect();
    let cases = [
        ("an id that is a number", json!({"id": 7})),
        ("no id", json!({"user_info": {}})),
        ("an empty id", json!({"id": ""})),
        (
            "user_info not an object",
            json!({"id": "a", "user_info": [1]}),
        ),
        (
            "user_info over 1 KiB",
            json!({"id": "a", "user_info": {"x": "y".repeat(1100)}}),
        ),
        (
            "a watchlist past 100",
            json!({"id": "a", "watchlist": long_watchlist}),
        ),
        (
            "a watchlist of numbers",
            json!({"id": "a", "watchlist": [1, 2]}),
        ),
        (
            "user_data over 16 KiB",
            json!({"id": "a", "pad": "p".repeat(17 * 1024)}),
        ),
        ("not an object", json!(["a"])),
    ];
    for (what, user_data) in cases {
        let (mut c, id) = socket(&s).await;
        signin(&mut c, &id, &user_data).await;
        let e = expect(&mut c, "pusher:error").await;
        assert_eq!(e["data"]["code"], Value::Null, "{what}: {e}");
        alive(&mut c).await;
        c.send(json!({"event": "pusher:subscribe", "data": {"channel": "#server-to-user-a"}}))
            .await;
        expect(&mut c, "pusher:subscription_error").await;
    }
    // Malformed frames: no data, data without auth, a number.
    for bad in [
        json!({"event": "pusher:signin"}),
        json!({"event": "pusher:signin", "data": {"user_data": "{}"}}),
        json!({"event": "pusher:signin", "data": 5}),
    ] {
        let (mut c, _) = socket(&s).await;
        c.send(bad.clone()).await;
        assert_eq!(
            expect(&mut c, "pusher:error").await["data"]["code"],
            Value::Null,
            "{bad}"
        );
        alive(&mut c).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchlist_says_online_and_offline() {
    let s = Server::start_with(config()).await;
    let (mut ann, ann_id) = socket(&s).await;
    signin(
        &mut ann,
        &ann_id,
        &json!({"id": "ann", "watchlist": ["bob", "cy"]}),
    )
    .await;
    expect(&mut ann, "pusher:signin_success").await;
    // Right after signin: the state of each watched user.
    assert_eq!(
        watch_events(&ann.recv().await),
        vec![(
            "offline".to_owned(),
            vec!["bob".to_owned(), "cy".to_owned()]
        )]
    );
    // Bob signs in: online; a second socket of his changes nothing.
    let (mut bob, bob_id) = socket(&s).await;
    signin(&mut bob, &bob_id, &json!({"id": "bob"})).await;
    expect(&mut bob, "pusher:signin_success").await;
    assert_eq!(
        watch_events(&ann.recv().await),
        vec![("online".to_owned(), vec!["bob".to_owned()])]
    );
    let (mut bob2, bob2_id) = socket(&s).await;
    signin(&mut bob2, &bob2_id, &json!({"id": "bob"})).await;
    expect(&mut bob2, "pusher:signin_success").await;
    // His sockets go, the last without a goodbye: he is in his grace, and
    // the watchlist says nothing; his page comes back within it: nothing.
    bob.close().await;
    bob2.close().await;
    alive(&mut ann).await;
    let (mut bob3, bob3_id) = socket(&s).await;
    signin(&mut bob3, &bob3_id, &json!({"id": "bob"})).await;
    expect(&mut bob3, "pusher:signin_success").await;
    s.clock.advance(Duration::from_secs(6));
    s.state.tick().await;
    alive(&mut ann).await;
    // It goes for good: offline once the grace is over.
    bob3.close().await;
    alive(&mut ann).await;
    s.clock.advance(Duration::from_secs(6));
    assert_eq!(
        watch_events(&ann.recv().await),
        vec![("offline".to_owned(), vec!["bob".to_owned()])]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_connections_closes_the_users_sockets_only() {
    let s = Server::start_with(config()).await;
    let mut anns = Vec::new();
    for _ in 0..2 {
        let (mut c, id) = socket(&s).await;
        signin(&mut c, &id, &json!({"id": "ann"})).await;
        expect(&mut c, "pusher:signin_success").await;
        anns.push(c);
    }
    let (mut bob, bob_id) = socket(&s).await;
    signin(&mut bob, &bob_id, &json!({"id": "bob"})).await;
    expect(&mut bob, "pusher:signin_success").await;
    let path = format!("/apps/{ID}/users/ann/terminate_connections");
    let (status, body) = api(&s, "POST", &path, "{}").await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    for mut c in anns {
        assert_eq!(c.closed().await, Some(4009));
    }
    alive(&mut bob).await;
    // A user id that cannot be one: 400.
    let (status, _) = api(
        &s,
        "POST",
        &format!("/apps/{ID}/users/%01/terminate_connections"),
        "{}",
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_event_to_the_most_channels_is_relayed() {
    let s = Server::start_with(config());
    let s = s.await;
    let (mut c, _) = socket(&s).await;
    subscribe(&mut c, "news").await;
    // 10 KB of data that escapes to six bytes a character, to 100 channels
    // of the longest names.
    let data = "\u{1}".repeat(10 * 1024);
    let mut channels: Vec<String> = (0..99)
        .map(|i| format!("{i:03}{}", "c".repeat(161)))
        .collect();
    channels.push("news".into());
    let body = json!({"name": "big", "channels": channels, "data": data}).to_string();
    let (status, answer) = api(&s, "POST", &format!("/apps/{ID}/events"), &body).await;
    assert_eq!(status, 200, "{answer}");
    let got = expect(&mut c, "big").await;
    assert_eq!(got["data"].as_str().unwrap().len(), 10 * 1024);
}

/// Two servers sharing one Redis: events cross.
#[cfg(feature = "redis")]
mod on_redis {

    use herenow_core::ManualClock;

    use herenow_testkit as common;

    use super::*;
    use crate::support::T0;
    use crate::support::pusher::hmac_hex;

    async fn server_on(redis: &common::RedisServer, clock: &ManualClock) -> Server {
        Server::on_redis(&redis.url(), config(), clock).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_client_events_and_terminations_cross_servers_once() {
        let redis = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        let a = server_on(&redis, &clock).await;
        let b = server_on(&redis, &clock).await;
        let (mut on_a, _) = socket(&a).await;
        let (mut on_b, _) = socket(&b).await;
        subscribe(&mut on_a, "news").await;
        subscribe(&mut on_b, "news").await;
        // Through b: both get each event once, in order.
        trigger(&b, "news", "e1", "1").await;
        trigger(&b, "news", "e2", "2").await;
        for c in [&mut on_a, &mut on_b] {
            expect(c, "e1").await;
            expect(c, "e2").await;
            alive(c).await;
        }

        // A client event from a's socket reaches b's, not its sender.
        let (mut ca, ca_id) = socket(&a).await;
        let (mut cb, cb_id) = socket(&b).await;
        for (c, id) in [(&mut ca, &ca_id), (&mut cb, &cb_id)] {
            let auth = format!("{KEY}:{}", hmac_hex(&format!("{id}:private-room")));
            c.send(json!({"event": "pusher:subscribe",
                "data": {"channel": "private-room", "auth": auth}}))
                .await;
            expect(c, "pusher_internal:subscription_succeeded").await;
        }
        ca.send(json!({"event": "client-hi", "channel": "private-room", "data": {"x": 1}}))
            .await;
        let hi = expect(&mut cb, "client-hi").await;
        assert_eq!(hi["data"]["x"], 1);
        alive(&mut ca).await;

        // A user signed in on a: sent to through b, terminated through b.
        let (mut ann, ann_id) = socket(&a).await;
        signin(&mut ann, &ann_id, &json!({"id": "ann"})).await;
        expect(&mut ann, "pusher:signin_success").await;
        trigger(&b, "#server-to-user-ann", "note", "{}").await;
        expect(&mut ann, "note").await;
        let path = format!("/apps/{ID}/users/ann/terminate_connections");
        assert_eq!(api(&b, "POST", &path, "{}").await.0, 200);
        assert_eq!(ann.closed().await, Some(4009));
        alive(&mut on_a).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_watchlist_sees_a_user_signed_in_on_another_server() {
        let redis = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        let a = server_on(&redis, &clock).await;
        let b = server_on(&redis, &clock).await;
        let (mut ann, ann_id) = socket(&a).await;
        signin(
            &mut ann,
            &ann_id,
            &json!({"id": "ann", "watchlist": ["bob"]}),
        )
        .await;
        expect(&mut ann, "pusher:signin_success").await;
        assert_eq!(watch_events(&ann.recv().await)[0].0, "offline");
        let (mut bob, bob_id) = socket(&b).await;
        signin(&mut bob, &bob_id, &json!({"id": "bob"})).await;
        expect(&mut bob, "pusher:signin_success").await;
        assert_eq!(
            watch_events(&ann.recv().await),
            vec![("online".to_owned(), vec!["bob".to_owned()])]
        );
        // Gone without a goodbye: offline once his grace is over.
        bob.close().await;
        alive(&mut ann).await;
        clock.advance(Duration::from_secs(6));
        assert_eq!(
            watch_events(&ann.recv().await),
            vec![("offline".to_owned(), vec!["bob".to_owned()])]
        );
        alive(&mut ann).await;
    }

    /// A server whose relay feed lost messages closes its sockets with
    /// 4100 (reconnect after a while) rather than leave them missing
    /// events; sockets that come back hear events again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_relay_link_closes_the_sockets_with_4100() {
        let redis = common::RedisServer::standalone();
        let clock = ManualClock::new(T0);
        let a = server_on(&redis, &clock).await;
        let (mut c, _) = socket(&a).await;
        subscribe(&mut c, "news").await;
        for kind in ["normal", "pubsub"] {
            common::raw_command(redis.port, &format!("CLIENT KILL TYPE {kind}")).unwrap();
        }
        assert_eq!(c.closed().await, Some(4100));
        let (mut again, _) = socket(&a).await;
        subscribe(&mut again, "news").await;
        trigger(&a, "news", "e", "1").await;
        expect(&mut again, "e").await;
    }
}
