//! Issue 8, "last seen that lasts", through the router: a user's last seen
//! anywhere (`GET /v1/users/{id}`, `POST /v1/users/status`), erasure
//! (`DELETE /v1/users/{id}`), the space config's `remember_ms` and
//! `remember_guests`, and remembered times in the answers that name a
//! member. Bad input is matched by status and problem `code`.
//!
//! Time is a `ManualClock`; expiry runs by calling the ticker.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use herenow_core::{ManualClock, limits};
use herenow_memory::MemoryStore;
use herenow_server::Config;
use serde_json::{Value, json};
use support::http::{Answer, Api, request};
use support::{T0, memory_store, state_over, store_over_memory};

const READ_KEY: &str = "reader-secret-8";
const WRITE_KEY: &str = "writer-secret-8";

fn harness() -> Api {
    Api::memory(Config::default())
}

/// The default policy's `remember_ms`: 30 days.
const THIRTY_DAYS_MS: u64 = 30 * 24 * 3600 * 1000;

async fn delete(h: &Api, uri: &str) -> Answer {
    h.call(request(Method::DELETE, uri, None, None)).await
}

async fn leave(h: &Api, space: &str, members: Value) {
    h.post(
        &format!("/v1/spaces/{space}/leave"),
        json!({ "members": members }),
    )
    .await
    .ok();
}

/// Runs the ticker until a round finds nothing to do.
async fn settle(h: &Api) {
    for _ in 0..100 {
        let r = h.state.tick().await.expect("tick");
        if r.expired == 0 && r.transitions == 0 {
            return;
        }
    }
}

// ---------------------------------------------------------------- happy paths

#[tokio::test]
async fn issue_8_a_user_is_last_seen_anywhere() {
    let h = harness();
    let never = h.get("/v1/users/nobody").await.ok();
    assert_eq!(
        never,
        json!({"id": "nobody", "status": "offline", "last_seen_ms": null, "space": null})
    );

    h.beat("a", "ann").await;
    h.clock.advance(Duration::from_secs(1));
    leave(&h, "a", json!([{"id": "ann"}])).await;
    // The leave's own time, remembered, and offline however fresh it is.
    assert_eq!(
        h.get("/v1/users/ann").await.ok(),
        json!({"id": "ann", "status": "offline", "last_seen_ms": T0 + 1_000, "space": "a"})
    );

    // Present elsewhere: that space's newer time and its status.
    h.clock.advance(Duration::from_secs(2));
    h.beat("b", "ann").await;
    assert_eq!(
        h.get("/v1/users/ann").await.ok(),
        json!({"id": "ann", "status": "online", "last_seen_ms": T0 + 3_000, "space": "b"})
    );

    // Guests are not users: a guest "gus" is not the user gus.
    h.post(
        "/v1/spaces/b/heartbeat",
        json!({"id": "gus", "kind": "guest"}),
    )
    .await
    .ok();
    assert_eq!(
        h.get("/v1/users/gus").await.ok()["last_seen_ms"],
        Value::Null
    );

    // Ids travel percent-encoded, one path segment each.
    h.beat("a", "a/b c").await;
    assert_eq!(
        h.get("/v1/users/a%2Fb%20c").await.ok()["last_seen_ms"],
        T0 + 3_000
    );
}

#[tokio::test]
async fn issue_8_users_status_answers_in_the_order_asked() {
    let h = harness();
    h.beat("a", "ann").await;
    h.clock.advance(Duration::from_secs(90));
    h.beat("b", "bob").await;
    let a = h
        .post(
            "/v1/users/status",
            json!({"ids": ["bob", "nobody", "ann", "bob"]}),
        )
        .await
        .ok();
    assert_eq!(
        a,
        json!({"users": [
            {"id": "bob", "status": "online", "last_seen_ms": T0 + 90_000, "space": "b"},
            {"id": "nobody", "status": "offline", "last_seen_ms": null, "space": null},
            {"id": "ann", "status": "away", "last_seen_ms": T0, "space": "a"},
            {"id": "bob", "status": "online", "last_seen_ms": T0 + 90_000, "space": "b"},
        ]})
    );
    // Exactly 10,000 is fine.
    let max: Vec<String> = (0..limits::MAX_BATCH).map(|i| format!("u{i}")).collect();
    let a = h.post("/v1/users/status", json!({ "ids": max })).await.ok();
    assert_eq!(a["users"].as_array().unwrap().len(), limits::MAX_BATCH);
    assert_eq!(a["users"][9_999]["id"], "u9999");
}

