//! Issue 37: `/metrics` as operators expect. Every family has a `# HELP`
//! and a `# TYPE` line; on a server whose API requires keys it needs a
//! read key (`401` problem without one, as the API), and without keys it
//! is open; endpoints spaces name share one `endpoint="spaces"` label.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use herenow_core::{OutboxStats, TickReport};
use herenow_server::{Config, Metrics};
use support::http::{Api, request};

const READ_KEY: &str = "reader-secret-1";
const WRITE_KEY: &str = "writer-secret-1";

/// The families of an exposition that have a `# TYPE`, and those that
/// have a `# HELP`.
fn families(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut typed = BTreeSet::new();
    let mut helped = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("#"), Some("TYPE"), Some(name)) => {
                typed.insert(name.to_owned());
            }
            (Some("#"), Some("HELP"), Some(name)) => {
                let help: Vec<&str> = words.collect();
                assert!(!help.is_empty(), "an empty HELP: {line}");
                helped.insert(name.to_owned());
            }
            _ => {}
        }
    }
    (typed, helped)
}

#[test]
fn every_family_has_help_and_type() {
    let m = Metrics::for_store("memory");
    m.heartbeats(3);
    m.erasure();
    m.sweep(
        Duration::from_millis(2),
        &TickReport {
            expired: 1,
            forgotten: 1,
            transitions: 1,
            ..TickReport::default()
        },
    );
    m.space_members("lobby", 2, 1);
    m.sse_subscribers(1);
    m.ws_connections(2);
    m.ws_message("ping");
    m.ws_error("bad-token");
    m.ws_close(4001);
    m.runtime_alive_tasks(3);
    m.watch_usage(4, 2);
    m.request(
        "/v1/spaces/{space}/heartbeat",
        "POST",
        Duration::from_millis(1),
    );
    let hook = m.webhook("site");
    hook.delivered(1, Duration::from_millis(3));
    hook.failed(Duration::from_millis(3));
    hook.retried();
    hook.queue_depth(1);
    let space = m.space_webhook();
    space.delivered(1, Duration::from_millis(3));
    m.webhook_outbox(&OutboxStats::default());
    m.webhook_space_endpoint_skipped();
    #[cfg(feature = "redis")]
    {
        m.redis(&herenow_redis::RedisStats::default());
        m.redis_call(
            "heartbeat",
            Duration::from_micros(80),
            herenow_redis::CallOutcome::Ok,
        );
        m.redis_call(
            "heartbeat",
            Duration::from_micros(80),
            herenow_redis::CallOutcome::Unavailable,
        );
    }
    m.upkeep();
    let text = m.render();
    let (typed, helped) = families(&text);
    assert_eq!(typed, helped, "{text}");
    let mut expected = vec![
        "herenow_heartbeats_total",
        "herenow_queries_total",
        "herenow_erasures_total",
        "herenow_space_members",
        "herenow_sweep_duration_seconds",
        "herenow_expired_total",
        "herenow_forgotten_total",
        "herenow_transitions_total",
        "herenow_http_request_duration_seconds",
        "herenow_sse_subscribers",
        "herenow_ws_connections",
        "herenow_watch_watchers",
        "herenow_watch_pairs",
        "herenow_runtime_alive_tasks",
        "herenow_ws_messages_total",
        "herenow_ws_errors_total",
        "herenow_ws_closes_total",
        "herenow_webhook_delivered_total",
        "herenow_webhook_retries_total",
        "herenow_webhook_failures_total",
        "herenow_webhook_dropped_total",
        "herenow_webhook_queue_depth",
        "herenow_webhook_request_duration_seconds",
        "herenow_webhook_outbox_depth",
        "herenow_webhook_outbox_pending",
        "herenow_webhook_outbox_trimmed_total",
        "herenow_webhook_space_endpoint_skipped_total",
    ];
    if cfg!(feature = "redis") {
        expected.extend([
            "herenow_redis_up",
            "herenow_redis_buffered",
            "herenow_redis_dropped_total",
            "herenow_redis_replayed_total",
            "herenow_redis_unreplicated_total",
            "herenow_redis_command_duration_seconds",
            "herenow_redis_errors_total",
        ]);
    }
    for name in expected {
        assert!(helped.contains(name), "{name} has no HELP:\n{text}");
    }
    // Spaces' endpoints: one label value for all, no queue gauge.
    assert!(text.contains(r#"endpoint="spaces""#), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("herenow_webhook_queue_depth") && l.contains("spaces")),
        "{text}"
    );
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

#[tokio::test]
async fn metrics_need_a_read_key_where_the_api_needs_keys() {
    let h = keyed();
    h.get("/metrics")
        .await
        .problem(StatusCode::UNAUTHORIZED, "missing-api-key");
    h.call(request(Method::GET, "/metrics", None, Some("not-a-key")))
        .await
        .problem(StatusCode::UNAUTHORIZED, "unknown-api-key");
    for key in [READ_KEY, WRITE_KEY] {
        let answer = h
            .call(request(Method::GET, "/metrics", None, Some(key)))
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        let text = String::from_utf8(answer.body).unwrap();
        let (typed, helped) = families(&text);
        assert!(!typed.is_empty(), "{text}");
        assert_eq!(typed, helped, "{text}");
    }
    // Probes still need none.
    for path in ["/healthz", "/readyz"] {
        assert_eq!(h.get(path).await.status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn metrics_are_open_where_the_api_is() {
    let h = Api::memory(Config::default());
    h.beat("lobby", "ann").await;
    let answer = h.get("/metrics").await;
    assert_eq!(answer.status, StatusCode::OK);
    let text = String::from_utf8(answer.body).unwrap();
    assert!(text.contains("# HELP herenow_heartbeats_total "), "{text}");
    let (typed, helped) = families(&text);
    assert_eq!(typed, helped, "{text}");
}
