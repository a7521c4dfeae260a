//! The WebSocket protocol (docs/PROTOCOL.md) against a real listener:
//! every message as it should go — hello and ping, join, update and leave
//! seen by a subscriber, many devices of one user, snapshots in pages with
//! each member's visible connections, invisible mode. Bad messages,
//! bounds, timeouts and shutdown are in `ws_bounds.rs`.
//!
//! Time: the store runs on a `ManualClock` the tests move. Nothing sleeps
//! to wait for state: tests wait for messages, with a deadline.

mod support;

use herenow_core::{Heartbeat, SpaceName, Status};
use serde_json::{Value, json};
use support::ws::Server;
use support::{T0, user_key};

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

fn conn_of(welcome: &Value) -> String {
    welcome["conn"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn hello_welcomes_and_ping_pongs() {
    let s = Server::start().await;
    let (mut c, w) = s.hello("ann", &["room:1", "room:2"]).await;
    assert!(w["conn"].as_str().is_some_and(|c| !c.is_empty()), "{w}");
    assert_eq!(w["member"], json!({"kind": "user", "id": "ann"}));
    assert_eq!(w["spaces"], json!(["room:1", "room:2"]));
    assert_eq!(w["ping_ms"], 10_000);
    assert_eq!(w["ttl_ms"], 30_000);
    assert_eq!(w["server_time_ms"], T0);

    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong");
    assert_eq!(pong["server_time_ms"], T0);
    // String refs are echoed as they came.
    c.send(json!({"type": "ping", "ref": "p-1"})).await;
    assert_eq!(c.recv().await["ref"], "p-1");

    assert_eq!(
        c.error(json!({"type": "hello", "token": s.token("ann", &["*"])}))
            .await,
        "already-hello"
    );

    // The token may come in the URL instead: welcome at once, no hello.
    let token = s.token("bo", &["*"]);
    let mut u = s
        .connect_to(&format!("ws://{}/v1/ws?token={token}", s.addr))
        .await;
    let w2 = u.recv().await;
    assert_eq!(w2["type"], "welcome");
    assert_eq!(w2["member"]["id"], "bo");
    assert_eq!(w2["spaces"], json!(["*"]));
    assert!(w2.get("ref").is_none());
    assert_ne!(w2["conn"], w["conn"], "connection ids are unique");
    assert_eq!(s.state.open_websockets(), 2);

    let metrics = s.state.metrics().render();
    assert!(metrics.contains("herenow_ws_connections"), "{metrics}");
    assert!(
        metrics.contains(r#"herenow_ws_messages_total{type="ping",store="memory"} 2"#)
            || metrics.contains(r#"herenow_ws_messages_total{store="memory",type="ping"} 2"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn join_update_and_leave_reach_a_subscriber() {
    let s = Server::start().await;
    let (mut watcher, _) = s.hello("wat", &["room:1"]).await;
    assert!(watcher.subscribe("room:1").await.is_empty());

    let (mut bo, w) = s.hello("bo", &["room:1"]).await;
    let bo_conn = conn_of(&w);
    bo.ok(json!({"type": "join", "space": "room:1", "meta": {"device": "phone"}}))
        .await;
    let e = watcher.event("room:1").await;
    assert_eq!(e["type"], "join");
    assert_eq!(e["space"], "room:1");
    assert_eq!((&e["id"], &e["kind"]), (&json!("bo"), &json!("user")));
    assert_eq!(e["status"], "online");
    assert_eq!(e["last_seen_ms"], T0);
    assert_eq!(e["meta"], json!({"device": "phone"}));
    assert_eq!(e["conn"], bo_conn);

    bo.ok(json!({"type": "update", "space": "room:1", "meta": {"typing": true}}))
        .await;
    let e = watcher.event("room:1").await;
    assert_eq!(
        (&e["type"], &e["conn"]),
        (&json!("update"), &json!(bo_conn))
    );
    assert_eq!(e["meta"], json!({"typing": true}));
    // null clears the metadata.
    bo.ok(json!({"type": "update", "space": "room:1", "meta": null}))
        .await;
    let e = watcher.event("room:1").await;
    assert_eq!(e["type"], "update");
    assert!(e.get("meta").is_none(), "{e}");

    bo.ok(json!({"type": "leave", "space": "room:1"})).await;
    let e = watcher.event("room:1").await;
    assert_eq!(
        (&e["type"], &e["reason"], &e["conn"]),
        (&json!("leave"), &json!("explicit"), &json!(bo_conn))
    );
    assert_eq!(e["status"], "offline");
    assert_eq!(
        bo.error(json!({"type": "leave", "space": "room:1"})).await,
        "not-joined"
    );
    assert_eq!(
        bo.error(json!({"type": "update", "space": "room:1", "meta": {}}))
            .await,
        "not-joined"
    );

    watcher
        .ok(json!({"type": "unsubscribe", "space": "room:1"}))
        .await;
    assert_eq!(
        watcher
            .error(json!({"type": "unsubscribe", "space": "room:1"}))
            .await,
        "not-subscribed"
    );
    // Unsubscribed: bo's next join reaches nobody; the watcher's next
    // message is the answer to its ping.
    bo.ok(json!({"type": "join", "space": "room:1"})).await;
    watcher.send(json!({"type": "ping", "ref": 99})).await;
    let next = watcher.recv().await;
    assert_eq!((&next["type"], &next["ref"]), (&json!("pong"), &json!(99)));
}

#[tokio::test]
async fn two_devices_of_one_user_join_once_and_leave_on_the_last() {
    let s = Server::start().await;
    let (mut watcher, _) = s.hello("wat", &["*"]).await;
    watcher.subscribe("room").await;
    let (mut laptop, wl) = s.hello("ann", &["room"]).await;
    let (phone, wp) = s.hello("ann", &["room"]).await;
    let mut phone = phone;
    let (laptop_conn, phone_conn) = (conn_of(&wl), conn_of(&wp));

    laptop
        .ok(json!({"type": "join", "space": "room", "meta": {"device": "laptop"}}))
        .await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["conn"]),
        (&json!("join"), &json!(laptop_conn))
    );
    phone
        .ok(json!({"type": "join", "space": "room", "meta": {"device": "phone"}}))
        .await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["id"], &e["conn"]),
        (&json!("connect"), &json!("ann"), &json!(phone_conn))
    );
    assert_eq!(e["meta"], json!({"device": "phone"}));
    // Joining again from the same device is an update of its metadata.
    phone
        .ok(json!({"type": "join", "space": "room", "meta": {"device": "phone", "v": 2}}))
        .await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["conn"]),
        (&json!("update"), &json!(phone_conn))
    );

    // A new subscriber sees ann once, with both devices' metadata.
    let (mut late, _) = s.hello("late", &["room"]).await;
    let members = late.subscribe("room").await;
    assert_eq!(members.len(), 1, "{members:?}");
    assert_eq!(members[0]["id"], "ann");
    let mut metas: Vec<(String, Value)> = members[0]["metas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["conn"].as_str().unwrap().to_owned(), m["meta"].clone()))
        .collect();
    metas.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want = vec![
        (laptop_conn.clone(), json!({"device": "laptop"})),
        (phone_conn.clone(), json!({"device": "phone", "v": 2})),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(metas, want);

    // The phone's socket closes: a disconnect, ann stays online.
    phone.close().await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["conn"], &e["status"]),
        (&json!("disconnect"), &json!(phone_conn), &json!("online"))
    );
    // The laptop leaves: ann leaves.
    laptop.ok(json!({"type": "leave", "space": "room"})).await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["conn"], &e["reason"]),
        (&json!("leave"), &json!(laptop_conn), &json!("explicit"))
    );
}

