//! The `/v1` API through the router, without a socket: every endpoint's
//! happy path — heartbeats, leaves, listings and counts, status look-ups,
//! friends, space configuration, spaces, history, the ticker, operations
//! and the OpenAPI document. Bad input and API keys are in
//! `api_refusals.rs`.
//!
//! Time is a `ManualClock`: statuses and expiry are exact, nothing sleeps.

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use herenow_server::Config;
use serde_json::{Value, json};
use support::T0;
use support::http::Api;

fn harness() -> Api {
    Api::memory(Config::default())
}

#[tokio::test]
async fn heartbeat_then_member_status_follows_the_clock() {
    let h = harness();
    let a = h
        .post(
            "/v1/spaces/lobby/heartbeat",
            json!({"id": "alice", "meta": {"name": "Alice"}}),
        )
        .await
        .ok();
    assert_eq!(a, json!({"accepted": 1, "joined": 1, "stale": 0}));

    let m = h.get("/v1/spaces/lobby/members/alice").await.ok();
    assert_eq!(m["id"], "alice");
    assert_eq!(m["kind"], "user");
    assert_eq!(m["status"], "online");
    assert_eq!(m["last_seen_ms"], T0);
    assert_eq!(m["meta"], json!({"name": "Alice"}));

    h.clock.advance(Duration::from_secs(61));
    let m = h.get("/v1/spaces/lobby/members/alice").await.ok();
    assert_eq!(m["status"], "away");
    h.clock.advance(Duration::from_secs(240));
    let m = h.get("/v1/spaces/lobby/members/alice").await.ok();
    assert_eq!(m["status"], "offline");

    // Same id as a guest is another member, never seen.
    let g = h
        .get("/v1/spaces/lobby/members/alice?kind=guest")
        .await
        .ok();
    assert_eq!(g["status"], "offline");
    assert_eq!(g["last_seen_ms"], Value::Null);
}

#[tokio::test]
async fn never_seen_member_is_offline_with_null_last_seen() {
    let h = harness();
    let m = h.get("/v1/spaces/nowhere/members/ghost").await.ok();
    assert_eq!(m["status"], "offline");
    assert_eq!(m["last_seen_ms"], Value::Null);
}

#[tokio::test]
async fn batch_heartbeats_sum_and_count() {
    let h = harness();
    let a = h
        .post(
            "/v1/spaces/lobby/heartbeats",
            json!({"heartbeats": [{"id": "a"}, {"id": "b"}, {"id": "g1", "kind": "guest"}]}),
        )
        .await
        .ok();
    assert_eq!(a, json!({"accepted": 3, "joined": 3, "stale": 0}));
    // An older explicit time than the member has is stale.
    let a = h
        .post(
            "/v1/spaces/lobby/heartbeats",
            json!({"heartbeats": [{"id": "a", "at_ms": T0 - 1000}]}),
        )
        .await
        .ok();
    assert_eq!(a["stale"], 1);

    let c = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(
        c,
        json!({"users": 2, "guests": 1, "total": 3, "window_ms": 600_000})
    );
    let c = h.get("/v1/spaces/lobby/count?window=90s").await.ok();
    assert_eq!(c["window_ms"], 90_000);
    assert_eq!(c["total"], 3);
}

