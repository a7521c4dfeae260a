//! Webhooks end to end over the memory store's outbox, to receivers on
//! loopback sockets (`support::receiver`): signatures checked by an
//! independent verifier, retries of 5xx, 429 (with `Retry-After`), hangs
//! and closed connections with the same `webhook-id`, refusals dropped and
//! counted, order per member, a slow endpoint that holds back neither
//! another nor heartbeats, overflow counted, and `GET /v1/webhooks`.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use herenow_core::{Heartbeat, ManualClock, Metadata, PresenceStore, SpaceName, WebhookOutbox};
use herenow_memory::MemoryStore;
use herenow_server::{AppState, Config};
use herenow_server::{WebhookConfig, WebhookEndpoint as Endpoint, WebhookSecret as Secret};
use serde_json::Value;
use support::receiver::{Receiver, Reply, said, verify};
use support::{T0, memory_state, memory_store, user_key};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A server's state with webhooks started, over a memory store.
struct Hooked {
    state: AppState,
    store: Arc<MemoryStore>,
    clock: ManualClock,
}

impl Drop for Hooked {
    fn drop(&mut self) {
        self.state.shutdown_token().cancel();
    }
}

/// Quick settings for tests: short polls and backoff; `specs` are
/// `--webhook` values signed by [`SECRET`].
fn webhooks(specs: &[String]) -> WebhookConfig {
    let secret: Secret = SECRET.parse().unwrap();
    WebhookConfig {
        endpoints: specs
            .iter()
            .enumerate()
            .map(|(i, s)| Endpoint::parse(s, i, Some(&secret)).unwrap())
            .collect(),
        timeout: Duration::from_secs(10),
        ..support::quick_webhooks()
    }
}

async fn hooked(config: WebhookConfig) -> Hooked {
    let clock = ManualClock::new(T0);
    let store = memory_store(&clock);
    hooked_over(store, clock, config).await
}

/// [`hooked`] over a store made (and written to) already.
async fn hooked_over(store: Arc<MemoryStore>, clock: ManualClock, config: WebhookConfig) -> Hooked {
    let config = Config {
        webhooks: config,
        ..Config::default()
    };
    let state = memory_state(store.clone(), &config);
    support::start_webhooks(&state).await;
    Hooked {
        state,
        store,
        clock,
    }
}

fn space(name: &str) -> SpaceName {
    SpaceName::new(name).unwrap()
}

async fn join(store: &MemoryStore, sp: &str, ids: &[&str]) {
    let beats: Vec<Heartbeat> = ids.iter().map(|id| Heartbeat::now(user_key(id))).collect();
    store.heartbeat(&space(sp), &beats).await.unwrap();
}