#[tokio::test]
async fn snapshots_come_in_pages_with_visible_connections() {
    let s = Server::start().await;
    // Three members present by HTTP heartbeats only, at distinct times.
    for (i, id) in ["h1", "h2", "h3"].iter().enumerate() {
        s.store
            .heartbeat(
                &space("big"),
                &[Heartbeat {
                    member: user_key(id),
                    at_ms: Some(T0 - 1000 * (i as u64 + 1)),
                    meta: None,
                }],
            )
            .await
            .unwrap();
    }
    let (mut ann, w) = s.hello("ann", &["big"]).await;
    ann.ok(json!({"type": "join", "space": "big", "meta": {"n": 1}}))
        .await;

    let (mut c, _) = s.hello("wat", &["big"]).await;
    c.send(json!({"type": "subscribe", "space": "big", "page_size": 2, "ref": "s"}))
        .await;
    let mut pages = Vec::new();
    loop {
        let p = c.recv().await;
        assert_eq!(p["type"], "snapshot");
        let last = p["last"] == true;
        pages.push(p);
        if last {
            break;
        }
    }
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[0]["members"].as_array().unwrap().len(), 2);
    assert!(pages[0].get("ref").is_none() && pages[0].get("omitted").is_none());
    assert_eq!(pages[1]["ref"], "s");
    assert_eq!(pages[1]["omitted"], 0);
    let members: Vec<&Value> = pages
        .iter()
        .flat_map(|p| p["members"].as_array().unwrap())
        .collect();
    // Most recent first: ann (now), then h1, h2, h3.
    let ids: Vec<&str> = members.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["ann", "h1", "h2", "h3"]);
    assert_eq!(
        members[0]["metas"],
        json!([{"conn": w["conn"], "meta": {"n": 1}}])
    );
    assert_eq!(members[0]["meta"], json!({"n": 1}));
    assert_eq!(members[0]["status"], "online");
    for m in &members[1..] {
        assert_eq!(
            m["metas"],
            json!([]),
            "HTTP-only members have no connections"
        );
    }
    // Subscribing again restarts the snapshot (default page size: one page).
    let again = c.subscribe("big").await;
    assert_eq!(again.len(), 4);
}

