//! The API through the router over a `RedisStore`, against a
//! `redis-server` (and a 3-master cluster) the tests start themselves:
//! the same answers as over memory, `/readyz` following Redis, reads that
//! answer `503` with `Retry-After` while Redis is gone, and metrics
//! labelled with the store.
//!
//! Time is a `ManualClock` shared by the store and the test, so statuses
//! are exact; nothing sleeps to wait for state.

use herenow_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use herenow_core::{ManualClock, SpaceConfig};
use herenow_redis::{RedisOptions, RedisStore};
use herenow_server::{AppState, Config, app};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use common::{RedisCluster, RedisServer};

const T0: u64 = 1_700_000_000_000;

struct Harness {
    app: Router,
    clock: ManualClock,
    store: Arc<RedisStore>,
}

async fn harness(url: &str) -> Harness {
    let clock = ManualClock::new(T0);
    let options = RedisOptions {
        timeout: Duration::from_millis(500),
        ..RedisOptions::default()
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
    let state = AppState::with_redis(store.clone(), &Config::default());
    Harness {
        app: app(state),
        clock,
        store,
    }
}

struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {:?} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    #[track_caller]
    fn ok(&self) -> Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        self.json()
    }

    #[track_caller]
    fn unavailable(&self, code: &str) {
        assert_eq!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.json()["code"], code);
        assert!(self.retry_after.is_some(), "503 without Retry-After");
    }
}

impl Harness {
    async fn send(&self, method: Method, uri: &str, body: Option<Value>) -> Answer {
        let b = Request::builder().method(method).uri(uri);
        let request = match body {
            Some(v) => b
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(serde_json::to_vec(&v).unwrap()))
                .unwrap(),
            None => b.body(Body::empty()).unwrap(),
        };
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        Answer {
            status,
            retry_after,
            body,
        }
    }

    async fn get(&self, uri: &str) -> Answer {
        self.send(Method::GET, uri, None).await
    }

    async fn post(&self, uri: &str, body: Value) -> Answer {
        self.send(Method::POST, uri, Some(body)).await
    }

    async fn put(&self, uri: &str, body: Value) -> Answer {
        self.send(Method::PUT, uri, Some(body)).await
    }
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
async fn endpoints_answer_as_over_memory(h: &Harness) {
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
    let h = harness(&redis.url()).await;
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
    let h = harness(&cluster.url()).await;
    endpoints_answer_as_over_memory(&h).await;
}

#[tokio::test]
async fn without_redis_reads_are_503_heartbeats_wait_and_readyz_says_not_ready() {
    let mut redis = RedisServer::standalone();
    let h = harness(&redis.url()).await;
    h.post("/v1/spaces/lobby/heartbeat", json!({"id": "ada"}))
        .await
        .ok();
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);

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
    assert!(!h.store.is_ready());

    redis.start_again();
    // The store's replayer writes the buffer back once Redis answers; wait
    // for that with a deadline (it pings with a backoff under a second).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !h.store.is_ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "buffer not written back: {:?}",
            h.store.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
    // Redis restarted empty (no persistence): only what was buffered is
    // there, with its time.
    let grace = h.get("/v1/spaces/lobby/members/grace").await.ok();
    assert_eq!(grace["last_seen_ms"], T0 + 1_000);
}
