//! Watching users (docs/PROTOCOL.md, "Watching users"): the WebSocket's
//! `watch`/`unwatch` and `POST /v1/watch`, on a memory store whose clock
//! the tests move. A watcher sees each watched user's state, then a
//! `status` when it changes: online, away by time, back, offline by
//! leave or silence; invisible users stay offline; a friend added to a
//! followed set is watched from then on. Bad forms and a token's limits
//! are refused by name.

mod support;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use herenow_core::{Heartbeat, MemberId, SpaceName};
use herenow_server::protocol::dto::WatchGrant;
use herenow_server::token::{Spaces, now_s};
use serde_json::{Value, json};
use support::sse::Events;
use support::ws::{Client, Server};
use support::{T0, guest_key, user_key};
use tower::ServiceExt;

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

fn ids(names: &[&str]) -> Vec<MemberId> {
    names.iter().map(|n| MemberId::new(n).unwrap()).collect()
}

/// A token for `user` allowed every space, watching as `watch` allows.
fn token(s: &Server, user: &str, watch: WatchGrant) -> String {
    s.state
        .tokens()
        .mint_watching(&user_key(user), &Spaces::All, watch, now_s(), 3600)
        .unwrap()
}

async fn hello_with(s: &Server, token: String) -> Client {
    let mut c = s.connect().await;
    let w = c.request(json!({"type": "hello", "token": token})).await;
    assert_eq!(w["type"], "welcome", "{w}");
    c
}

async fn beat(s: &Server, sp: &str, id: &str) {
    s.store
        .heartbeat(&space(sp), &[Heartbeat::now(user_key(id))])
        .await
        .unwrap();
}

/// Sends `watch` and gathers its pages until the last (which echoes the
/// ref): the users by id.
async fn watch(c: &mut Client, msg: Value) -> Vec<Value> {
    let mut msg = msg;
    msg["type"] = json!("watch");
    msg["ref"] = json!("w");
    c.send(msg).await;
    let mut users = Vec::new();
    loop {
        let m = c.recv().await;
        assert_eq!(m["type"], "watching", "{m}");
        users.extend(m["users"].as_array().unwrap().iter().cloned());
        if m["last"] == true {
            assert_eq!(m["ref"], "w");
            users.sort_by_key(|u| u["id"].as_str().unwrap().to_owned());
            return users;
        }
    }
}

/// The next message, which must be a `status`: (id, status).
async fn status(c: &mut Client) -> (String, String, Value) {
    let m = c.recv().await;
    assert_eq!(m["type"], "status", "{m}");
    (
        m["id"].as_str().unwrap().to_owned(),
        m["status"].as_str().unwrap().to_owned(),
        m["last_seen_ms"].clone(),
    )
}

/// Asserts nothing arrives: a ping's pong comes first.
async fn quiet(c: &mut Client) {
    let pong = c.request(json!({"type": "ping"})).await;
    assert_eq!(pong["type"], "pong", "{pong}");
}

async fn tick(s: &Server) {
    s.store.tick().await.unwrap();
}