#[tokio::test]
async fn online_pages_with_cursor_and_orders() {
    let h = harness();
    for id in ["a", "b", "c"] {
        h.beat("lobby", id).await;
        h.clock.advance(Duration::from_secs(1));
    }
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({"id": "visitor", "kind": "guest"}),
    )
    .await
    .ok();

    let p1 = h.get("/v1/spaces/lobby/online?limit=2").await.ok();
    assert_eq!(p1["window_ms"], 600_000);
    let ids: Vec<&str> = p1["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c", "b"], "most recent first, users only");
    // No order asked: the memory store keeps times, so its default is
    // most recent first, and the answer says so.
    assert_eq!(p1["order"], "recent");
    let cursor = p1["next_cursor"].as_str().unwrap().to_owned();
    let p2 = h
        .get(&format!("/v1/spaces/lobby/online?limit=2&cursor={cursor}"))
        .await
        .ok();
    assert_eq!(p2["members"].as_array().unwrap().len(), 1);
    assert_eq!(p2["members"][0]["id"], "a");
    assert_eq!(p2["next_cursor"], Value::Null);
    assert_eq!(p2["order"], "recent");

    let by_id = h
        .get("/v1/spaces/lobby/online?order=id&kind=all&window=10m")
        .await
        .ok();
    let ids: Vec<&str> = by_id["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c", "visitor"]);
    assert_eq!(by_id["order"], "id");

    let guests = h.get("/v1/spaces/lobby/online?kind=guests").await.ok();
    assert_eq!(guests["members"][0]["kind"], "guest");
    assert_eq!(guests["members"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn leave_makes_members_offline() {
    let h = harness();
    h.beat("lobby", "alice").await;
    let a = h
        .post(
            "/v1/spaces/lobby/leave",
            json!({"members": [{"id": "alice"}, {"id": "bob"}]}),
        )
        .await
        .ok();
    assert_eq!(a, json!({"left": 1}));
    let m = h.get("/v1/spaces/lobby/members/alice").await.ok();
    assert_eq!(m["status"], "offline");
}

#[tokio::test]
async fn status_batch_answers_in_the_order_asked() {
    let h = harness();
    h.beat("lobby", "b").await;
    let a = h
        .post(
            "/v1/spaces/lobby/status",
            json!({"members": [{"id": "z"}, {"id": "b"}, {"id": "b", "kind": "guest"}]}),
        )
        .await
        .ok();
    let m = a["members"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m[0]["id"], "z");
    assert_eq!(m[0]["status"], "offline");
    assert_eq!(m[1]["status"], "online");
    assert_eq!(m[2]["kind"], "guest");
    assert_eq!(m[2]["status"], "offline");
}

#[tokio::test]
async fn online_among_an_ad_hoc_list() {
    let h = harness();
    h.beat("lobby", "a").await;
    h.clock.advance(Duration::from_secs(120));
    h.beat("lobby", "b").await;
    let a = h
        .post(
            "/v1/spaces/lobby/online-among",
            json!({"members": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}),
        )
        .await
        .ok();
    let ids: Vec<&str> = a["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b", "a"]);
    let a = h
        .post(
            "/v1/spaces/lobby/online-among",
            json!({"members": [{"id": "a"}, {"id": "b"}], "window": "1m", "limit": 5}),
        )
        .await
        .ok();
    assert_eq!(a["members"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn friends_set_add_remove_get_and_online() {
    let h = harness();
    let a = h
        .put("/v1/friends/me", json!({"friends": ["b", "c"]}))
        .await
        .ok();
    assert_eq!(a, json!({"friends": 2}));
    let a = h
        .post("/v1/friends/me/add", json!({"friends": ["d"]}))
        .await
        .ok();
    assert_eq!(a, json!({"friends": 3}));
    let a = h
        .post("/v1/friends/me/remove", json!({"friends": ["b"]}))
        .await
        .ok();
    assert_eq!(a, json!({"friends": 2}));
    let a = h.get("/v1/friends/me").await.ok();
    assert_eq!(a, json!({"user": "me", "friends": ["c", "d"]}));

    h.beat("lobby", "d").await;
    h.clock.advance(Duration::from_secs(1));
    h.beat("lobby", "c").await;
    h.beat("lobby", "stranger").await;
    let a = h.get("/v1/spaces/lobby/friends/me/online").await.ok();
    let ids: Vec<&str> = a["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c", "d"]);
    let a = h
        .get("/v1/spaces/lobby/friends/me/online?window=10m&limit=1")
        .await
        .ok();
    assert_eq!(a["members"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn space_config_get_and_put() {
    let h = harness();
    let c = h.get("/v1/spaces/room/config").await.ok();
    assert_eq!(
        c,
        json!({"online_ms": 60000, "away_ms": 300000, "window_ms": 600000, "retention_ms": 900000,
               "remember_ms": 2_592_000_000u64, "remember_guests": false, "grace_ms": 5000,
               "webhooks": []})
    );
    // The four thresholds alone: remembering and the grace keep what the
    // space had.
    let new =
        json!({"online_ms": 10000, "away_ms": 20000, "window_ms": 30000, "retention_ms": 40000});
    let full = json!({"online_ms": 10000, "away_ms": 20000, "window_ms": 30000,
                      "retention_ms": 40000, "remember_ms": 2_592_000_000u64,
                      "remember_guests": false, "grace_ms": 5000, "webhooks": []});
    assert_eq!(
        h.put("/v1/spaces/room/config", new.clone()).await.ok(),
        full
    );
    assert_eq!(h.get("/v1/spaces/room/config").await.ok(), full);

    // The grace: set alone it changes nothing else; 0 turns it off; past
    // five minutes, or not a whole number, it is refused naming itself.
    let graced = h
        .put(
            "/v1/spaces/room/config",
            json!({"online_ms": 10000, "away_ms": 20000, "window_ms": 30000,
                   "retention_ms": 40000, "grace_ms": 0}),
        )
        .await
        .ok();
    assert_eq!(graced["grace_ms"], 0);
    assert_eq!(graced["remember_ms"], 2_592_000_000u64);
    for bad in [json!(300_001), json!(-1), json!(1.5), json!("5s")] {
        let r = h
            .put(
                "/v1/spaces/room/config",
                json!({"online_ms": 10000, "away_ms": 20000, "window_ms": 30000,
                       "retention_ms": 40000, "grace_ms": bad}),
            )
            .await;
        let body = String::from_utf8_lossy(&r.body);
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "grace_ms {bad}: {body}");
        assert!(body.contains("grace_ms"), "grace_ms {bad}: {body}");
    }
    assert_eq!(h.get("/v1/spaces/room/config").await.ok()["grace_ms"], 0);

    // The new thresholds drive status.
    h.beat("room", "a").await;
    h.clock.advance(Duration::from_secs(11));
    let m = h.get("/v1/spaces/room/members/a").await.ok();
    assert_eq!(m["status"], "away");
}

#[tokio::test]
async fn spaces_are_listed_by_name() {
    let h = harness();
    h.beat("b-room", "x").await;
    h.beat("a-room", "x").await;
    h.post(
        "/v1/spaces/a-room/heartbeat",
        json!({"id": "g", "kind": "guest"}),
    )
    .await
    .ok();
    let a = h.get("/v1/spaces").await.ok();
    assert_eq!(
        a,
        json!({"spaces": [
            {"space": "a-room", "members": {"users": 1, "guests": 1}},
            {"space": "b-room", "members": {"users": 1, "guests": 0}},
        ]})
    );
    let a = h.get("/v1/spaces?after=a-room&limit=1").await.ok();
    assert_eq!(a["spaces"][0]["space"], "b-room");
}

#[tokio::test]
async fn history_serves_samples_within_range() {
    let h = harness();
    h.beat("lobby", "a").await;
    h.state.sample_history().await;
    h.clock.advance(Duration::from_secs(10));
    h.beat("lobby", "b").await;
    h.state.sample_history().await;

    let a = h.get("/v1/spaces/lobby/history").await.ok();
    assert_eq!(a["interval_ms"], 10_000);
    let s = a["samples"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0], json!({"at_ms": T0, "users": 1, "guests": 0}));
    assert_eq!(s[1]["users"], 2);

    let a = h.get("/v1/spaces/lobby/history?range=5s").await.ok();
    assert_eq!(a["samples"].as_array().unwrap().len(), 1);
    let a = h.get("/v1/spaces/other/history?range=24h").await.ok();
    assert_eq!(a["samples"], json!([]));
}

#[tokio::test]
async fn ticker_expires_members_and_records_metrics() {
    let h = harness();
    h.beat("lobby", "a").await;
    h.clock.advance(Duration::from_secs(16 * 60));
    let report = h.state.tick().await.unwrap();
    assert_eq!(report.expired, 1);
    h.state.update_gauges().await;
    let text = String::from_utf8(h.get("/metrics").await.body).unwrap();
    assert!(
        text.contains(r#"herenow_expired_total{store="memory"} 1"#),
        "{text}"
    );
    assert!(text.contains("herenow_sweep_duration_seconds"), "{text}");
    assert!(
        text.contains(r#"herenow_heartbeats_total{store="memory"} 1"#),
        "{text}"
    );
}

/// The alive-tasks gauge of `/metrics` (issue 37's soak test samples it).
#[tokio::test]
async fn metrics_count_the_runtimes_alive_tasks() {
    let h = harness();
    let tasks = |body: Vec<u8>| -> f64 {
        let text = String::from_utf8(body).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(r#"herenow_runtime_alive_tasks{store="memory"} "#))
            .unwrap_or_else(|| panic!("no alive-tasks gauge:\n{text}"))
            .parse()
            .unwrap()
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let held = tokio::spawn(async move {
        let _ = rx.await;
    });
    let with = tasks(h.get("/metrics").await.body);
    assert!(with >= 1.0, "{with}");
    drop(tx);
    held.await.unwrap();
    assert_eq!(tasks(h.get("/metrics").await.body), with - 1.0);
}

#[tokio::test]
async fn operations_endpoints() {
    let h = harness();
    let a = h.get("/healthz").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body, b"ok");
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);

    h.beat("lobby", "a").await;
    h.get("/v1/spaces/lobby/count").await.ok();
    h.state.update_gauges().await;
    let m = h.get("/metrics").await;
    assert_eq!(m.status, StatusCode::OK);
    let text = String::from_utf8(m.body).unwrap();
    for needle in [
        r#"herenow_heartbeats_total{store="memory"} 1"#,
        r#"herenow_queries_total{store="memory",endpoint="count"} 1"#,
        r#"herenow_space_members{store="memory",space="lobby",kind="user"} 1"#,
        "herenow_http_request_duration_seconds",
        r#"herenow_sse_subscribers{store="memory"} 0"#,
    ] {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
}

#[tokio::test]
async fn openapi_describes_every_endpoint_and_docs_are_served() {
    let h = harness();
    let doc = h.get("/openapi.json").await.ok();
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/v1/spaces/{space}/heartbeat",
        "/v1/spaces/{space}/heartbeats",
        "/v1/spaces/{space}/leave",
        "/v1/spaces/{space}/members/{id}",
        "/v1/spaces/{space}/status",
        "/v1/spaces/{space}/online",
        "/v1/spaces/{space}/count",
        "/v1/spaces/{space}/online-among",
        "/v1/friends/{user}",
        "/v1/friends/{user}/add",
        "/v1/friends/{user}/remove",
        "/v1/spaces/{space}/friends/{user}/online",
        "/v1/spaces/{space}/config",
        "/v1/spaces",
        "/v1/spaces/{space}/history",
        "/v1/spaces/{space}/events",
    ] {
        assert!(paths.contains_key(p), "openapi lacks {p}");
    }
    assert!(doc["components"]["schemas"]["Problem"].is_object());
    let docs = h.get("/docs/").await;
    assert_eq!(docs.status, StatusCode::OK);
    assert!(String::from_utf8_lossy(&docs.body).contains("swagger"));
}
