//! The API through the router over a `RedisStore`, against a
//! `redis-server` (and a 3-master cluster) the tests start themselves:
//! the same answers as over memory, `/readyz` following Redis, reads that
//! answer `503` with `Retry-After` while Redis is gone, and metrics
//! labelled with the store.
//!
//! Time is a `ManualClock` shared by the store and the test, so statuses
//! are exact; nothing sleeps to wait for state.

mod support;

use herenow_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use herenow_core::{ManualClock, PresenceStore, SpaceConfig};
use herenow_redis::{
    LayoutOptions, Observer, RedisOptions, RedisStore, SeedLayout, SeedLayoutStore,
};
use herenow_server::Metrics;
use herenow_server::{AppState, Backend, Config};
use serde_json::{Value, json};
use support::http::Api;
use support::{T0, redis_state, seed_state};

use common::{RedisCluster, RedisServer};

/// The command timeout of the tests that kill Redis, so that their calls
/// fail sooner than after the default's 2 s.
const FAIL_FAST: Duration = Duration::from_millis(500);

/// The API over a `RedisStore` at `url`, and the store, whose readiness
/// and buffer the tests watch. The store reports its calls to the
/// metrics the API serves, as `Backend::open` connects it.
async fn harness(url: &str) -> (Api, Arc<RedisStore>) {
    harness_with(url, RedisOptions::default()).await
}

/// [`harness`] over a store with `options` (its observer set here). The
/// tests that kill Redis pass a short timeout ([`FAIL_FAST`]); the others
/// keep the default, which a fresh cluster's first calls on a loaded
/// machine need (a script on a node not yet connected took over 500 ms).
async fn harness_with(url: &str, options: RedisOptions) -> (Api, Arc<RedisStore>) {
    let clock = ManualClock::new(T0);
    let metrics = Metrics::for_store("redis");
    let options = RedisOptions {
        observer: Observer::new(Arc::new(metrics.clone())),
        ..options
    };
    let store = RedisStore::connect(
        url,
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        options,
    )
    .await
    .expect("connect to the test's redis-server");
    let store = Arc::new(store);
    let state = AppState::new(
        Backend::redis(store.clone()).with_metrics(metrics),
        &Config::default(),
    );
    (Api::over(state, clock), store)
}

/// The value of the sample of `/metrics` named `name` whose labels
/// include every one of `labels` (`op="heartbeat"`), 0 if there is none.
async fn sample(h: &Api, name: &str, labels: &[&str]) -> f64 {
    let answer = h.get("/metrics").await;
    let text = String::from_utf8_lossy(&answer.body);
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn ids(page: &Value) -> Vec<&str> {
    page["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no members in {page}"))
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect()
}

