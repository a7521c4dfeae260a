//! The `/v1` API through the router, without a socket: every kind of bad
//! input answered with the right status and problem `code` (never the
//! message text), and API keys required and scoped. The happy paths are
//! in `api.rs`.
//!
//! Time is a `ManualClock`: statuses and expiry are exact, nothing sleeps.

mod support;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use herenow_server::Config;
use serde_json::{Value, json};
use support::T0;
use support::http::{Api, call, request};

const READ_KEY: &str = "reader-secret-1";
const WRITE_KEY: &str = "writer-secret-1";

fn harness() -> Api {
    Api::memory(Config::default())
}

fn keyed() -> Api {
    Api::memory(Config {
        api_keys: vec![
            format!("{READ_KEY}:read").parse().unwrap(),
            format!("{WRITE_KEY}:write").parse().unwrap(),
        ],
        ..Config::default()
    })
}

// ------------------------------------------------------------------ bad input

#[tokio::test]
async fn bad_member_ids_are_refused() {
    let h = harness();
    let long = "x".repeat(257);
    for id in ["", long.as_str(), "a\u{7}b", "tab\there"] {
        h.post("/v1/spaces/lobby/heartbeat", json!({ "id": id }))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-member-id");
    }
    // 256 bytes is fine.
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({ "id": "x".repeat(256) }),
    )
    .await
    .ok();
    // In a path, in a batch, in a friend list.
    h.get(&format!("/v1/spaces/lobby/members/{long}"))
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-member-id");
    h.get("/v1/spaces/lobby/members/a%0Ab")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-member-id");
    h.post(
        "/v1/spaces/lobby/heartbeats",
        json!({"heartbeats": [{"id": "ok"}, {"id": ""}]}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-member-id");
    h.put("/v1/friends/me", json!({"friends": [""]}))
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-member-id");
    // A bad batch records nothing.
    let c = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(c["users"], 1);
}

#[tokio::test]
async fn bad_space_names_are_refused() {
    let h = harness();
    let long = "s".repeat(129);
    for space in ["a%20b", "a%2Fb", "caf%C3%A9", long.as_str()] {
        h.post(&format!("/v1/spaces/{space}/heartbeat"), json!({"id": "a"}))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-space-name");
    }
    h.get("/v1/spaces?after=no%20spaces")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-space-name");
}

#[tokio::test]
async fn batches_must_hold_1_to_10000_items() {
    let h = harness();
    let many: Vec<Value> = (0..10_001).map(|i| json!({"id": i.to_string()})).collect();
    h.post("/v1/spaces/lobby/heartbeats", json!({ "heartbeats": many }))
        .await
        .problem(StatusCode::BAD_REQUEST, "batch-too-large");
    h.post("/v1/spaces/lobby/heartbeats", json!({"heartbeats": []}))
        .await
        .problem(StatusCode::BAD_REQUEST, "empty-batch");
    h.post("/v1/spaces/lobby/leave", json!({"members": []}))
        .await
        .problem(StatusCode::BAD_REQUEST, "empty-batch");
    h.post("/v1/spaces/lobby/status", json!({"members": []}))
        .await
        .problem(StatusCode::BAD_REQUEST, "empty-batch");
    let many: Vec<Value> = (0..10_001).map(|i| json!({"id": i.to_string()})).collect();
    h.post("/v1/spaces/lobby/status", json!({ "members": many }))
        .await
        .problem(StatusCode::BAD_REQUEST, "batch-too-large");
    // Exactly 10,000 is fine.
    let max: Vec<Value> = (0..10_000).map(|i| json!({"id": i.to_string()})).collect();
    let a = h
        .post("/v1/spaces/lobby/heartbeats", json!({ "heartbeats": max }))
        .await
        .ok();
    assert_eq!(a["accepted"], 10_000);
}

#[tokio::test]
async fn a_list_is_refused_at_its_first_item_past_the_limit() {
    // Bodies just under the 4 MiB bound holding 360,000 tiny items: each
    // list endpoint answers `batch-too-large` without reading them all
    // into memory first (`protocol/bounded.rs`), and records nothing.
    let h = harness();
    let many = |item: &str, fields: &str, list: &str| {
        let items = vec![item; 360_000].join(",");
        format!("{{{fields}\"{list}\":[{items}]}}").into_bytes()
    };
    let member = r#"{"id":"a"}"#;
    for (uri, body) in [
        (
            "/v1/spaces/lobby/heartbeats",
            many(member, "", "heartbeats"),
        ),
        ("/v1/spaces/lobby/leave", many(member, "", "members")),
        ("/v1/spaces/lobby/status", many(member, "", "members")),
        ("/v1/spaces/lobby/online-among", many(member, "", "members")),
        ("/v1/friends/ann/add", many(r#""b""#, "", "friends")),
        ("/v1/users/status", many(r#""b""#, "", "ids")),
        ("/v1/tokens", many(r#""s""#, r#""user":"ann","#, "spaces")),
        ("/v1/watch", many(r#""b""#, "", "users")),
    ] {
        assert!(body.len() < 4 << 20, "{uri}: {} bytes", body.len());
        let a = h.raw(uri, Some("application/json"), body).await;
        a.problem(StatusCode::BAD_REQUEST, "batch-too-large");
        let p = a.json();
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.contains("more than 10000 items"), "{uri}: {p}");
    }
    // A space's webhooks, and one webhook's events (a PUT).
    let hooks = vec![r#"{"url":"h"}"#; 300_000].join(",");
    let events = vec![r#""join""#; 360_000].join(",");
    for body in [
        format!(r#"{{"webhooks":[{hooks}]}}"#),
        format!(r#"{{"webhooks":[{{"url":"https://x.test/","events":[{events}]}}]}}"#),
    ] {
        let request = Request::builder()
            .method(Method::PUT)
            .uri("/v1/spaces/lobby/config")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap();
        call(&h.app, request)
            .await
            .problem(StatusCode::BAD_REQUEST, "batch-too-large");
    }
    let n = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(n["total"], 0, "{n}");
    let f = h.get("/v1/friends/ann").await.ok();
    assert_eq!(f["friends"], json!([]), "{f}");
}

#[tokio::test]
async fn malformed_json_unknown_fields_and_content_types() {
    let h = harness();
    let uri = "/v1/spaces/lobby/heartbeat";
    h.raw(uri, Some("application/json"), b"{\"id\": ".to_vec())
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-json");
    h.raw(uri, Some("application/json"), b"[1, 2]".to_vec())
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-json");
    h.raw(uri, Some("application/json"), Vec::new())
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-json");
    // Bytes that are not UTF-8, in a string and outside one: named, and
    // nothing is recorded.
    for body in [&b"{\"id\": \"a\xff\"}"[..], &b"{\"id\": \"a\"}\xc3"[..]] {
        let a = h.raw(uri, Some("application/json"), body.to_vec()).await;
        a.problem(StatusCode::BAD_REQUEST, "bad-json");
        let p = a.json();
        assert!(p["detail"].as_str().unwrap().contains("not UTF-8"), "{p}");
    }
    let n = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(n["total"], 0, "{n}");
    h.raw(
        uri,
        Some("application/json"),
        b"{\"id\": \"a\", \"kind\": \"robot\"}".to_vec(),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-json");
    h.post(uri, json!({"id": "a", "colour": "red"}))
        .await
        .problem(StatusCode::BAD_REQUEST, "unknown-field");
    h.post(
        "/v1/spaces/lobby/leave",
        json!({"members": [{"id": "a", "x": 1}]}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "unknown-field");
    h.put(
        "/v1/spaces/lobby/config",
        json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 4, "extra": 5}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "unknown-field");
    h.raw(uri, Some("text/plain"), b"{\"id\": \"a\"}".to_vec())
        .await
        .problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "not-json");
    h.raw(uri, None, b"{\"id\": \"a\"}".to_vec())
        .await
        .problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "not-json");
    // A charset parameter is fine.
    h.raw(
        uri,
        Some("application/json; charset=utf-8"),
        b"{\"id\": \"a\"}".to_vec(),
    )
    .await
    .ok();
}

/// A refused body's detail names the field at fault by its path; one
/// that fails at the top (not JSON at all) is named as before.
#[tokio::test]
async fn a_refused_body_names_the_field_at_fault() {
    let h = harness();
    let detail = |a: &support::http::Answer| a.json()["detail"].as_str().unwrap().to_owned();
    let cases = [
        (
            "/v1/spaces/lobby/heartbeats",
            json!({"heartbeats": [{"id": "a"}, {"id": 5}]}),
            "bad-json",
            "heartbeats[1].id: invalid type: integer `5`, expected a string",
        ),
        (
            "/v1/spaces/lobby/heartbeats",
            json!({"heartbeats": [{"id": "a"}, {"id": "b", "idx": "c"}]}),
            "unknown-field",
            "heartbeats[1].idx: unknown field `idx`",
        ),
        (
            "/v1/spaces/lobby/heartbeat",
            json!({"id": "a", "at_ms": -1}),
            "bad-json",
            "at_ms: ",
        ),
        (
            "/v1/spaces/lobby/leave",
            json!({"members": [{"id": "a", "kind": "robot"}]}),
            "bad-json",
            "members[0].kind: unknown variant `robot`",
        ),
        // serde would read a struct from an array of its fields; the
        // schema says objects.
        (
            "/v1/spaces/lobby/heartbeats",
            json!({"heartbeats": [{"id": "a"}, ["b"]]}),
            "bad-json",
            "heartbeats[1]: invalid type: sequence, expected an object",
        ),
        (
            "/v1/spaces/lobby/heartbeat",
            json!(["a"]),
            "bad-json",
            "invalid type: sequence, expected an object",
        ),
        (
            "/v1/spaces/lobby/online-among",
            json!({"members": [["a", "user"]]}),
            "bad-json",
            "members[0]: invalid type: sequence",
        ),
    ];
    for (uri, body, code, starts) in cases {
        let a = h.post(uri, body.clone()).await;
        a.problem(StatusCode::BAD_REQUEST, code);
        assert!(detail(&a).starts_with(starts), "{body}: {}", detail(&a));
    }
    let a = h
        .put(
            "/v1/spaces/lobby/config",
            json!({"online_ms": -5, "away_ms": 2, "window_ms": 3, "retention_ms": 4}),
        )
        .await;
    a.problem(StatusCode::BAD_REQUEST, "bad-json");
    assert!(detail(&a).starts_with("online_ms: "), "{}", detail(&a));
    // Arrays where the schema has objects (serde would read a struct from
    // an array of its fields).
    for (uri, body) in [
        ("/v1/spaces/lobby/config", json!([1000, 2000, 3000, 4000])),
        (
            "/v1/spaces/lobby/config",
            json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 4,
                   "webhooks": [["http://example.com/hook"]]}),
        ),
        ("/v1/friends/ann", json!([["bob"]])),
        ("/v1/friends/ann", json!([[]])),
    ] {
        let a = h.put(uri, body.clone()).await;
        a.problem(StatusCode::BAD_REQUEST, "bad-json");
        assert!(
            detail(&a).contains("expected an object"),
            "{body}: {}",
            detail(&a)
        );
    }
    let friends = h.get("/v1/friends/ann").await.ok();
    assert_eq!(friends["friends"], json!([]), "{friends}");
    let a = h
        .raw(
            "/v1/spaces/lobby/heartbeat",
            Some("application/json"),
            b"{\"id\": \"a\"} x".to_vec(),
        )
        .await;
    a.problem(StatusCode::BAD_REQUEST, "bad-json");
    assert!(
        detail(&a).starts_with("trailing characters"),
        "{}",
        detail(&a)
    );
    // Nothing was recorded by any of them.
    let n = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(n["total"], 0, "{n}");
}

#[tokio::test]
async fn metadata_is_bounded() {
    let h = harness();
    let uri = "/v1/spaces/lobby/heartbeat";
    h.post(uri, json!({"id": "a", "meta": {"x": "y".repeat(1100)}}))
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-metadata");
    h.post(uri, json!({"id": "a", "meta": [1, 2]}))
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-metadata");
    h.post(uri, json!({"id": "a", "meta": null})).await.ok();
}

#[tokio::test]
async fn explicit_times_in_the_future_are_refused() {
    let h = harness();
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({"id": "a", "at_ms": T0 + 61_000}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-time");
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({"id": "a", "at_ms": T0 + 59_000}),
    )
    .await
    .ok();
}

#[tokio::test]
async fn durations_need_units_and_fit_the_retention() {
    let h = harness();
    for w in ["600", "10x", "soon", "-5m"] {
        h.get(&format!("/v1/spaces/lobby/count?window={w}"))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-duration");
    }
    h.get("/v1/spaces/lobby/online?window=1d")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-window");
    h.get("/v1/spaces/lobby/count?window=0s")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-window");
    h.post(
        "/v1/spaces/lobby/online-among",
        json!({"members": [{"id": "a"}], "window": "90"}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-duration");
    h.get("/v1/spaces/lobby/friends/me/online?window=3")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-duration");
    h.get("/v1/spaces/lobby/history?range=25h")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-range");
    h.get("/v1/spaces/lobby/history?range=0s")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-range");
    h.get("/v1/spaces/lobby/history?range=60")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-duration");
}

#[tokio::test]
async fn limits_must_be_1_to_1000() {
    let h = harness();
    for l in ["0", "-1", "1001", "ten", "99999999999999999999"] {
        h.get(&format!("/v1/spaces/lobby/online?limit={l}"))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-limit");
        h.get(&format!("/v1/spaces?limit={l}"))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-limit");
        h.get(&format!("/v1/spaces/lobby/friends/me/online?limit={l}"))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-limit");
    }
    for l in [0, -1, 1001] {
        h.post(
            "/v1/spaces/lobby/online-among",
            json!({"members": [{"id": "a"}], "limit": l}),
        )
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-limit");
    }
    h.get("/v1/spaces/lobby/online?limit=1000").await.ok();
}

#[tokio::test]
async fn bad_cursors_kinds_orders_and_parameters() {
    let h = harness();
    h.beat("lobby", "a").await;
    h.beat("lobby", "b").await;
    for c in ["zzz", "r1.2", "%00"] {
        h.get(&format!("/v1/spaces/lobby/online?cursor={c}"))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-cursor");
    }
    h.get(&format!(
        "/v1/spaces/lobby/online?cursor={}",
        "r".repeat(600)
    ))
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-cursor");
    h.get("/v1/spaces/lobby/online?kind=robots")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-kind");
    h.get("/v1/spaces/lobby/members/a?kind=users")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-kind");
    h.get("/v1/spaces/lobby/online?order=alpha")
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-order");
    h.get("/v1/spaces/lobby/online?windw=10m")
        .await
        .problem(StatusCode::BAD_REQUEST, "unknown-parameter");
}

#[tokio::test]
async fn bad_config_is_refused() {
    let h = harness();
    h.put(
        "/v1/spaces/room/config",
        json!({"online_ms": 0, "away_ms": 2, "window_ms": 3, "retention_ms": 4}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-config");
    h.put(
        "/v1/spaces/room/config",
        json!({"online_ms": 10, "away_ms": 5, "window_ms": 3, "retention_ms": 40}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-config");
    h.put(
        "/v1/spaces/room/config",
        json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 90_000_000}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-config");
    h.put("/v1/spaces/room/config", json!({"online_ms": 1}))
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-json");
}

#[tokio::test]
async fn friend_sets_are_bounded() {
    let h = harness();
    let a: Vec<String> = (0..5_000).map(|i| format!("f{i}")).collect();
    h.put("/v1/friends/me", json!({ "friends": a })).await.ok();
    h.post("/v1/friends/me/add", json!({"friends": ["one-more"]}))
        .await
        .problem(StatusCode::BAD_REQUEST, "too-many-friends");
    h.post("/v1/friends/me/add", json!({"friends": []}))
        .await
        .problem(StatusCode::BAD_REQUEST, "empty-batch");
    // PUT with an empty list clears the set.
    let cleared = h.put("/v1/friends/me", json!({"friends": []})).await.ok();
    assert_eq!(cleared["friends"], 0);
}

#[tokio::test]
async fn bodies_over_4_mib_are_refused() {
    let h = harness();
    let mut big = b"{\"id\": \"".to_vec();
    big.extend(std::iter::repeat_n(b'x', 5 * 1024 * 1024));
    big.extend(b"\"}");
    h.raw(
        "/v1/spaces/lobby/heartbeat",
        Some("application/json"),
        big.clone(),
    )
    .await
    .problem(StatusCode::PAYLOAD_TOO_LARGE, "body-too-large");

    // Also when the size is not declared up front (a streamed body).
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
    let body = Body::from_stream(futures::stream::iter(chunks));
    let request = Request::builder()
        .method(Method::POST)
        .uri("/v1/spaces/lobby/heartbeats")
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .unwrap();
    call(&h.app, request)
        .await
        .problem(StatusCode::PAYLOAD_TOO_LARGE, "body-too-large");
}

#[tokio::test]
async fn a_body_in_many_frames_is_read_whole() {
    // A batch streamed in 1 KiB frames, with its length declared and
    // without: every heartbeat arrives.
    let h = harness();
    let items: Vec<String> = (0..3_000).map(|i| format!(r#"{{"id":"u{i}"}}"#)).collect();
    let body = format!(r#"{{"heartbeats":[{}]}}"#, items.join(",")).into_bytes();
    for declared in [true, false] {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            body.chunks(1024).map(|c| Ok(c.to_vec())).collect();
        let mut request = Request::builder()
            .method(Method::POST)
            .uri("/v1/spaces/lobby/heartbeats")
            .header(header::CONTENT_TYPE, "application/json");
        if declared {
            request = request.header(header::CONTENT_LENGTH, body.len());
        }
        let request = request
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap();
        let a = call(&h.app, request).await.ok();
        assert_eq!(a["accepted"], 3_000, "declared: {declared}: {a}");
    }
    let n = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(n["total"], 3_000, "{n}");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let h = harness();
    h.get("/v1/nothing-here")
        .await
        .problem(StatusCode::NOT_FOUND, "not-found");
    let a = call(
        &h.app,
        request(Method::DELETE, "/v1/spaces/lobby/heartbeat", None, None),
    )
    .await;
    a.problem(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed");
    assert!(a.headers.contains_key(header::ALLOW));
}

// ----------------------------------------------------------------------- auth

#[tokio::test]
async fn keys_are_required_and_scoped() {
    let h = keyed();
    let hb = json!({"id": "a"});
    let uri = "/v1/spaces/lobby/heartbeat";
    let a = call(&h.app, request(Method::POST, uri, Some(&hb), None)).await;
    a.problem(StatusCode::UNAUTHORIZED, "missing-api-key");
    assert!(a.headers.contains_key(header::WWW_AUTHENTICATE));
    call(
        &h.app,
        request(Method::POST, uri, Some(&hb), Some("nope-nope-nope")),
    )
    .await
    .problem(StatusCode::UNAUTHORIZED, "unknown-api-key");
    call(
        &h.app,
        request(Method::POST, uri, Some(&hb), Some(READ_KEY)),
    )
    .await
    .problem(StatusCode::FORBIDDEN, "insufficient-scope");
    call(
        &h.app,
        request(Method::POST, uri, Some(&hb), Some(WRITE_KEY)),
    )
    .await
    .ok();

    // A read key may GET and use the read-only POSTs.
    call(
        &h.app,
        request(Method::GET, "/v1/spaces/lobby/count", None, Some(READ_KEY)),
    )
    .await
    .ok();
    let status = json!({"members": [{"id": "a"}]});
    call(
        &h.app,
        request(
            Method::POST,
            "/v1/spaces/lobby/status",
            Some(&status),
            Some(READ_KEY),
        ),
    )
    .await
    .ok();
    call(
        &h.app,
        request(
            Method::POST,
            "/v1/spaces/lobby/online-among",
            Some(&status),
            Some(READ_KEY),
        ),
    )
    .await
    .ok();
    // ...but not configure, befriend or leave.
    let cfg = json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 4});
    call(
        &h.app,
        request(
            Method::PUT,
            "/v1/spaces/lobby/config",
            Some(&cfg),
            Some(READ_KEY),
        ),
    )
    .await
    .problem(StatusCode::FORBIDDEN, "insufficient-scope");
    call(
        &h.app,
        request(
            Method::PUT,
            "/v1/friends/a",
            Some(&json!({"friends": ["b"]})),
            Some(READ_KEY),
        ),
    )
    .await
    .problem(StatusCode::FORBIDDEN, "insufficient-scope");
    call(
        &h.app,
        request(
            Method::POST,
            "/v1/spaces/lobby/leave",
            Some(&status),
            Some(READ_KEY),
        ),
    )
    .await
    .problem(StatusCode::FORBIDDEN, "insufficient-scope");

    // Explicit times need write scope; a write key may backdate.
    let backdated = json!({"id": "a", "at_ms": T0 - 1000});
    call(
        &h.app,
        request(Method::POST, uri, Some(&backdated), Some(READ_KEY)),
    )
    .await
    .problem(StatusCode::FORBIDDEN, "insufficient-scope");
    call(
        &h.app,
        request(Method::POST, uri, Some(&backdated), Some(WRITE_KEY)),
    )
    .await
    .ok();

    // X-API-Key works too.
    let r = Request::builder()
        .uri("/v1/spaces/lobby/count")
        .header("x-api-key", READ_KEY)
        .body(Body::empty())
        .unwrap();
    call(&h.app, r).await.ok();

    // Event streams need a key.
    call(
        &h.app,
        request(Method::GET, "/v1/spaces/lobby/events", None, None),
    )
    .await
    .problem(StatusCode::UNAUTHORIZED, "missing-api-key");

    // Operations need none.
    for path in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
        assert_eq!(h.get(path).await.status, StatusCode::OK, "{path}");
    }
}