/// Waits (briefly yielding) until `check` holds of the endpoints' view.
async fn until(state: &AppState, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let view = serde_json::to_value(state.webhooks().view().await).unwrap();
        if check(&view) {
            return view;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: never happened; {view:#}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn delivers_signed_batches_that_an_independent_verifier_accepts() {
    // The verifier itself, on the specification's published vector.
    assert!(verify(
        SECRET,
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "1614265330",
        br#"{"test": 2432232314}"#,
        "v2,abc v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    ));
    assert!(!verify(
        SECRET,
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "1614265331",
        br#"{"test": 2432232314}"#,
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    ));

    let mut rx = Receiver::start().await;
    let h = hooked(webhooks(&[rx.url()])).await;
    join(&h.store, "lobby", &["ann", "bob"]).await;
    let got = rx.next().await;
    assert!(
        verify(SECRET, &got.id, &got.timestamp, &got.body, &got.signature),
        "{got:?}"
    );
    assert_eq!(got.content_type, "application/json");
    assert!(got.id.starts_with("msg_"));
    assert_eq!(got.timestamp, (T0 / 1000).to_string());
    let body: Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(body["type"], "presence.events");
    let mut events = got.events();
    while events.len() < 3 {
        events.extend(rx.next().await.events());
    }
    let mut kinds = said(&events);
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("join".into(), "ann".into()),
            ("join".into(), "bob".into()),
            ("occupied".into(), "-".into())
        ]
    );
    let ann = events.iter().find(|e| e["member"] == "ann").unwrap();
    assert_eq!(ann["kind"], "user");
    assert_eq!(ann["space"], "lobby");
    assert_eq!(ann["status"], "online");
    assert_eq!(ann["at_ms"], T0);
    assert!(ann["id"].is_string());
    // Delivered, so acknowledged: the outbox empties.
    let view = until(&h.state, "acknowledged", |v| v["outbox"]["depth"] == 0).await;
    assert_eq!(view["endpoints"][0]["delivered"], 3);
    assert_eq!(view["endpoints"][0]["state"], "ok");
}

#[tokio::test]
async fn a_5xx_is_retried_with_the_same_id_and_body() {
    let mut rx = Receiver::start().await;
    rx.script([Reply::Status(500), Reply::Status(503)]);
    let h = hooked(webhooks(&[rx.url()])).await;
    join(&h.store, "lobby", &["ann"]).await;
    let first = rx.next().await;
    let second = rx.next().await;
    let third = rx.next().await;
    assert_eq!(first.id, second.id);
    assert_eq!((&first.body, &second.id), (&third.body, &third.id));
    assert!(verify(
        SECRET,
        &third.id,
        &third.timestamp,
        &third.body,
        &third.signature
    ));
    let view = until(&h.state, "delivered", |v| {
        v["endpoints"][0]["delivered"] == 2
    })
    .await;
    let e = &view["endpoints"][0];
    assert_eq!(
        (e["retried"].as_u64(), e["failed"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(e["last_error"]["error"], "HTTP 503");
    assert_eq!(e["state"], "ok", "the last attempt succeeded");
}

#[tokio::test(start_paused = true)]
async fn a_429_waits_its_retry_after() {
    let mut rx = Receiver::start().await;
    rx.script([Reply::RetryAfter(30)]);
    let mut config = webhooks(&[rx.url()]);
    config.backoff_cap = Duration::from_secs(600);
    let h = hooked(config).await;
    join(&h.store, "lobby", &["ann"]).await;
    let first = rx.next_within(Duration::from_secs(120)).await;
    let second = rx.next_within(Duration::from_secs(120)).await;
    assert_eq!(first.id, second.id);
    let waited = second.at - first.at;
    assert!(
        waited >= Duration::from_secs(30) && waited < Duration::from_secs(31),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hanging_receiver_times_out_and_is_retried() {
    let mut rx = Receiver::start().await;
    rx.script([Reply::Hang]);
    let h = hooked(webhooks(&[rx.url()])).await;
    join(&h.store, "lobby", &["ann"]).await;
    let first = rx.next_within(Duration::from_secs(120)).await;
    let second = rx.next_within(Duration::from_secs(120)).await;
    assert_eq!(first.id, second.id);
    assert!(
        second.at - first.at >= Duration::from_secs(10),
        "after the timeout"
    );
    let view = until(&h.state, "delivered", |v| {
        v["endpoints"][0]["delivered"] == 2
    })
    .await;
    assert_eq!(view["endpoints"][0]["last_error"]["error"], "timeout");
}

#[tokio::test]
async fn a_closed_connection_is_retried() {
    let mut rx = Receiver::start().await;
    rx.script([Reply::Close]);
    let h = hooked(webhooks(&[rx.url()])).await;
    join(&h.store, "lobby", &["ann"]).await;
    let first = rx.next().await;
    let second = rx.next().await;
    assert_eq!(first.id, second.id);
    let view = until(&h.state, "delivered", |v| {
        v["endpoints"][0]["delivered"] == 2
    })
    .await;
    assert_eq!(view["endpoints"][0]["failed"], 1);
}

#[tokio::test]
async fn a_refusal_drops_the_batch_and_counts_it() {
    let mut rx = Receiver::start().await;
    rx.script([Reply::Status(410)]);
    let h = hooked(webhooks(&[rx.url()])).await;
    join(&h.store, "lobby", &["ann"]).await;
    let refused = rx.next().await;
    let n = refused.events().len() as u64;
    let view = until(&h.state, "dropped", |v| {
        v["endpoints"][0]["dropped"]["rejected"] == n && v["outbox"]["depth"] == 0
    })
    .await;
    assert_eq!(view["endpoints"][0]["state"], "failing");
    assert_eq!(view["endpoints"][0]["last_error"]["error"], "HTTP 410");
    // Later events go on.
    join(&h.store, "lobby", &["bob"]).await;
    assert_eq!(
        said(&rx.next().await.events()),
        [("join".into(), "bob".into())]
    );
}

#[tokio::test]
async fn a_failing_batch_is_retried_until_its_oldest_event_is_max_age_old() {
    let mut rx = Receiver::start().await;
    rx.script([Reply::Status(503); 50]);
    let mut config = webhooks(&[rx.url()]);
    config.max_age = Duration::from_secs(60);
    let h = hooked(config).await;
    join(&h.store, "lobby", &["ann"]).await;
    let n = rx.next().await.events().len() as u64;
    // Retried while the events are younger than a minute by the store's
    // clock, whenever their first attempt was; dropped once they are not.
    h.clock.advance(Duration::from_secs(60));
    let view = until(&h.state, "expired", |v| {
        v["endpoints"][0]["dropped"]["expired"] == n && v["outbox"]["depth"] == 0
    })
    .await;
    assert_eq!(view["endpoints"][0]["delivered"], 0);
    assert_eq!(view["endpoints"][0]["last_error"]["error"], "HTTP 503");
}

#[tokio::test]
async fn events_past_max_age_when_claimed_are_dropped_without_a_request() {
    // Events captured while no server delivered (the store's outbox was
    // open, say by another server, and nothing claimed for two hours).
    let clock = ManualClock::new(T0);
    let store = memory_store(&clock);
    store
        .outbox_open(herenow_core::outbox::OutboxOptions::default())
        .await
        .unwrap();
    join(&store, "lobby", &["ann"]).await;
    clock.advance(Duration::from_secs(2 * 3600));
    let mut rx = Receiver::start().await;
    let mut config = webhooks(&[rx.url()]);
    config.max_age = Duration::from_secs(3600);
    let h = hooked_over(store, clock, config).await;
    join(&h.store, "lobby", &["bob"]).await;
    // The first request holds only the fresh event: ann's join and the
    // space's `occupied` are two hours old.
    let got = rx.next().await.events();
    assert_eq!(said(&got), [("join".into(), "bob".into())]);
    let view = until(&h.state, "acknowledged", |v| {
        v["endpoints"][0]["delivered"] == 1 && v["outbox"]["depth"] == 0
    })
    .await;
    assert_eq!(view["endpoints"][0]["dropped"]["expired"], 2);
    assert!(rx.try_next().is_none());
}

#[tokio::test]
async fn each_members_events_arrive_in_order_through_retries() {
    let mut rx = Receiver::start().await;
    rx.script([
        Reply::Status(500),
        Reply::Ok,
        Reply::Close,
        Reply::Ok,
        Reply::Status(502),
    ]);
    let h = hooked(webhooks(&[format!(
        "{},events=join,update,leave",
        rx.url()
    )]))
    .await;
    let members: Vec<String> = (0..30).map(|i| format!("m{i}")).collect();
    let mut expected = 0;
    for round in 0..3 {
        for (i, m) in members.iter().enumerate() {
            let sp = space(&format!("room:{}", i % 4));
            let meta = Metadata::from_json(&format!(r#"{{"round":{round}}}"#)).unwrap();
            h.store
                .heartbeat(
                    &sp,
                    &[Heartbeat {
                        member: user_key(m),
                        at_ms: None,
                        meta: Some(meta),
                    }],
                )
                .await
                .unwrap();
            expected += 1;
        }
    }
    for (i, m) in members.iter().enumerate() {
        h.store
            .leave(&space(&format!("room:{}", i % 4)), &[user_key(m)])
            .await
            .unwrap();
        expected += 1;
    }
    // Retries deliver a batch again: keep the first sighting of each id.
    let mut seen = std::collections::HashSet::new();
    let mut per_member: HashMap<String, Vec<String>> = HashMap::new();
    while seen.len() < expected {
        for e in rx.next().await.events() {
            if seen.insert(e["id"].as_str().unwrap().to_owned()) {
                per_member
                    .entry(e["member"].as_str().unwrap().to_owned())
                    .or_default()
                    .push(e["type"].as_str().unwrap().to_owned());
            }
        }
    }
    for m in &members {
        assert_eq!(
            per_member[m],
            ["join", "update", "update", "leave"],
            "{m}: its events in order"
        );
    }
}

#[tokio::test]
async fn a_dead_endpoint_holds_back_neither_another_nor_heartbeats() {
    let mut dead = Receiver::start().await;
    dead.script([Reply::Hang; 64]);
    let mut live = Receiver::start().await;
    let mut config = webhooks(&[
        format!("{},name=dead", dead.url()),
        format!("{},name=live", live.url()),
    ]);
    config.queue_limit = 5;
    let h = hooked(config).await;
    let api = support::http::Api::over(h.state.clone(), h.clock.clone());
    let started = tokio::time::Instant::now();
    for i in 0..40 {
        // Through the HTTP API: heartbeats answer while an endpoint hangs.
        api.beat("lobby", &format!("u{i}")).await;
    }
    // 40 joins and an occupied reach the live endpoint.
    let events = live.events(41).await;
    assert_eq!(events.len(), 41);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the live endpoint waited on the dead one: {:?}",
        started.elapsed()
    );
    let _ = dead.next().await;
    let view = until(&h.state, "overflow counted", |v| {
        v["endpoints"][0]["dropped"]["overflow"].as_u64() > Some(0)
            && v["endpoints"][1]["delivered"] == 41
    })
    .await;
    let deadq = &view["endpoints"][0];
    assert!(deadq["queue"]["depth"].as_u64() <= Some(5), "{deadq}");
    assert_eq!(view["endpoints"][1]["dropped"]["overflow"], 0);
    assert_eq!(view["endpoints"][1]["delivered"], 41);
}

#[tokio::test]
async fn with_every_queue_full_events_wait_in_the_outbox() {
    let mut dead = Receiver::start().await;
    dead.script([Reply::Hang; 64]);
    let mut config = webhooks(&[dead.url()]);
    config.queue_limit = 3;
    let h = hooked(config).await;
    for i in 0..20 {
        join(&h.store, "lobby", &[&format!("u{i}")]).await;
    }
    let _ = dead.next().await;
    let view = until(&h.state, "queue full", |v| {
        v["endpoints"][0]["queue"]["depth"] == 3
    })
    .await;
    // Nothing is dropped: what no queue can take stays in the store.
    assert_eq!(view["endpoints"][0]["dropped"]["overflow"], 0);
    assert_eq!(view["outbox"]["depth"], 21);
}

#[tokio::test]
async fn an_event_no_endpoint_wants_is_acknowledged_at_once() {
    let mut rx = Receiver::start().await;
    let h = hooked(webhooks(&[format!(
        "{},events=leave,spaces=room:*",
        rx.url()
    )]))
    .await;
    join(&h.store, "lobby", &["ann"]).await;
    join(&h.store, "room:1", &["bob"]).await;
    h.store
        .leave(&space("room:1"), &[user_key("bob")])
        .await
        .unwrap();
    let got = rx.next().await.events();
    assert_eq!(said(&got), [("leave".into(), "bob".into())]);
    assert_eq!(got[0]["reason"], "explicit");
    until(&h.state, "all acknowledged", |v| v["outbox"]["depth"] == 0).await;
}

#[tokio::test]
async fn get_webhooks_needs_a_write_key_and_never_shows_secrets() {
    let rx = Receiver::start().await;
    let mut hooks = webhooks(&[format!("{}?token=hunter2,name=site,events=join", rx.url())]);
    hooks.queue_limit = 7;
    let config = Config {
        api_keys: vec![
            "reader-key-1:read".parse().unwrap(),
            "writer-key-1:write".parse().unwrap(),
        ],
        webhooks: hooks,
        ..Config::default()
    };
    let clock = ManualClock::new(T0);
    let state = memory_state(memory_store(&clock), &config);
    support::start_webhooks(&state).await;
    let api = support::http::Api::over(state.clone(), clock);
    let get = |key| support::http::request(axum::http::Method::GET, "/v1/webhooks", None, key);
    api.call(get(Some("reader-key-1")))
        .await
        .problem(axum::http::StatusCode::FORBIDDEN, "insufficient-scope");
    let answer = api.call(get(Some("writer-key-1"))).await;
    let body = answer.ok();
    let text = body.to_string();
    assert!(
        !text.contains("hunter2") && !text.contains("MfKQ9r8"),
        "{text}"
    );
    assert_eq!(body["enabled"], true);
    assert!(body["consumer"].is_string());
    let e = &body["endpoints"][0];
    assert_eq!(e["name"], "site");
    assert_eq!(e["url"], format!("{}?***", rx.url()));
    assert_eq!(e["events"], serde_json::json!(["join"]));
    assert_eq!(e["spaces"], Value::Null);
    assert_eq!(e["state"], "ok");
    assert_eq!(e["queue"], serde_json::json!({"depth": 0, "limit": 7}));
    assert_eq!(
        e["dropped"],
        serde_json::json!({"overflow": 0, "rejected": 0, "expired": 0})
    );
    assert_eq!(body["outbox"]["depth"], 0);
    state.shutdown_token().cancel();

    // Without webhooks: an empty list, and the store keeps no outbox.
    let off = support::http::Api::memory(Config::default());
    let body = off.get("/v1/webhooks").await.ok();
    assert_eq!(body["enabled"], false);
    assert_eq!(body["endpoints"], serde_json::json!([]));
    assert_eq!(body["outbox"], Value::Null);
    let doc = off.get("/openapi.json").await.ok();
    assert!(
        doc["paths"]["/v1/webhooks"]["get"].is_object(),
        "documented"
    );
    for schema in ["WebhooksView", "EndpointView", "EndpointHealth"] {
        assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
    }
}

#[tokio::test]
async fn metrics_count_per_endpoint() {
    let rx = Receiver::start().await;
    rx.script([Reply::Status(500)]);
    let h = hooked(webhooks(&[format!("{},name=site", rx.url())])).await;
    join(&h.store, "lobby", &["ann"]).await;
    until(&h.state, "delivered and acknowledged", |v| {
        v["endpoints"][0]["delivered"] == 2 && v["outbox"]["depth"] == 0
    })
    .await;
    h.state.update_gauges().await;
    let text = h.state.metrics().render();
    for line in [
        r#"herenow_webhook_delivered_total{store="memory",endpoint="site"} 2"#,
        r#"herenow_webhook_retries_total{store="memory",endpoint="site"} 1"#,
        r#"herenow_webhook_failures_total{store="memory",endpoint="site"} 1"#,
        r#"herenow_webhook_queue_depth{store="memory",endpoint="site"} 0"#,
        r#"herenow_webhook_outbox_depth{store="memory"} 0"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(text.contains("herenow_webhook_request_duration_seconds_bucket"));
}

#[tokio::test]
async fn more_events_than_one_acknowledgement_holds_are_all_acknowledged() {
    // A busy round finishes more events than a store takes ids in one
    // acknowledgement (10,000): they are acknowledged in parts, not
    // retried whole forever (a bug the webhook_load example found).
    let mut rx = Receiver::start().await;
    // Rounds far apart, so deliveries finished meanwhile pile up.
    let h = hooked(WebhookConfig {
        poll: Duration::from_millis(500),
        ..webhooks(&[rx.url()])
    })
    .await;
    let sp = space("crowd");
    let beats: Vec<Heartbeat> = (0..30_000)
        .map(|i| Heartbeat::now(user_key(&format!("u{i}"))))
        .collect();
    for chunk in beats.chunks(10_000) {
        h.store.heartbeat(&sp, chunk).await.unwrap();
    }
    let mut received = 0;
    while received < 30_001 {
        received += rx.next().await.events().len();
    }
    until(&h.state, "all acknowledged", |v| v["outbox"]["depth"] == 0).await;
}