#[tokio::test]
async fn invisible_connections_see_without_being_seen() {
    let s = Server::start().await;
    let (mut watcher, _) = s.hello("wat", &["room"]).await;
    watcher.subscribe("room").await;

    let (mut hidden, wh) = s.hello("ann", &["room"]).await;
    hidden.ok(json!({"type": "invisible", "on": true})).await;
    hidden
        .ok(json!({"type": "join", "space": "room", "meta": {"secret": 1}}))
        .await;
    // bo's join is the first event: ann's invisible join made none.
    let (mut bo, _) = s.hello("bo", &["room"]).await;
    bo.ok(json!({"type": "join", "space": "room"})).await;
    let e = watcher.event("room").await;
    assert_eq!((&e["type"], &e["id"]), (&json!("join"), &json!("bo")));
    // The invisible connection still sees everyone else.
    let seen = hidden.subscribe("room").await;
    let ids: Vec<&str> = seen.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["bo"]);
    // Pings keep it alive without showing it.
    assert_eq!(
        hidden.request(json!({"type": "ping"})).await["type"],
        "pong"
    );

    // A visible device of ann: she joins, and the snapshot lists only
    // that device's connection.
    let (mut shown, ws) = s.hello("ann", &["room"]).await;
    shown
        .ok(json!({"type": "join", "space": "room", "meta": {"device": "phone"}}))
        .await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["id"], &e["conn"]),
        (&json!("join"), &json!("ann"), &ws["conn"])
    );
    let (mut late, _) = s.hello("late", &["room"]).await;
    let members = late.subscribe("room").await;
    let ann = members.iter().find(|m| m["id"] == "ann").unwrap();
    assert_eq!(
        ann["metas"],
        json!([{"conn": ws["conn"], "meta": {"device": "phone"}}]),
        "the invisible connection is never shown"
    );
    // The hidden one's own view carries the events too.
    let e = hidden.event("room").await;
    assert_eq!(e["conn"], ws["conn"]);

    // The visible device leaves: ann leaves, though the invisible
    // connection stays.
    shown.ok(json!({"type": "leave", "space": "room"})).await;
    let e = watcher.event("room").await;
    assert_eq!((&e["type"], &e["id"]), (&json!("leave"), &json!("ann")));
    // Showing the hidden connection again is a join.
    hidden.ok(json!({"type": "invisible", "on": false})).await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["id"], &e["conn"]),
        (&json!("join"), &json!("ann"), &wh["conn"])
    );
    assert_eq!(e["meta"], json!({"secret": 1}));
    // And hiding it again is a leave.
    hidden.ok(json!({"type": "invisible", "on": true})).await;
    let e = watcher.event("room").await;
    assert_eq!((&e["type"], &e["id"]), (&json!("leave"), &json!("ann")));
    let st = s
        .store
        .status(&space("room"), &[user_key("ann")])
        .await
        .unwrap();
    assert_eq!(st[0].status, Status::Offline);
}