#[tokio::test]
async fn issue_8_erase_forgets_a_user_everywhere() {
    let h = harness();
    h.beat("a", "ann").await;
    h.beat("a", "bob").await;
    h.beat("b", "ann").await;
    leave(&h, "b", json!([{"id": "ann"}])).await;
    h.put("/v1/friends/ann", json!({"friends": ["bob"]}))
        .await
        .ok();
    h.put("/v1/friends/bob", json!({"friends": ["ann", "cy"]}))
        .await
        .ok();
    h.clock.advance(Duration::from_secs(1));

    let report = delete(&h, "/v1/users/ann").await.ok();
    assert_eq!(
        report,
        json!({"presence": 1, "remembered": 1, "friend_set": true, "listed_by": 1})
    );
    for space in ["a", "b"] {
        let m = h.get(&format!("/v1/spaces/{space}/members/ann")).await.ok();
        assert_eq!(
            (&m["status"], &m["last_seen_ms"]),
            (&json!("offline"), &Value::Null),
            "{space}"
        );
    }
    assert_eq!(
        h.get("/v1/users/ann").await.ok()["last_seen_ms"],
        Value::Null
    );
    assert_eq!(
        h.get("/v1/friends/ann").await.ok()["friends"],
        json!([]),
        "her own friend set is gone"
    );
    assert_eq!(
        h.get("/v1/friends/bob").await.ok()["friends"],
        json!(["cy"]),
        "and she is gone from others'"
    );
    assert_eq!(h.get("/v1/spaces/a/count").await.ok()["users"], 1);

    // Erasing again, or someone never seen, is no error and erases nothing.
    let nothing = json!({"presence": 0, "remembered": 0, "friend_set": false, "listed_by": 0});
    assert_eq!(delete(&h, "/v1/users/ann").await.ok(), nothing);
    assert_eq!(delete(&h, "/v1/users/nobody").await.ok(), nothing);

    // She may come back, as new.
    h.beat("a", "ann").await;
    assert_eq!(h.get("/v1/users/ann").await.ok()["status"], "online");

    let text = String::from_utf8(h.get("/metrics").await.body).unwrap();
    assert!(
        text.contains(r#"herenow_erasures_total{store="memory"} 3"#),
        "{text}"
    );
}

#[tokio::test]
async fn issue_8_a_user_called_status_is_a_user_like_any() {
    let h = harness();
    h.beat("a", "status").await;
    let one = h.get("/v1/users/status").await.ok();
    assert_eq!((&one["id"], &one["space"]), (&json!("status"), &json!("a")));
    // The batch is still the batch.
    let batch = h
        .post("/v1/users/status", json!({"ids": ["status"]}))
        .await
        .ok();
    assert_eq!(batch["users"][0], one);
    let report = delete(&h, "/v1/users/status").await.ok();
    assert_eq!(report["presence"], 1);
    assert_eq!(
        h.get("/v1/users/status").await.ok()["last_seen_ms"],
        Value::Null
    );
}

#[tokio::test]
async fn issue_8_space_config_carries_remember_ms_and_remember_guests() {
    let h = harness();
    assert_eq!(
        h.get("/v1/spaces/room/config").await.ok(),
        json!({"online_ms": 60000, "away_ms": 300000, "window_ms": 600000,
               "retention_ms": 900000, "remember_ms": THIRTY_DAYS_MS, "remember_guests": false,
               "grace_ms": 5000, "webhooks": []})
    );
    let full = json!({"online_ms": 1000, "away_ms": 2000, "window_ms": 2000,
                      "retention_ms": 4000, "remember_ms": 10000, "remember_guests": true,
                      "grace_ms": 5000, "webhooks": []});
    assert_eq!(
        h.put("/v1/spaces/room/config", full.clone()).await.ok(),
        full
    );
    assert_eq!(h.get("/v1/spaces/room/config").await.ok(), full);

    // Absent remembering fields keep what the space has.
    let thresholds =
        json!({"online_ms": 1000, "away_ms": 2000, "window_ms": 3000, "retention_ms": 4000});
    let c = h.put("/v1/spaces/room/config", thresholds).await.ok();
    assert_eq!(
        (&c["window_ms"], &c["remember_ms"], &c["remember_guests"]),
        (&json!(3000), &json!(10000), &json!(true))
    );
    assert_eq!(h.get("/v1/spaces/room/config").await.ok(), c);

    // The policy drives what is remembered: guests too here, until the
    // horizon.
    h.beat("room", "ann").await;
    h.post(
        "/v1/spaces/room/heartbeat",
        json!({"id": "g1", "kind": "guest"}),
    )
    .await
    .ok();
    leave(
        &h,
        "room",
        json!([{"id": "ann"}, {"id": "g1", "kind": "guest"}]),
    )
    .await;
    h.clock.advance(Duration::from_millis(9_999));
    let st = h
        .post(
            "/v1/spaces/room/status",
            json!({"members": [{"id": "ann"}, {"id": "g1", "kind": "guest"}]}),
        )
        .await
        .ok();
    assert_eq!(st["members"][0]["last_seen_ms"], T0);
    assert_eq!(st["members"][1]["last_seen_ms"], T0);
    h.clock.advance(Duration::from_millis(1));
    let st = h
        .post(
            "/v1/spaces/room/status",
            json!({"members": [{"id": "ann"}, {"id": "g1", "kind": "guest"}]}),
        )
        .await
        .ok();
    assert_eq!(st["members"][0]["last_seen_ms"], Value::Null);
    assert_eq!(st["members"][1]["last_seen_ms"], Value::Null);

    // 0 turns remembering off; the longest horizon is accepted.
    let off = json!({"online_ms": 1000, "away_ms": 2000, "window_ms": 2000,
                     "retention_ms": 4000, "remember_ms": 0});
    assert_eq!(
        h.put("/v1/spaces/off/config", off).await.ok()["remember_ms"],
        0
    );
    h.beat("off", "ann").await;
    leave(&h, "off", json!([{"id": "ann"}])).await;
    assert_eq!(
        h.get("/v1/spaces/off/members/ann").await.ok()["last_seen_ms"],
        Value::Null
    );
    let longest = json!({"online_ms": 1000, "away_ms": 2000, "window_ms": 2000,
                         "retention_ms": 4000, "remember_ms": limits::MAX_REMEMBER_MS});
    h.put("/v1/spaces/long/config", longest).await.ok();
}

#[tokio::test]
async fn issue_8_answers_naming_a_member_give_its_remembered_time() {
    let h = harness();
    // Leave: members/{id} and the status batch keep the leave's time.
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({"id": "ann", "meta": {"name": "Ann"}}),
    )
    .await
    .ok();
    h.clock.advance(Duration::from_secs(5));
    leave(&h, "lobby", json!([{"id": "ann"}])).await;
    let m = h.get("/v1/spaces/lobby/members/ann").await.ok();
    assert_eq!(m["status"], "offline");
    assert_eq!(m["last_seen_ms"], T0 + 5_000);
    let st = h
        .post(
            "/v1/spaces/lobby/status",
            json!({"members": [{"id": "ann"}, {"id": "nobody"}]}),
        )
        .await
        .ok();
    assert_eq!(st["members"][0]["status"], "offline");
    assert_eq!(st["members"][0]["last_seen_ms"], T0 + 5_000);
    assert_eq!(st["members"][1]["last_seen_ms"], Value::Null);
    // Remembered is not present: not listed, not counted.
    assert_eq!(h.get("/v1/spaces/lobby/count").await.ok()["total"], 0);
    assert_eq!(
        h.get("/v1/spaces/lobby/online").await.ok()["members"],
        json!([])
    );

    // Expiry at the retention keeps the last heartbeat.
    let short =
        json!({"online_ms": 1000, "away_ms": 2000, "window_ms": 2000, "retention_ms": 4000});
    h.put("/v1/spaces/short/config", short).await.ok();
    h.beat("short", "bob").await;
    h.clock.advance(Duration::from_secs(6));
    settle(&h).await;
    let m = h.get("/v1/spaces/short/members/bob").await.ok();
    assert_eq!(
        (&m["status"], &m["last_seen_ms"]),
        (&json!("offline"), &json!(T0 + 5_000))
    );
    assert_eq!(h.get("/v1/spaces/short/count").await.ok()["total"], 0);
    assert_eq!(h.get("/v1/users/bob").await.ok()["space"], "short");

    // Friends and online-among pass an offline member's time through:
    // cy, seen 6 minutes ago, is offline (away ends at 5) but within the
    // 10-minute window.
    let seen = T0 + 11_000;
    h.beat("lobby", "cy").await;
    h.clock.advance(Duration::from_secs(6 * 60));
    h.put("/v1/friends/me", json!({"friends": ["cy", "ann"]}))
        .await
        .ok();
    for a in [
        h.get("/v1/spaces/lobby/friends/me/online").await.ok(),
        h.post(
            "/v1/spaces/lobby/online-among",
            json!({"members": [{"id": "cy"}, {"id": "ann"}]}),
        )
        .await
        .ok(),
    ] {
        assert_eq!(
            a["members"],
            json!([{"id": "cy", "kind": "user", "status": "offline", "last_seen_ms": seen}]),
            "ann left: her presence ended, only her last seen is remembered"
        );
    }
}

