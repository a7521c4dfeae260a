//! Server-Sent Events through the router: the snapshot first, then events;
//! `lagged` then a `resync` snapshot for a slow reader; the bound on
//! streams; and shutdown ending every stream.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use herenow_server::{App, AppState, Config};
use serde_json::{Value, json};
use support::T0;
use support::http::{Answer, Api, post_json};
use support::sse::Events;
use tower::ServiceExt;

fn setup(config: Config) -> (App, AppState) {
    let api = Api::memory(config);
    (api.app, api.state)
}

async fn heartbeat(app: &App, space: &str, body: Value) {
    let a = post_json(app, &format!("/v1/spaces/{space}/heartbeat"), &body).await;
    assert_eq!(a.status, StatusCode::OK);
}

/// Opens an event stream; its body is read as it comes ([`Events`]), not
/// to an end.
async fn subscribe(app: &App, space: &str) -> axum::response::Response {
    let r = Request::builder()
        .uri(format!("/v1/spaces/{space}/events"))
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    app.clone().oneshot(r).await.unwrap()
}

#[tokio::test]
async fn snapshot_then_join_then_shutdown_ends_the_stream() {
    let (app, state) = setup(Config::default());
    heartbeat(&app, "lobby", json!({"id": "a"})).await;

    let mut events = Events::new(subscribe(&app, "lobby").await);
    let (name, snapshot) = events.next().await.unwrap();
    assert_eq!(name, "snapshot");
    assert_eq!(snapshot["space"], "lobby");
    assert_eq!(snapshot["omitted"], 0);
    assert_eq!(snapshot["members"][0]["id"], "a");
    assert_eq!(snapshot["members"][0]["status"], "online");
    assert_eq!(snapshot["config"]["online_ms"], 60_000);
    assert_eq!(state.open_streams(), 1);

    heartbeat(&app, "lobby", json!({"id": "b", "meta": {"n": 1}})).await;
    let (name, join) = events.next().await.unwrap();
    assert_eq!(name, "join");
    assert_eq!(join["type"], "join");
    assert_eq!(join["space"], "lobby");
    assert_eq!(join["id"], "b");
    assert_eq!(join["kind"], "user");
    assert_eq!(join["status"], "online");
    assert_eq!(join["last_seen_ms"], T0);

    heartbeat(&app, "lobby", json!({"id": "b", "meta": {"n": 2}})).await;
    let (name, update) = events.next().await.unwrap();
    assert_eq!(name, "update");
    assert_eq!(update["meta"], json!({"n": 2}));

    post_json(
        &app,
        "/v1/spaces/lobby/leave",
        &json!({"members": [{"id": "a"}]}),
    )
    .await;
    let (name, left) = events.next().await.unwrap();
    assert_eq!(name, "leave");
    assert_eq!(left["reason"], "explicit");
    assert_eq!(left["status"], "offline");

    state.shutdown_token().cancel();
    assert!(
        events.next().await.is_none(),
        "shutdown must end the stream"
    );
    assert_eq!(state.open_streams(), 0);

    // After shutdown no new stream opens.
    let late = subscribe(&app, "lobby").await;
    assert_eq!(late.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_reader_that_falls_behind_catches_up_with_a_resync() {
    let (app, _state) = setup(Config::default());
    let mut events = Events::new(subscribe(&app, "crowd").await);
    assert_eq!(events.next().await.unwrap().0, "snapshot");

    // 5,000 joins in one batch: more than the 4,096 a reader may lag.
    let beats: Vec<Value> = (0..5_000).map(|i| json!({"id": format!("m{i}")})).collect();
    let a = post_json(
        &app,
        "/v1/spaces/crowd/heartbeats",
        &json!({ "heartbeats": beats }),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK);

    let (name, data) = events.next().await.unwrap();
    assert_eq!(name, "lagged");
    assert!(data["missed"].as_u64().unwrap() > 0);
    // Not the end: a fresh snapshot with exactly the room, then events.
    let (name, snap) = events.next().await.unwrap();
    assert_eq!(name, "snapshot");
    assert_eq!(snap["resync"], true);
    assert_eq!(snap["members"].as_array().unwrap().len(), 5_000);
    heartbeat(&app, "crowd", json!({"id": "late"})).await;
    let (name, data) = events.next().await.unwrap();
    assert_eq!((name.as_str(), &data["id"]), ("join", &json!("late")));
}

#[tokio::test]
async fn streams_are_bounded() {
    let (app, state) = setup(Config {
        max_event_streams: 1,
        ..Config::default()
    });
    let mut first = Events::new(subscribe(&app, "lobby").await);
    assert_eq!(first.next().await.unwrap().0, "snapshot");

    let second = Answer::read(subscribe(&app, "lobby").await).await;
    assert_eq!(second.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(second.headers.contains_key(header::RETRY_AFTER));
    assert_eq!(second.json()["code"], "too-many-streams");

    // Closing the first frees its slot.
    drop(first);
    assert_eq!(state.open_streams(), 0);
    let mut third = Events::new(subscribe(&app, "lobby").await);
    assert_eq!(third.next().await.unwrap().0, "snapshot");
}

#[tokio::test]
async fn bad_space_names_are_refused_before_streaming() {
    let (app, _state) = setup(Config::default());
    let r = Answer::read(subscribe(&app, "no%20spaces").await).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["code"], "bad-space-name");
}
