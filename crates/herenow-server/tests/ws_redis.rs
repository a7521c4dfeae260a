//! The WebSocket protocol over Redis: two servers sharing one
//! `redis-server` (started by the test) and one token secret. A member's
//! devices on different servers are one presence; a subscriber on either
//! server sees every connection's events; a connection whose server stops
//! answering for it is swept by the store within the TTL; a watcher on
//! one server sees the users of another.
//!
//! The stores run on one `ManualClock` the test moves.

mod support;

use herenow_testkit as common;

use std::time::Duration;

use herenow_core::{ManualClock, SpaceName, Status};
use herenow_server::{Config, TokenSecret};
use serde_json::{Value, json};
use support::ws::Server;
use support::{T0, user_key};

async fn server_on(redis: &common::RedisServer, clock: &ManualClock, config: &Config) -> Server {
    Server::on_redis(&redis.url(), config.clone(), clock).await
}

fn conn_of(welcome: &Value) -> Value {
    welcome["conn"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_redis_share_live_presence() {
    let redis = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let config = Config {
        token_secret: Some(TokenSecret::new(b"a-secret-every-server-shares-123".to_vec()).unwrap()),
        ..Config::default()
    };
    let mut a = server_on(&redis, &clock, &config).await;
    let mut b = server_on(&redis, &clock, &config).await;
    let room = SpaceName::new("room").unwrap();

    // A token minted by one server opens a socket on the other.
    let (mut watcher, _) = b.hello("wat", &["room"]).await;
    assert!(watcher.subscribe("room").await.is_empty());
    let mut laptop = a.connect().await;
    let wl = laptop
        .request(json!({"type": "hello", "token": b.token("ann", &["room"])}))
        .await;
    assert_eq!(wl["type"], "welcome");
    laptop
        .ok(json!({"type": "join", "space": "room", "meta": {"device": "laptop"}}))
        .await;
    let e = watcher.event("room").await;
    assert_eq!((&e["type"], &e["conn"]), (&json!("join"), &conn_of(&wl)));
    assert_eq!(e["meta"], json!({"device": "laptop"}));

    let (mut phone, wp) = b.hello("ann", &["room"]).await;
    assert_ne!(conn_of(&wp), conn_of(&wl), "ids differ across servers");
    phone
        .ok(json!({"type": "join", "space": "room", "meta": {"device": "phone"}}))
        .await;
    let e = watcher.event("room").await;
    assert_eq!((&e["type"], &e["conn"]), (&json!("connect"), &conn_of(&wp)));

    // A subscriber on the first server sees both devices.
    let (mut late, _) = a.hello("late", &["room"]).await;
    let members = late.subscribe("room").await;
    assert_eq!(members.len(), 1, "{members:?}");
    let mut conns: Vec<String> = members[0]["metas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["conn"].as_str().unwrap().to_owned())
        .collect();
    conns.sort();
    let mut want = vec![
        wl["conn"].as_str().unwrap().to_owned(),
        wp["conn"].as_str().unwrap().to_owned(),
    ];
    want.sort();
    assert_eq!(conns, want);

    // The phone closes: a disconnect, seen on both servers.
    phone.close().await;
    for c in [&mut watcher, &mut late] {
        let e = c.event("room").await;
        assert_eq!(
            (&e["type"], &e["conn"]),
            (&json!("disconnect"), &conn_of(&wp))
        );
    }

    // The laptop's server stops pinging for it (the test moves the clock
    // past the TTL without a message): the store sweeps it, whichever
    // server's ticker holds the sweep lease.
    clock.advance(Duration::from_secs(31));
    b.state.tick().await;
    let e = watcher.event("room").await;
    assert_eq!(
        (&e["type"], &e["reason"], &e["conn"]),
        (&json!("leave"), &json!("timeout"), &conn_of(&wl))
    );
    let st = b.store.status(&room, &[user_key("ann")]).await.unwrap();
    assert_eq!(st[0].status, Status::Offline);
    assert!(
        b.store
            .live_connections()
            .unwrap()
            .connections(&room, &[user_key("ann")])
            .await
            .unwrap()[0]
            .is_empty()
    );

    // Shutting one server down tells its sockets to reconnect now (1012)
    // and hands them to the grace: bo reconnects to the other server
    // within it, and the other's subscriber sees nothing at all.
    let (mut bo, _) = a.hello("bo", &["room"]).await;
    bo.ok(json!({"type": "join", "space": "room"})).await;
    let e = watcher.event("room").await;
    assert_eq!((&e["type"], &e["id"]), (&json!("join"), &json!("bo")));
    a.stop().await;
    assert_eq!(bo.closed().await, Some(1012));
    let (mut bo_again, _) = b.hello("bo", &["room"]).await;
    bo_again.ok(json!({"type": "join", "space": "room"})).await;
    clock.advance(Duration::from_secs(6));
    b.state.tick().await;
    if let Ok(m) = tokio::time::timeout(Duration::from_millis(300), watcher.recv()).await {
        panic!("the watcher was told something of a rollout: {m}");
    }
    let st = b.store.status(&room, &[user_key("bo")]).await.unwrap();
    assert_eq!(st[0].status, Status::Online);
    b.stop().await;
}

/// Watching a contact list across servers: ann watches her friends on
/// server B; bob comes and goes through server A, and a friend added
/// through A is watched on B from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_on_one_server_sees_users_of_another() {
    let redis = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let config = Config {
        token_secret: Some(TokenSecret::new(b"a-secret-every-server-shares-123".to_vec()).unwrap()),
        ..Config::default()
    };
    let a = server_on(&redis, &clock, &config).await;
    let b = server_on(&redis, &clock, &config).await;
    let ann = herenow_core::MemberId::new("ann").unwrap();
    let bob = herenow_core::MemberId::new("bob").unwrap();
    a.store.set_friends(&ann, &[bob]).await.unwrap();

    let (mut watcher, _) = b.hello("ann", &["*"]).await;
    let page = watcher
        .request(json!({"type": "watch", "friends": true}))
        .await;
    assert_eq!(page["type"], "watching", "{page}");
    assert_eq!(
        page["users"],
        json!([{"id": "bob", "status": "offline", "last_seen_ms": null}])
    );

    // bob opens the site through server A.
    let (mut laptop, _) = a.hello("bob", &["*"]).await;
    laptop.ok(json!({"type": "join", "space": "site"})).await;
    let m = watcher.recv().await;
    assert_eq!(
        m,
        json!({"type": "status", "id": "bob", "status": "online", "last_seen_ms": T0, "space": "site"})
    );
    // bob's laptop closes: offline, with a last seen.
    laptop.close().await;
    let m = loop {
        let m = watcher.recv().await;
        if m["status"] == "offline" {
            break m;
        }
        assert_eq!(m["type"], "status", "{m}");
    };
    assert_eq!(m["id"], "bob");
    assert!(m["last_seen_ms"].as_u64().is_some(), "{m}");

    // A friend added through server A is watched on B from then on.
    let cy = herenow_core::MemberId::new("cy").unwrap();
    a.store.add_friends(&ann, &[cy]).await.unwrap();
    let m = watcher.recv().await;
    assert_eq!(m["type"], "watching", "{m}");
    assert_eq!(m["users"][0]["id"], "cy");
    // cy heartbeats through A (HTTP), then goes away by the store's
    // clock, swept by A.
    a.store
        .heartbeat(
            &SpaceName::new("site").unwrap(),
            &[herenow_core::Heartbeat::now(user_key("cy"))],
        )
        .await
        .unwrap();
    let m = watcher.recv().await;
    assert_eq!((&m["id"], &m["status"]), (&json!("cy"), &json!("online")));
    clock.advance(Duration::from_secs(61));
    a.state.tick().await;
    let m = watcher.recv().await;
    assert_eq!((&m["id"], &m["status"]), (&json!("cy"), &json!("away")));
}
