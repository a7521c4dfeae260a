//! The `/v1` API through the router, without a socket: every kind of bad
//! input answered with the right status and problem `code` (never the
//! message text), and API keys required and scoped. The happy paths are
//! in `api.rs`.
//!
//! Most tests are tables of [`Case`]s: a request and the problem it must
//! earn, each asserted in full by [`refused`].
//!
//! Time is a `ManualClock`: statuses and expiry are exact, nothing sleeps.
//!
//! Why one file past 800 lines: it is tables, one per resource, and one
//! checker; a reader looks up a refusal here by its endpoint.

mod support;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use herenow_server::Config;
use serde_json::{Value, json};
use support::T0;
use support::http::{Answer, Api, call, request};

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

/// A request, and what it must earn: a problem with this status and code,
/// or (`code` empty) `200`.
struct Case {
    method: Method,
    uri: String,
    /// The body and its content type, as sent.
    body: Option<(Option<&'static str>, Vec<u8>)>,
    key: Option<&'static str>,
    status: StatusCode,
    code: &'static str,
}

impl Case {
    /// `GET uri`, refused with `400 code`.
    fn get(uri: impl Into<String>, code: &'static str) -> Case {
        Case::new(Method::GET, uri, None, code)
    }

    /// `POST uri` with `body` as JSON, refused with `400 code`.
    fn post(uri: impl Into<String>, body: Value, code: &'static str) -> Case {
        Case::new(Method::POST, uri, Some(body), code)
    }

    /// `PUT uri` with `body` as JSON, refused with `400 code`.
    fn put(uri: impl Into<String>, body: Value, code: &'static str) -> Case {
        Case::new(Method::PUT, uri, Some(body), code)
    }

    /// `POST uri` with these bytes and this content type, refused with
    /// `400 code`.
    fn raw(
        uri: impl Into<String>,
        content_type: Option<&'static str>,
        body: Vec<u8>,
        code: &'static str,
    ) -> Case {
        Case {
            body: Some((content_type, body)),
            ..Case::new(Method::POST, uri, None, code)
        }
    }

    fn new(
        method: Method,
        uri: impl Into<String>,
        body: Option<Value>,
        code: &'static str,
    ) -> Case {
        Case {
            method,
            uri: uri.into(),
            body: body.map(|v| (Some("application/json"), serde_json::to_vec(&v).unwrap())),
            key: None,
            status: StatusCode::BAD_REQUEST,
            code,
        }
    }

    /// This case, answered with `status` instead.
    fn status(self, status: StatusCode) -> Case {
        Case { status, ..self }
    }

    /// This case, sent with `key` as a bearer.
    fn key(self, key: &'static str) -> Case {
        Case {
            key: Some(key),
            ..self
        }
    }

    /// This case, answered `200`.
    fn accepted(self) -> Case {
        Case {
            status: StatusCode::OK,
            code: "",
            ..self
        }
    }