#[tokio::test]
async fn issue_8_openapi_documents_the_user_routes() {
    let h = harness();
    let doc = h.get("/openapi.json").await.ok();
    let paths = &doc["paths"];
    assert!(paths["/v1/users/{id}"]["get"].is_object(), "{paths}");
    assert!(paths["/v1/users/{id}"]["delete"].is_object(), "{paths}");
    assert!(paths["/v1/users/status"]["post"].is_object(), "{paths}");
    let erase = &paths["/v1/users/{id}"]["delete"]["responses"];
    for status in ["200", "400", "401", "403", "501", "503"] {
        assert!(erase[status].is_object(), "erase lacks {status}: {erase}");
    }
    let schemas = &doc["components"]["schemas"];
    let remember = &schemas["SpaceConfigDto"]["properties"]["remember_ms"];
    assert_eq!(
        remember["maximum"].as_f64(),
        Some(limits::MAX_REMEMBER_MS as f64),
        "{remember}"
    );
    for schema in ["SeenAnywhereDto", "UsersBody", "UsersAnswer", "ErasureDto"] {
        assert!(schemas[schema].is_object(), "no schema {schema}");
    }
}

#[tokio::test]
async fn issue_8_user_queries_are_counted() {
    let h = harness();
    h.get("/v1/users/ann").await;
    h.post("/v1/users/status", json!({"ids": ["ann"]})).await;
    h.post("/v1/users/status", json!({"ids": ["ann", "bob"]}))
        .await;
    let text = String::from_utf8(h.get("/metrics").await.body).unwrap();
    for needle in [
        r#"herenow_queries_total{store="memory",endpoint="user"} 1"#,
        r#"herenow_queries_total{store="memory",endpoint="users_status"} 2"#,
        r#"herenow_erasures_total{store="memory"} 0"#,
    ] {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
}

// ------------------------------------------------------------------ bad input

#[tokio::test]
async fn issue_8_bad_batches_and_ids_are_refused() {
    let h = harness();
    h.post("/v1/users/status", json!({"ids": []}))
        .await
        .problem(StatusCode::BAD_REQUEST, "empty-batch");
    let many: Vec<String> = (0..=limits::MAX_BATCH).map(|i| format!("u{i}")).collect();
    h.post("/v1/users/status", json!({ "ids": many }))
        .await
        .problem(StatusCode::BAD_REQUEST, "batch-too-large");
    let long = "x".repeat(257);
    for bad in ["", long.as_str(), "a\u{7}b"] {
        h.post("/v1/users/status", json!({"ids": ["ok", bad]}))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-member-id");
    }
    h.post("/v1/users/status", json!({"ids": ["a"], "kind": "guest"}))
        .await
        .problem(StatusCode::BAD_REQUEST, "unknown-field");
    h.post("/v1/users/status", json!({"members": [{"id": "a"}]}))
        .await
        .problem(StatusCode::BAD_REQUEST, "unknown-field");
    h.post("/v1/users/status", json!({}))
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-json");
    h.post("/v1/users/status", json!({"ids": "ann"}))
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-json");
    h.raw(
        "/v1/users/status",
        Some("text/plain"),
        b"{\"ids\":[\"a\"]}".to_vec(),
    )
    .await
    .problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "not-json");

    // In the path, for a look-up and an erasure alike.
    for uri in [format!("/v1/users/{long}"), "/v1/users/a%0Ab".to_owned()] {
        h.get(&uri)
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-member-id");
        delete(&h, &uri)
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-member-id");
    }
    // Methods the routes do not take.
    h.put("/v1/users/ann", json!({}))
        .await
        .problem(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed");
    h.call(request(
        Method::PUT,
        "/v1/users/status",
        Some(&json!({})),
        None,
    ))
    .await
    .problem(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed");
}

#[tokio::test]
async fn issue_8_bad_remembering_config_is_refused() {
    let h = harness();
    let with = |extra: Value| {
        let mut c =
            json!({"online_ms": 1000, "away_ms": 2000, "window_ms": 2000, "retention_ms": 4000});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    h.put(
        "/v1/spaces/room/config",
        with(json!({"remember_ms": limits::MAX_REMEMBER_MS + 1})),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-config");
    for bad in [
        json!({"remember_ms": -1}),
        json!({"remember_ms": "30d"}),
        json!({"remember_ms": 1.5}),
        json!({"remember_guests": "yes"}),
    ] {
        h.put("/v1/spaces/room/config", with(bad.clone()))
            .await
            .problem(StatusCode::BAD_REQUEST, "bad-json");
    }
    h.put("/v1/spaces/room/config", with(json!({"remember": 5})))
        .await
        .problem(StatusCode::BAD_REQUEST, "unknown-field");
    // A refused policy changes nothing.
    assert_eq!(
        h.get("/v1/spaces/room/config").await.ok()["remember_ms"],
        THIRTY_DAYS_MS
    );
}

// ----------------------------------------------------------------------- auth

#[tokio::test]
async fn issue_8_reads_need_read_keys_and_erasure_a_write_key() {
    let h = Api::memory(Config {
        api_keys: vec![
            format!("{READ_KEY}:read").parse().unwrap(),
            format!("{WRITE_KEY}:write").parse().unwrap(),
        ],
        ..Config::default()
    });
    let ids = json!({"ids": ["ann"]});
    h.call(request(Method::GET, "/v1/users/ann", None, None))
        .await
        .problem(StatusCode::UNAUTHORIZED, "missing-api-key");
    h.call(request(Method::GET, "/v1/users/ann", None, Some(READ_KEY)))
        .await
        .ok();
    h.call(request(
        Method::POST,
        "/v1/users/status",
        Some(&ids),
        Some(READ_KEY),
    ))
    .await
    .ok();
    // Watching is reading: a read key opens the stream (the SSE answer's
    // head is enough here).
    let watch = serde_json::json!({"users": ["ann"]});
    let r = tower::ServiceExt::oneshot(
        h.app.clone(),
        request(Method::POST, "/v1/watch", Some(&watch), Some(READ_KEY)),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "a read key may watch");
    for uri in ["/v1/users/ann", "/v1/users/status"] {
        h.call(request(Method::DELETE, uri, None, Some(READ_KEY)))
            .await
            .problem(StatusCode::FORBIDDEN, "insufficient-scope");
        h.call(request(Method::DELETE, uri, None, Some(WRITE_KEY)))
            .await
            .ok();
    }
}

// ------------------------------------------------- a store that cannot answer

/// A memory store that answers everything but the issue-8 calls, as a
/// Redis seed layout whose keys cannot hold them does: the trait's
/// defaults answer `Unsupported`.
struct WithoutUsers(Arc<MemoryStore>);

store_over_memory!(WithoutUsers, "without-users", {});

#[tokio::test]
async fn issue_8_a_store_that_cannot_answer_is_501_unsupported() {
    let clock = ManualClock::new(T0);
    let store = Arc::new(WithoutUsers(memory_store(&clock)));
    let h = Api::over(state_over(store, &Config::default()), clock);
    h.beat("a", "ann").await;
    h.get("/v1/users/ann")
        .await
        .problem(StatusCode::NOT_IMPLEMENTED, "unsupported");
    h.post("/v1/users/status", json!({"ids": ["ann"]}))
        .await
        .problem(StatusCode::NOT_IMPLEMENTED, "unsupported");
    delete(&h, "/v1/users/ann")
        .await
        .problem(StatusCode::NOT_IMPLEMENTED, "unsupported");
    // Bad input is still the client's problem, not the store's.
    h.post("/v1/users/status", json!({"ids": []}))
        .await
        .problem(StatusCode::BAD_REQUEST, "empty-batch");
    // Nothing was erased.
    assert_eq!(
        h.get("/v1/spaces/a/members/ann").await.ok()["status"],
        "online"
    );
    // A store that keeps no webhook endpoints (a seed's layout): the
    // policy reads without them, and naming some is 501 with nothing
    // changed, the policy included.
    let config = h.get("/v1/spaces/a/config").await.ok();
    assert!(config.get("webhooks").is_none(), "{config}");
    h.put(
        "/v1/spaces/a/config",
        json!({"online_ms": 1000, "away_ms": 2000, "window_ms": 2000, "retention_ms": 3000,
               "webhooks": [{"url": "https://example.com/x",
                             "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]}),
    )
    .await
    .problem(StatusCode::NOT_IMPLEMENTED, "unsupported");
    assert_eq!(h.get("/v1/spaces/a/config").await.ok(), config);
}