#[tokio::test]
async fn a_friend_list_is_watched_live_anywhere() {
    let s = Server::start().await;
    s.store
        .set_friends(&ids(&["ann"])[0], &ids(&["bob", "cy"]))
        .await
        .unwrap();
    beat(&s, "site", "bob").await;
    let mut ann = hello_with(&s, token(&s, "ann", WatchGrant::Friends)).await;
    let users = watch(&mut ann, json!({"friends": true})).await;
    assert_eq!(
        users,
        [
            json!({"id": "bob", "status": "online", "last_seen_ms": T0, "space": "site"}),
            json!({"id": "cy", "status": "offline", "last_seen_ms": null}),
        ]
    );
    // cy comes online somewhere: anywhere means any space.
    beat(&s, "room:9", "cy").await;
    assert_eq!(status(&mut ann).await.0, "cy");
    // A heartbeat that changes no status says nothing.
    beat(&s, "site", "bob").await;
    quiet(&mut ann).await;
    // The server decides away by its clock.
    s.clock.advance(Duration::from_secs(60));
    tick(&s).await;
    let mut away = [status(&mut ann).await, status(&mut ann).await];
    away.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        away.iter()
            .map(|(id, st, _)| (id.as_str(), st.as_str()))
            .collect::<Vec<_>>(),
        [("bob", "away"), ("cy", "away")]
    );
    // bob is back; online in two spaces, leaving one keeps him online.
    beat(&s, "site", "bob").await;
    assert_eq!(status(&mut ann).await.1, "online");
    beat(&s, "other", "bob").await;
    s.store
        .leave(&space("site"), &[user_key("bob")])
        .await
        .unwrap();
    quiet(&mut ann).await;
    s.store
        .leave(&space("other"), &[user_key("bob")])
        .await
        .unwrap();
    let (id, st, last) = status(&mut ann).await;
    assert_eq!((id.as_str(), st.as_str()), ("bob", "offline"));
    assert_eq!(last, json!(T0 + 60_000), "a leave remembers its time");
    // cy goes silent past away_ms: offline by time.
    s.clock.advance(Duration::from_secs(5 * 60));
    tick(&s).await;
    let (id, st, last) = status(&mut ann).await;
    assert_eq!((id.as_str(), st.as_str()), ("cy", "offline"));
    assert_eq!(last, json!(T0));
    // A friend added while watching is watched from then on; one removed
    // is unwatched.
    beat(&s, "site", "dee").await;
    s.store
        .add_friends(&ids(&["ann"])[0], &ids(&["dee"]))
        .await
        .unwrap();
    let m = ann.recv().await;
    assert_eq!(m["type"], "watching", "{m}");
    assert_eq!(m["resync"], false);
    assert_eq!(m["users"][0]["id"], "dee");
    assert_eq!(m["users"][0]["status"], "online");
    s.store
        .remove_friends(&ids(&["ann"])[0], &ids(&["cy"]))
        .await
        .unwrap();
    let m = ann.recv().await;
    assert_eq!(m, json!({"type": "unwatched", "users": ["cy"]}));
    beat(&s, "site", "cy").await;
    quiet(&mut ann).await;
    // The gauges show what the hub holds: one watcher, its users.
    let (pairs, watchers) = s.state.watch().usage();
    assert_eq!(watchers, 1);
    s.state.update_gauges().await;
    let text = s.state.metrics().render();
    assert!(
        text.contains(r#"herenow_watch_watchers{store="memory"} 1"#),
        "{text}"
    );
    let gauge = format!(r#"herenow_watch_pairs{{store="memory"}} {pairs}"#);
    assert!(pairs > 0 && text.contains(&gauge), "{text}");
    // Unwatching everything ends the watch.
    ann.ok(json!({"type": "unwatch"})).await;
    beat(&s, "x", "bob").await;
    quiet(&mut ann).await;
    assert_eq!(s.state.watch().usage(), (0, 0));
}

#[tokio::test]
async fn watching_within_a_space_and_invisible_users() {
    let s = Server::start().await;
    let mut w = hello_with(&s, token(&s, "watcher", WatchGrant::Any)).await;
    let users = watch(&mut w, json!({"users": ["x", "y"], "space": "room:1"})).await;
    assert!(users.iter().all(|u| u["status"] == "offline"), "{users:?}");
    assert!(users.iter().all(|u| u.get("space").is_none()), "{users:?}");
    // Another space is not this watch's business.
    beat(&s, "room:2", "x").await;
    quiet(&mut w).await;
    beat(&s, "room:1", "x").await;
    assert_eq!(&status(&mut w).await.1, "online");
    // y joins invisible over its own socket: still offline to watchers.
    let (mut y, _) = s.hello("y", &["*"]).await;
    y.ok(json!({"type": "invisible", "on": true})).await;
    y.ok(json!({"type": "join", "space": "room:1"})).await;
    quiet(&mut w).await;
    y.ok(json!({"type": "invisible", "on": false})).await;
    let (id, st, _) = status(&mut w).await;
    assert_eq!((id.as_str(), st.as_str()), ("y", "online"));
    // Its page closing: offline, with a last seen.
    y.close().await;
    let (id, st, last) = status(&mut w).await;
    assert_eq!((id.as_str(), st.as_str()), ("y", "offline"));
    assert_eq!(last, json!(T0));
    // Extending adds; unwatching one stops its statuses.
    let added = watch(&mut w, json!({"users": ["z"], "space": "room:1"})).await;
    assert_eq!(added.len(), 1);
    w.ok(json!({"type": "unwatch", "users": ["x"]})).await;
    s.store
        .leave(&space("room:1"), &[user_key("x")])
        .await
        .unwrap();
    quiet(&mut w).await;
    // Replacing changes the scope: a fresh picture.
    w.send(json!({"type": "watch", "users": ["x"], "replace": true, "ref": 1}))
        .await;
    let m = w.recv().await;
    assert_eq!(m["type"], "watching");
    assert_eq!(m["resync"], true);
    assert_eq!(m["space"], Value::Null);
    assert_eq!(m["users"][0]["id"], "x");
    assert_eq!(m["users"][0]["space"], "room:2");
}

#[tokio::test]
async fn bad_watches_are_refused_by_name() {
    let s = Server::start().await;
    s.store
        .set_friends(&ids(&["ann"])[0], &ids(&["bob"]))
        .await
        .unwrap();
    let mut ann = hello_with(&s, token(&s, "ann", WatchGrant::Friends)).await;
    // A friends-only token cannot probe strangers, and nothing changes.
    assert_eq!(
        ann.error(json!({"type": "watch", "users": ["bob", "stranger"]}))
            .await,
        "watch-not-allowed"
    );
    assert_eq!(
        ann.error(json!({"type": "unwatch"})).await,
        "not-watching",
        "the refused watch watches nobody"
    );
    for (bad, code) in [
        (json!({"type": "watch"}), "bad-message"),
        (json!({"type": "watch", "users": "bob"}), "bad-message"),
        (json!({"type": "watch", "users": [""]}), "bad-member-id"),
        (json!({"type": "watch", "users": [7]}), "bad-message"),
        (
            json!({"type": "watch", "friends": true, "bogus": 1}),
            "bad-message",
        ),
        (
            json!({"type": "watch", "friends": true, "page_size": 0}),
            "bad-limit",
        ),
        (
            json!({"type": "watch", "friends": true, "space": "bad space"}),
            "bad-space-name",
        ),
        (json!({"type": "unwatch", "users": "x"}), "bad-message"),
    ] {
        assert_eq!(ann.error(bad.clone()).await, code, "{bad}");
    }
    let many: Vec<String> = (0..5_001).map(|i| format!("u{i}")).collect();
    assert_eq!(
        ann.error(json!({"type": "watch", "users": many})).await,
        "too-many-watched"
    );
    assert_eq!(watch(&mut ann, json!({"users": ["bob"]})).await.len(), 1);
    assert_eq!(
        ann.error(json!({"type": "watch", "users": ["bob"], "space": "s"}))
            .await,
        "watch-scope"
    );
    // A token limited to some spaces may not watch within others.
    let (mut limited, _) = s.hello("bob", &["room:1"]).await;
    assert_eq!(
        limited
            .error(json!({"type": "watch", "friends": true, "space": "room:2"}))
            .await,
        "space-not-allowed"
    );
    // A token that may watch nobody, and a guest without friends.
    let mut none = hello_with(&s, token(&s, "cy", WatchGrant::None)).await;
    assert_eq!(
        none.error(json!({"type": "watch", "friends": true})).await,
        "watch-not-allowed"
    );
    let guest = s
        .state
        .tokens()
        .mint_watching(&guest_key("g"), &Spaces::All, WatchGrant::Any, now_s(), 60)
        .unwrap();
    let mut g = hello_with(&s, guest).await;
    assert_eq!(
        g.error(json!({"type": "watch", "friends": true})).await,
        "no-friend-set"
    );
    // An `any` token watches anyone, known or not.
    let users = watch(&mut g, json!({"users": ["never-seen"]})).await;
    assert_eq!(
        users,
        [json!({"id": "never-seen", "status": "offline", "last_seen_ms": null})]
    );
}

#[tokio::test]
async fn a_backend_watches_over_server_sent_events() {
    let s = Server::start().await;
    s.store
        .set_friends(&ids(&["ann"])[0], &ids(&["bob"]))
        .await
        .unwrap();
    let app = herenow_server::app(s.state.clone());
    let open = |body: Value| {
        let app = app.clone();
        async move {
            let r = Request::post("/v1/watch")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string()))
                .unwrap();
            app.oneshot(r).await.unwrap()
        }
    };
    let mut events = Events::new(open(json!({"friends_of": "ann", "users": ["zed"]})).await);
    let (name, page) = events.next().await.unwrap();
    assert_eq!(name, "watching");
    assert_eq!(page["last"], true);
    assert_eq!(page["users"].as_array().unwrap().len(), 2);
    beat(&s, "site", "bob").await;
    let (name, data) = events.next().await.unwrap();
    assert_eq!(name, "status");
    assert_eq!(
        data,
        json!({"id": "bob", "status": "online", "last_seen_ms": T0, "space": "site"})
    );
    s.store
        .add_friends(&ids(&["ann"])[0], &ids(&["cy"]))
        .await
        .unwrap();
    let (name, data) = events.next().await.unwrap();
    assert_eq!(name, "watching");
    assert_eq!(data["users"][0]["id"], "cy");
    // Bad bodies are problems that name the fault.
    for (body, status, code) in [
        (json!({}), StatusCode::BAD_REQUEST, "nothing-to-watch"),
        (
            json!({"users": [""]}),
            StatusCode::BAD_REQUEST,
            "bad-member-id",
        ),
        (
            json!({"users": ["a", "x".repeat(300)]}),
            StatusCode::BAD_REQUEST,
            "bad-member-id",
        ),
        (
            json!({"friends_of": "x".repeat(300)}),
            StatusCode::BAD_REQUEST,
            "bad-member-id",
        ),
        (
            json!({"users": ["a"], "space": "no spaces"}),
            StatusCode::BAD_REQUEST,
            "bad-space-name",
        ),
        (json!({"users": "a"}), StatusCode::BAD_REQUEST, "bad-json"),
        (
            json!({"users": ["a"], "x": 1}),
            StatusCode::BAD_REQUEST,
            "unknown-field",
        ),
    ] {
        let r = open(body.clone()).await;
        assert_eq!(r.status(), status, "{body}");
        let a = support::http::Answer::read(r).await;
        assert_eq!(a.json()["code"], code, "{body}");
    }
    let many: Vec<String> = (0..5_001).map(|i| format!("u{i}")).collect();
    let a = support::http::Answer::read(open(json!({ "users": many })).await).await;
    a.problem(StatusCode::BAD_REQUEST, "too-many-watched");
}