    fn request(&self) -> Request<Body> {
        let mut b = Request::builder()
            .method(self.method.clone())
            .uri(&self.uri);
        if let Some(k) = self.key {
            b = b.header(header::AUTHORIZATION, format!("Bearer {k}"));
        }
        match &self.body {
            Some((content_type, bytes)) => {
                if let Some(ct) = content_type {
                    b = b.header(header::CONTENT_TYPE, *ct);
                }
                b.body(Body::from(bytes.clone())).unwrap()
            }
            None => b.body(Body::empty()).unwrap(),
        }
    }
}

/// Sends every case through `h`'s router and asserts what each earns: the
/// problem in full ([`Answer::problem`]), or `200`. Returns the answers,
/// in order, for what a test checks besides.
async fn refused(h: &Api, cases: impl IntoIterator<Item = Case>) -> Vec<Answer> {
    let mut answers = Vec::new();
    for case in cases {
        let a = h.call(case.request()).await;
        let what = format!("{} {}", case.method, case.uri);
        assert_eq!(
            a.status,
            case.status,
            "{what}: {}",
            String::from_utf8_lossy(&a.body)
        );
        if case.code.is_empty() {
            a.ok();
        } else {
            let p = a.json();
            assert_eq!(p["code"], case.code, "{what}: {p}");
            a.problem(case.status, case.code);
        }
        answers.push(a);
    }
    answers
}

// ------------------------------------------------------------------ bad input

#[tokio::test]
async fn bad_member_ids_are_refused() {
    let h = harness();
    let long = "x".repeat(257);
    let mut cases: Vec<Case> = ["", long.as_str(), "a\u{7}b", "tab\there"]
        .into_iter()
        .map(|id| {
            Case::post(
                "/v1/spaces/lobby/heartbeat",
                json!({ "id": id }),
                "bad-member-id",
            )
        })
        .collect();
    cases.extend([
        // 256 bytes is fine.
        Case::post(
            "/v1/spaces/lobby/heartbeat",
            json!({ "id": "x".repeat(256) }),
            "",
        )
        .accepted(),
        // In a path, in a batch, in a friend list.
        Case::get(format!("/v1/spaces/lobby/members/{long}"), "bad-member-id"),
        Case::get("/v1/spaces/lobby/members/a%0Ab", "bad-member-id"),
        Case::post(
            "/v1/spaces/lobby/heartbeats",
            json!({"heartbeats": [{"id": "ok"}, {"id": ""}]}),
            "bad-member-id",
        ),
        Case::put("/v1/friends/me", json!({"friends": [""]}), "bad-member-id"),
    ]);
    refused(&h, cases).await;
    // A bad batch records nothing.
    let c = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(c["users"], 1);
}

#[tokio::test]
async fn bad_space_names_are_refused() {
    let h = harness();
    let long = "s".repeat(129);
    let mut cases: Vec<Case> = ["a%20b", "a%2Fb", "caf%C3%A9", long.as_str()]
        .into_iter()
        .map(|space| {
            Case::post(
                format!("/v1/spaces/{space}/heartbeat"),
                json!({"id": "a"}),
                "bad-space-name",
            )
        })
        .collect();
    cases.push(Case::get("/v1/spaces?after=no%20spaces", "bad-space-name"));
    refused(&h, cases).await;
}

#[tokio::test]
async fn batches_must_hold_1_to_10000_items() {
    let h = harness();
    let many: Vec<Value> = (0..10_001).map(|i| json!({"id": i.to_string()})).collect();
    let max: Vec<Value> = (0..10_000).map(|i| json!({"id": i.to_string()})).collect();
    let answers = refused(
        &h,
        [
            Case::post(
                "/v1/spaces/lobby/heartbeats",
                json!({ "heartbeats": many }),
                "batch-too-large",
            ),
            Case::post(
                "/v1/spaces/lobby/heartbeats",
                json!({"heartbeats": []}),
                "empty-batch",
            ),
            Case::post(
                "/v1/spaces/lobby/leave",
                json!({"members": []}),
                "empty-batch",
            ),
            Case::post(
                "/v1/spaces/lobby/status",
                json!({"members": []}),
                "empty-batch",
            ),
            Case::post(
                "/v1/spaces/lobby/status",
                json!({ "members": many }),
                "batch-too-large",
            ),
            // Exactly 10,000 is fine.
            Case::post(
                "/v1/spaces/lobby/heartbeats",
                json!({ "heartbeats": max }),
                "",
            )
            .accepted(),
        ],
    )
    .await;
    assert_eq!(answers[5].json()["accepted"], 10_000);
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
    let mut cases: Vec<Case> = [
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
    ]
    .into_iter()
    .map(|(uri, body)| {
        assert!(body.len() < 4 << 20, "{uri}: {} bytes", body.len());
        Case::raw(uri, Some("application/json"), body, "batch-too-large")
    })
    .collect();
    // A space's webhooks, and one webhook's events (a PUT).
    let hooks = vec![r#"{"url":"h"}"#; 300_000].join(",");
    let events = vec![r#""join""#; 360_000].join(",");
    for body in [
        format!(r#"{{"webhooks":[{hooks}]}}"#),
        format!(r#"{{"webhooks":[{{"url":"https://x.test/","events":[{events}]}}]}}"#),
    ] {
        cases.push(Case {
            method: Method::PUT,
            ..Case::raw(
                "/v1/spaces/lobby/config",
                Some("application/json"),
                body.into_bytes(),
                "batch-too-large",
            )
        });
    }
    for a in &refused(&h, cases).await[..8] {
        let p = a.json();
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.contains("more than 10000 items"), "{p}");
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
    let json = Some("application/json");
    let broken = refused(
        &h,
        [
            Case::raw(uri, json, b"{\"id\": ".to_vec(), "bad-json"),
            Case::raw(uri, json, b"[1, 2]".to_vec(), "bad-json"),
            Case::raw(uri, json, Vec::new(), "bad-json"),
            // Bytes that are not UTF-8, in a string and outside one: named,
            // and nothing is recorded.
            Case::raw(uri, json, b"{\"id\": \"a\xff\"}".to_vec(), "bad-json"),
            Case::raw(uri, json, b"{\"id\": \"a\"}\xc3".to_vec(), "bad-json"),
        ],
    )
    .await;
    for a in &broken[3..] {
        let p = a.json();
        assert!(p["detail"].as_str().unwrap().contains("not UTF-8"), "{p}");
    }
    let n = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(n["total"], 0, "{n}");
    refused(
        &h,
        [
            Case::raw(
                uri,
                json,
                b"{\"id\": \"a\", \"kind\": \"robot\"}".to_vec(),
                "bad-json",
            ),
            Case::post(uri, json!({"id": "a", "colour": "red"}), "unknown-field"),
            Case::post(
                "/v1/spaces/lobby/leave",
                json!({"members": [{"id": "a", "x": 1}]}),
                "unknown-field",
            ),
            Case::put(
                "/v1/spaces/lobby/config",
                json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 4, "extra": 5}),
                "unknown-field",
            ),
            Case::raw(uri, Some("text/plain"), b"{\"id\": \"a\"}".to_vec(), "not-json")
                .status(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            Case::raw(uri, None, b"{\"id\": \"a\"}".to_vec(), "not-json")
                .status(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            // A charset parameter is fine.
            Case::raw(
                uri,
                Some("application/json; charset=utf-8"),
                b"{\"id\": \"a\"}".to_vec(),
                "",
            )
            .accepted(),
        ],
    )
    .await;
}

/// A refused body's detail names the field at fault by its path; one
/// that fails at the top (not JSON at all) is named as before.
#[tokio::test]
async fn a_refused_body_names_the_field_at_fault() {
    let h = harness();
    let detail = |a: &Answer| a.json()["detail"].as_str().unwrap().to_owned();
    let named = [
        (
            Case::post(
                "/v1/spaces/lobby/heartbeats",
                json!({"heartbeats": [{"id": "a"}, {"id": 5}]}),
                "bad-json",
            ),
            "heartbeats[1].id: invalid type: integer `5`, expected a string",
        ),
        (
            Case::post(
                "/v1/spaces/lobby/heartbeats",
                json!({"heartbeats": [{"id": "a"}, {"id": "b", "idx": "c"}]}),
                "unknown-field",
            ),
            "heartbeats[1].idx: unknown field `idx`",
        ),
        (
            Case::post(
                "/v1/spaces/lobby/heartbeat",
                json!({"id": "a", "at_ms": -1}),
                "bad-json",
            ),
            "at_ms: ",
        ),
        (
            Case::post(
                "/v1/spaces/lobby/leave",
                json!({"members": [{"id": "a", "kind": "robot"}]}),
                "bad-json",
            ),
            "members[0].kind: unknown variant `robot`",
        ),
        // serde would read a struct from an array of its fields; the
        // schema says objects.
        (
            Case::post(
                "/v1/spaces/lobby/heartbeats",
                json!({"heartbeats": [{"id": "a"}, ["b"]]}),
                "bad-json",
            ),
            "heartbeats[1]: invalid type: sequence, expected an object",
        ),
        (
            Case::post("/v1/spaces/lobby/heartbeat", json!(["a"]), "bad-json"),
            "invalid type: sequence, expected an object",
        ),
        (
            Case::post(
                "/v1/spaces/lobby/online-among",
                json!({"members": [["a", "user"]]}),
                "bad-json",
            ),
            "members[0]: invalid type: sequence",
        ),
        (
            Case::put(
                "/v1/spaces/lobby/config",
                json!({"online_ms": -5, "away_ms": 2, "window_ms": 3, "retention_ms": 4}),
                "bad-json",
            ),
            "online_ms: ",
        ),
        (
            Case::raw(
                "/v1/spaces/lobby/heartbeat",
                Some("application/json"),
                b"{\"id\": \"a\"} x".to_vec(),
                "bad-json",
            ),
            "trailing characters",
        ),
    ];
    let (cases, starts): (Vec<Case>, Vec<&str>) = named.into_iter().unzip();
    let uris: Vec<String> = cases.iter().map(|c| c.uri.clone()).collect();
    for ((a, starts), uri) in refused(&h, cases).await.iter().zip(starts).zip(uris) {
        assert!(detail(a).starts_with(starts), "{uri}: {}", detail(a));
    }
    // Arrays where the schema has objects (serde would read a struct from
    // an array of its fields).
    let arrays = refused(
        &h,
        [
            ("/v1/spaces/lobby/config", json!([1000, 2000, 3000, 4000])),
            (
                "/v1/spaces/lobby/config",
                json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 4,
                       "webhooks": [["http://example.com/hook"]]}),
            ),
            ("/v1/friends/ann", json!([["bob"]])),
            ("/v1/friends/ann", json!([[]])),
        ]
        .map(|(uri, body)| Case::put(uri, body, "bad-json")),
    )
    .await;
    for a in &arrays {
        assert!(detail(a).contains("expected an object"), "{}", detail(a));
    }
    let friends = h.get("/v1/friends/ann").await.ok();
    assert_eq!(friends["friends"], json!([]), "{friends}");
    // Nothing was recorded by any of them.
    let n = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(n["total"], 0, "{n}");
}

#[tokio::test]
async fn metadata_is_bounded() {
    let uri = "/v1/spaces/lobby/heartbeat";
    refused(
        &harness(),
        [
            Case::post(
                uri,
                json!({"id": "a", "meta": {"x": "y".repeat(1100)}}),
                "bad-metadata",
            ),
            Case::post(uri, json!({"id": "a", "meta": [1, 2]}), "bad-metadata"),
            Case::post(uri, json!({"id": "a", "meta": null}), "").accepted(),
        ],
    )
    .await;
}

#[tokio::test]
async fn explicit_times_in_the_future_are_refused() {
    let uri = "/v1/spaces/lobby/heartbeat";
    refused(
        &harness(),
        [
            Case::post(uri, json!({"id": "a", "at_ms": T0 + 61_000}), "bad-time"),
            Case::post(uri, json!({"id": "a", "at_ms": T0 + 59_000}), "").accepted(),
        ],
    )
    .await;
}

#[tokio::test]
async fn durations_need_units_and_fit_the_retention() {
    let mut cases: Vec<Case> = ["600", "10x", "soon", "-5m"]
        .into_iter()
        .map(|w| Case::get(format!("/v1/spaces/lobby/count?window={w}"), "bad-duration"))
        .collect();
    cases.extend([
        Case::get("/v1/spaces/lobby/online?window=1d", "bad-window"),
        Case::get("/v1/spaces/lobby/count?window=0s", "bad-window"),
        Case::post(
            "/v1/spaces/lobby/online-among",
            json!({"members": [{"id": "a"}], "window": "90"}),
            "bad-duration",
        ),
        Case::get(
            "/v1/spaces/lobby/friends/me/online?window=3",
            "bad-duration",
        ),
        Case::get("/v1/spaces/lobby/history?range=25h", "bad-range"),
        Case::get("/v1/spaces/lobby/history?range=0s", "bad-range"),
        Case::get("/v1/spaces/lobby/history?range=60", "bad-duration"),
    ]);
    refused(&harness(), cases).await;
}

#[tokio::test]
async fn limits_must_be_1_to_1000() {
    let mut cases = Vec::new();
    for l in ["0", "-1", "1001", "ten", "99999999999999999999"] {
        for uri in [
            "/v1/spaces/lobby/online",
            "/v1/spaces",
            "/v1/spaces/lobby/friends/me/online",
        ] {
            cases.push(Case::get(format!("{uri}?limit={l}"), "bad-limit"));
        }
    }
    for l in [0, -1, 1001] {
        cases.push(Case::post(
            "/v1/spaces/lobby/online-among",
            json!({"members": [{"id": "a"}], "limit": l}),
            "bad-limit",
        ));
    }
    cases.push(Case::get("/v1/spaces/lobby/online?limit=1000", "").accepted());
    refused(&harness(), cases).await;
}

#[tokio::test]
async fn bad_cursors_kinds_orders_and_parameters() {
    let h = harness();
    h.beat("lobby", "a").await;
    h.beat("lobby", "b").await;
    let mut cases: Vec<Case> = ["zzz", "r1.2", "%00"]
        .into_iter()
        .map(|c| Case::get(format!("/v1/spaces/lobby/online?cursor={c}"), "bad-cursor"))
        .collect();
    cases.extend([
        Case::get(
            format!("/v1/spaces/lobby/online?cursor={}", "r".repeat(600)),
            "bad-cursor",
        ),
        Case::get("/v1/spaces/lobby/online?kind=robots", "bad-kind"),
        Case::get("/v1/spaces/lobby/members/a?kind=users", "bad-kind"),
        Case::get("/v1/spaces/lobby/online?order=alpha", "bad-order"),
        Case::get("/v1/spaces/lobby/online?windw=10m", "unknown-parameter"),
    ]);
    refused(&h, cases).await;
}

#[tokio::test]
async fn bad_config_is_refused() {
    let uri = "/v1/spaces/room/config";
    refused(
        &harness(),
        [
            (
                json!({"online_ms": 0, "away_ms": 2, "window_ms": 3, "retention_ms": 4}),
                "bad-config",
            ),
            (
                json!({"online_ms": 10, "away_ms": 5, "window_ms": 3, "retention_ms": 40}),
                "bad-config",
            ),
            (
                json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 90_000_000}),
                "bad-config",
            ),
            (json!({"online_ms": 1}), "bad-json"),
        ]
        .map(|(body, code)| Case::put(uri, body, code)),
    )
    .await;
}

#[tokio::test]
async fn friend_sets_are_bounded() {
    let h = harness();
    let a: Vec<String> = (0..5_000).map(|i| format!("f{i}")).collect();
    let answers = refused(
        &h,
        [
            Case::put("/v1/friends/me", json!({ "friends": a }), "").accepted(),
            Case::post(
                "/v1/friends/me/add",
                json!({"friends": ["one-more"]}),
                "too-many-friends",
            ),
            Case::post("/v1/friends/me/add", json!({"friends": []}), "empty-batch"),
            // PUT with an empty list clears the set.
            Case::put("/v1/friends/me", json!({"friends": []}), "").accepted(),
        ],
    )
    .await;
    assert_eq!(answers[3].json()["friends"], 0);
}

#[tokio::test]
async fn bodies_over_4_mib_are_refused() {
    let h = harness();
    let mut big = b"{\"id\": \"".to_vec();
    big.extend(std::iter::repeat_n(b'x', 5 * 1024 * 1024));
    big.extend(b"\"}");
    refused(
        &h,
        [Case::raw(
            "/v1/spaces/lobby/heartbeat",
            Some("application/json"),
            big.clone(),
            "body-too-large",
        )
        .status(StatusCode::PAYLOAD_TOO_LARGE)],
    )
    .await;

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
    let status = json!({"members": [{"id": "a"}]});
    let cfg = json!({"online_ms": 1, "away_ms": 2, "window_ms": 3, "retention_ms": 4});
    let backdated = json!({"id": "a", "at_ms": T0 - 1000});
    let forbidden = |case: Case| case.key(READ_KEY).status(StatusCode::FORBIDDEN);
    let answers = refused(
        &h,
        [
            Case::post(uri, hb.clone(), "missing-api-key").status(StatusCode::UNAUTHORIZED),
            Case::post(uri, hb.clone(), "unknown-api-key")
                .key("nope-nope-nope")
                .status(StatusCode::UNAUTHORIZED),
            forbidden(Case::post(uri, hb.clone(), "insufficient-scope")),
            Case::post(uri, hb.clone(), "").key(WRITE_KEY).accepted(),
            // A read key may GET and use the read-only POSTs...
            Case::get("/v1/spaces/lobby/count", "")
                .key(READ_KEY)
                .accepted(),
            Case::post("/v1/spaces/lobby/status", status.clone(), "")
                .key(READ_KEY)
                .accepted(),
            Case::post("/v1/spaces/lobby/online-among", status.clone(), "")
                .key(READ_KEY)
                .accepted(),
            // ...but not configure, befriend or leave.
            forbidden(Case::put(
                "/v1/spaces/lobby/config",
                cfg,
                "insufficient-scope",
            )),
            forbidden(Case::put(
                "/v1/friends/a",
                json!({"friends": ["b"]}),
                "insufficient-scope",
            )),
            forbidden(Case::post(
                "/v1/spaces/lobby/leave",
                status,
                "insufficient-scope",
            )),
            // Explicit times need write scope; a write key may backdate.
            forbidden(Case::post(uri, backdated.clone(), "insufficient-scope")),
            Case::post(uri, backdated, "").key(WRITE_KEY).accepted(),
            // Event streams need a key.
            Case::get("/v1/spaces/lobby/events", "missing-api-key")
                .status(StatusCode::UNAUTHORIZED),
        ],
    )
    .await;
    assert!(answers[0].headers.contains_key(header::WWW_AUTHENTICATE));

    // X-API-Key works too.
    let r = Request::builder()
        .uri("/v1/spaces/lobby/count")
        .header("x-api-key", READ_KEY)
        .body(Body::empty())
        .unwrap();
    call(&h.app, r).await.ok();

    // Probes and the document need none; metrics need a read key
    // (issue 37).
    for path in ["/healthz", "/readyz", "/openapi.json"] {
        assert_eq!(h.get(path).await.status, StatusCode::OK, "{path}");
    }
    h.get("/metrics")
        .await
        .problem(StatusCode::UNAUTHORIZED, "missing-api-key");
}

/// Each route needs the scope declared with it: a read key is refused
/// `insufficient-scope` on the routes that write (`GET /v1/webhooks`
/// among them: where events go is the operator's business), and let
/// through on the routes that read, `POST`s included. A method a path
/// does not serve needs a read key for `GET`, a write key otherwise,
/// before it earns its `405`.
#[tokio::test]
async fn every_route_needs_its_scope() {
    let h = keyed();
    let routes = [
        (Method::POST, "/v1/spaces/lobby/status", false),
        (Method::POST, "/v1/spaces/lobby/online-among", false),
        (Method::POST, "/v1/users/status", false),
        (Method::POST, "/v1/watch", false),
        (Method::GET, "/v1/users/ann", false),
        (Method::GET, "/v1/users/status", false),
        (Method::GET, "/v1/spaces/lobby/config", false),
        (Method::POST, "/v1/spaces/lobby/heartbeat", true),
        (Method::PUT, "/v1/friends/ann", true),
        (Method::PUT, "/v1/spaces/lobby/config", true),
        (Method::POST, "/v1/tokens", true),
        (Method::GET, "/v1/webhooks", true),
        (Method::DELETE, "/v1/users/ann", true),
        (Method::DELETE, "/v1/users/status", true),
        // Methods the path does not serve.
        (Method::DELETE, "/v1/spaces/lobby/count", true),
        (Method::PATCH, "/v1/spaces/lobby/status", true),
    ];
    for (method, uri, writes) in routes {
        let a = call(&h.app, request(method.clone(), uri, None, Some(READ_KEY))).await;
        if writes {
            a.problem(StatusCode::FORBIDDEN, "insufficient-scope");
        } else {
            assert!(
                a.status != StatusCode::FORBIDDEN && a.status != StatusCode::UNAUTHORIZED,
                "{method} {uri}: {:?} {}",
                a.status,
                String::from_utf8_lossy(&a.body)
            );
        }
    }
    // A GET where the path serves none needs only a read key: its 405.
    call(
        &h.app,
        request(
            Method::GET,
            "/v1/spaces/lobby/heartbeat",
            None,
            Some(READ_KEY),
        ),
    )
    .await
    .problem(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed");
}