/// Heartbeats, lists, counts, last seen, status, friends and readiness:
/// what a client sees must not depend on the store behind the API.
async fn endpoints_answer_as_over_memory(h: &Api) {
    let a = h
        .post(
            "/v1/spaces/lobby/heartbeat",
            json!({"id": "ada", "meta": {"name": "Ada"}}),
        )
        .await
        .ok();
    assert_eq!(a, json!({"accepted": 1, "joined": 1, "stale": 0}));
    h.clock.advance(Duration::from_millis(10));
    let b = h
        .post(
            "/v1/spaces/lobby/heartbeats",
            json!({"heartbeats": [{"id": "grace"}, {"id": "10.0.0.7", "kind": "guest"}]}),
        )
        .await
        .ok();
    assert_eq!(b["accepted"], 2);
    assert_eq!(b["joined"], 2);

    let online = h.get("/v1/spaces/lobby/online?kind=all").await.ok();
    assert_eq!(ids(&online), ["grace", "10.0.0.7", "ada"]);
    let users = h.get("/v1/spaces/lobby/online").await.ok();
    assert_eq!(ids(&users), ["grace", "ada"]);

    let count = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(count["users"], 2);
    assert_eq!(count["guests"], 1);
    assert_eq!(count["total"], 3);

    let ada = h.get("/v1/spaces/lobby/members/ada").await.ok();
    assert_eq!(ada["last_seen_ms"], T0);
    assert_eq!(ada["status"], "online");
    assert_eq!(ada["meta"], json!({"name": "Ada"}));

    h.clock.advance(Duration::from_secs(90));
    let status = h
        .post(
            "/v1/spaces/lobby/status",
            json!({"members": [{"id": "ada"}, {"id": "nobody"}]}),
        )
        .await
        .ok();
    let statuses: Vec<&str> = status["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["away", "offline"], "{status}");

    h.put("/v1/friends/ada", json!({"friends": ["grace", "linus"]}))
        .await
        .ok();
    h.post("/v1/spaces/lobby/heartbeat", json!({"id": "grace"}))
        .await
        .ok();
    let friends = h.get("/v1/spaces/lobby/friends/ada/online").await.ok();
    assert_eq!(ids(&friends), ["grace"]);

    let left = h
        .post(
            "/v1/spaces/lobby/leave",
            json!({"members": [{"id": "grace"}]}),
        )
        .await
        .ok();
    assert_eq!(left["left"], 1, "{left}");
    let count = h.get("/v1/spaces/lobby/count").await.ok();
    assert_eq!(count["users"], 1);

    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn endpoints_answer_as_over_memory_on_a_redis_server() {
    let redis = RedisServer::standalone();
    let (h, _store) = harness(&redis.url()).await;
    endpoints_answer_as_over_memory(&h).await;

    let metrics = String::from_utf8(h.get("/metrics").await.body).unwrap();
    assert!(
        metrics.contains(r#"store="redis""#),
        "no store label:\n{metrics}"
    );
}

#[tokio::test]
async fn endpoints_answer_as_over_memory_on_a_redis_cluster() {
    let cluster = RedisCluster::start();
    let (h, _store) = harness(&cluster.url()).await;
    endpoints_answer_as_over_memory(&h).await;
}

#[tokio::test]
async fn without_redis_reads_are_503_heartbeats_wait_and_readyz_says_not_ready() {
    let mut redis = RedisServer::standalone();
    let options = RedisOptions {
        timeout: FAIL_FAST,
        ..RedisOptions::default()
    };
    let (h, store) = harness_with(&redis.url(), options).await;
    h.post("/v1/spaces/lobby/heartbeat", json!({"id": "ada"}))
        .await
        .ok();
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
    // Every call is timed by what it was for.
    let calls = "herenow_redis_command_duration_seconds_count";
    assert!(sample(&h, calls, &[r#"op="heartbeat""#]).await >= 1.0);
    assert!(sample(&h, calls, &[r#"op="count""#]).await >= 1.0);
    let failed = "herenow_redis_errors_total";
    assert_eq!(sample(&h, failed, &[]).await, 0.0);

    redis.kill();
    // Accepted into the store's buffer: a client never loses a heartbeat
    // to an outage it cannot see.
    h.clock.advance(Duration::from_secs(1));
    let beat = h
        .post("/v1/spaces/lobby/heartbeat", json!({"id": "grace"}))
        .await;
    assert!(beat.status.is_success(), "{}", beat.status);
    h.get("/v1/spaces/lobby/online")
        .await
        .unavailable("store-unavailable");
    h.get("/readyz").await.unavailable("not-ready");
    assert!(!store.is_ready());
    // The read that failed is counted as unavailable, by what it was for.
    assert!(
        sample(&h, failed, &[r#"op="list""#, r#"outcome="unavailable""#]).await >= 1.0,
        "{}",
        String::from_utf8_lossy(&h.get("/metrics").await.body)
    );

    redis.start_again();
    // The store's replayer writes the buffer back once Redis answers; wait
    // for that with a deadline (it pings with a backoff under a second).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !store.is_ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "buffer not written back: {:?}",
            store.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
    // Redis restarted empty (no persistence): only what was buffered is
    // there, with its time.
    let grace = h.get("/v1/spaces/lobby/members/grace").await.ok();
    assert_eq!(grace["last_seen_ms"], T0 + 1_000);
}

/// A server that only writes sends Redis nothing while its heartbeats
/// wait in the buffer but the replayer's pings, which back off (here for
/// an hour). Readiness probes, which come often exactly then, each ping
/// Redis in the background: the first answered ends the backoff, the
/// buffer goes back, and a probe says ready.
#[tokio::test]
async fn readiness_probes_bring_a_write_only_server_back_without_the_backoff() {
    let mut redis = RedisServer::standalone();
    let hour = Duration::from_secs(3_600);
    let options = RedisOptions {
        timeout: FAIL_FAST,
        backoff_min: hour,
        backoff_max: hour,
        ..RedisOptions::default()
    };
    let (h, store) = harness_with(&redis.url(), options).await;
    redis.kill();
    h.post("/v1/spaces/lobby/heartbeat", json!({"id": "ada"}))
        .await
        .ok();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while store.stats().redis_up {
        assert!(
            std::time::Instant::now() < deadline,
            "Redis never seen down"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.get("/readyz").await.unavailable("not-ready");
    redis.start_again();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while h.get("/readyz").await.status != StatusCode::OK {
        assert!(
            std::time::Instant::now() < deadline,
            "never ready: {:?}",
            store.stats()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.stats().replayed, 1);
    let ada = h.get("/v1/spaces/lobby/members/ada").await.ok();
    assert_eq!(ada["last_seen_ms"], T0);
}

/// The system clock moved by a fixed offset: a server whose clock is
/// wrong.
struct Skewed(i64);

impl herenow_core::Clock for Skewed {
    fn now_ms(&self) -> herenow_core::Millis {
        let now = herenow_core::Clock::now_ms(&herenow_core::SystemClock) as i64;
        (now + self.0) as u64
    }
}

/// A server over `url` whose clock is `offset_ms` ahead of the machine's,
/// watching its skew as `herenow serve` does.
async fn skewed(url: &str, offset_ms: i64) -> (herenow_server::App, Arc<RedisStore>) {
    let store = RedisStore::connect(
        url,
        Arc::new(Skewed(offset_ms)),
        SpaceConfig::default(),
        RedisOptions {
            max_clock_skew: Some(Duration::from_secs(5)),
            ..RedisOptions::default()
        },
    )
    .await
    .expect("connect to the test's redis-server");
    let store = Arc::new(store);
    let app = herenow_server::app(redis_state(store.clone(), &Config::default()));
    (app, store)
}

#[tokio::test]
async fn issue_13_two_seconds_of_skew_stay_right_ten_minutes_are_reported() {
    let redis = RedisServer::standalone();
    let (on_time, _) = skewed(&redis.url(), 0).await;
    let (ahead, ahead_store) = skewed(&redis.url(), 2_000).await;
    // 2 s ahead: within the bound, ready, and statuses agree whichever
    // server wrote or reads.
    let skew = ahead_store.clock_skew().expect("measured at connect");
    assert!((-2_500..=-1_500).contains(&skew), "{skew}");
    assert_eq!(
        support::http::get(&ahead, "/readyz").await.status,
        StatusCode::OK
    );
    support::http::post_json(&on_time, "/v1/spaces/room/heartbeat", &json!({"id": "ann"}))
        .await
        .ok();
    support::http::post_json(&ahead, "/v1/spaces/room/heartbeat", &json!({"id": "bob"}))
        .await
        .ok();
    // Ann heartbeats again on the server on time, after Bob's future-dated
    // beat: both are online on both servers.
    support::http::post_json(&on_time, "/v1/spaces/room/heartbeat", &json!({"id": "ann"}))
        .await
        .ok();
    for app in [&on_time, &ahead] {
        let page = support::http::get(app, "/v1/spaces/room/online").await.ok();
        let mut got = ids(&page);
        got.sort_unstable();
        assert_eq!(got, ["ann", "bob"]);
        for m in page["members"].as_array().unwrap() {
            assert_eq!(m["status"], "online", "{m}");
        }
    }

    // 10 minutes ahead: detected at connect and reported, never silent.
    let (far, far_store) = skewed(&redis.url(), 600_000).await;
    let skew = far_store.clock_skew_exceeded().expect("past the bound");
    assert!((-600_500..=-599_500).contains(&skew), "{skew}");
    let a = support::http::get(&far, "/readyz").await;
    a.unavailable("not-ready");
    let detail = a.json()["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains("clock differs from Redis"), "{detail}");
}

/// Issue 13, "Seed 000 in place": over seed 000's sets, which hold no
/// times, `GET online` without an order (what `herenow online site`
/// sends) answers by id and says `"order": "id"`, page after page; asking
/// for `order=recent` is still a clear 501. Over herenow's own layout the
/// default stays most recent first, and says so.
#[tokio::test]
async fn issue_13_seed_000_online_without_an_order_is_by_id() {
    let redis = RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let store = SeedLayoutStore::connect(
        &redis.url(),
        SeedLayout::Rotation,
        "wo_user_{generation}",
        None,
        Arc::new(clock.clone()),
        SpaceConfig::default(),
        LayoutOptions::default(),
    )
    .await
    .expect("connect to the test's redis-server");
    let h = Api::over(seed_state(Arc::new(store), &Config::default()), clock);
    let beats: Vec<Value> = ["erin", "alice", "dave", "carol", "bob"]
        .iter()
        .map(|id| json!({"id": id}))
        .collect();
    h.post("/v1/spaces/site/heartbeats", json!({ "heartbeats": beats }))
        .await
        .ok();

    let mut got = Vec::new();
    let mut uri = "/v1/spaces/site/online?limit=2".to_owned();
    loop {
        let page = h.get(&uri).await.ok();
        assert_eq!(page["order"], "id", "{page}");
        got.extend(ids(&page).into_iter().map(str::to_owned));
        match page["next_cursor"].as_str() {
            Some(c) => uri = format!("/v1/spaces/site/online?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(got, ["alice", "bob", "carol", "dave", "erin"]);
    let by_id = h.get("/v1/spaces/site/online?order=id").await.ok();
    assert_eq!(by_id["order"], "id");
    h.get("/v1/spaces/site/online?order=recent")
        .await
        .problem(StatusCode::NOT_IMPLEMENTED, "unsupported");

    let own = RedisServer::standalone();
    let (h, _store) = harness(&own.url()).await;
    h.beat("site", "ada").await;
    let page = h.get("/v1/spaces/site/online").await.ok();
    assert_eq!(
        (ids(&page), &page["order"]),
        (vec!["ada"], &json!("recent"))
    );
}

/// Endpoints in Redis that are not herenow's JSON (a hand-edited key):
/// reading them is a `500` naming them, a `PUT` that does not set them
/// fails before it changes the policy, and one that sets them repairs the
/// space.
#[tokio::test]
async fn unreadable_endpoints_are_replaced_by_a_put_and_block_no_policy_write_half_way() {
    let redis = RedisServer::standalone();
    let (h, store) = harness(&redis.url()).await;
    let policy = json!({
        "online_ms": 30_000, "away_ms": 60_000, "window_ms": 60_000,
        "retention_ms": 120_000,
    });
    h.put("/v1/spaces/broken/config", policy).await.ok();
    common::raw_command(redis.port, "SET herenow:{broken}:hooks not-json").unwrap();

    h.get("/v1/spaces/broken/config")
        .await
        .problem(StatusCode::INTERNAL_SERVER_ERROR, "internal");
    let policy_only = json!({
        "online_ms": 10_000, "away_ms": 20_000, "window_ms": 20_000,
        "retention_ms": 40_000,
    });
    h.put("/v1/spaces/broken/config", policy_only)
        .await
        .problem(StatusCode::INTERNAL_SERVER_ERROR, "internal");
    let kept = store
        .config(&herenow_core::SpaceName::new("broken").unwrap())
        .await
        .unwrap();
    assert_eq!(
        (kept.online_ms, kept.retention_ms),
        (30_000, 120_000),
        "the refused call changed the policy"
    );

    let repair = json!({
        "online_ms": 10_000, "away_ms": 20_000, "window_ms": 20_000,
        "retention_ms": 40_000,
        "webhooks": [{"url": "https://hooks.example.com/presence", "events": ["join"],
                      "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}],
    });
    let set = h.put("/v1/spaces/broken/config", repair).await.ok();
    let read = h.get("/v1/spaces/broken/config").await.ok();
    assert_eq!(set, read, "the answer shows what a read finds");
    assert_eq!(
        read["webhooks"][0]["url"], "https://hooks.example.com/presence",
        "{read}"
    );
    assert_eq!(read["online_ms"], 10_000, "{read}");
}
