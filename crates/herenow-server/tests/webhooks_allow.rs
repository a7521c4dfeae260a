//! Issue 37: endpoints a space names (`PUT /v1/spaces/{space}/config`)
//! cannot reach what the operator did not allow. Every refused class of
//! address is refused when set (`400 webhook-not-allowed`, naming the
//! rule, nothing stored), a name resolving inward is refused at connect
//! time too, failures say only that delivery failed, and the allow-list
//! (`WebhookConfig::space_allow`, `--space-webhook-allow`) lets a private
//! endpoint through. Every receiver here listens on loopback: no request
//! leaves this machine.

mod support;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use herenow_core::outbox::{OutboxKind, SpaceHook};
use herenow_core::{ManualClock, SpaceName};
use herenow_server::{Config, SpaceWebhookAllow, WebhookConfig};
use serde_json::{Value, json};
use support::http::{Api, request};
use support::receiver::{Receiver, said};
use support::{PATIENCE, T0, memory_state, memory_store};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WRITER: &str = "writer-key-1";

/// A server with a write key, no operator endpoints, webhooks started,
/// spaces' endpoints allowed to reach `allow`.
async fn server(allow: &str) -> Api {
    let config = Config {
        api_keys: vec![format!("{WRITER}:write").parse().unwrap()],
        webhooks: WebhookConfig {
            backoff_cap: Duration::from_millis(100),
            timeout: Duration::from_secs(2),
            space_allow: allow.parse().unwrap(),
            ..support::quick_webhooks()
        },
        ..Config::default()
    };
    let clock = ManualClock::new(T0);
    let state = memory_state(memory_store(&clock), &config);
    support::start_webhooks(&state).await;
    Api::over(state, clock)
}

fn policy(url: &str) -> Value {
    json!({
        "online_ms": 30_000, "away_ms": 60_000, "window_ms": 60_000,
        "retention_ms": 120_000,
        "webhooks": [{"url": url, "events": ["join"], "secret": SECRET}],
    })
}

async fn put(api: &Api, space: &str, url: &str) -> support::http::Answer {
    let uri = format!("/v1/spaces/{space}/config");
    api.call(request(Method::PUT, &uri, Some(&policy(url)), Some(WRITER)))
        .await
}

async fn beat(api: &Api, space: &str, id: &str) {
    let uri = format!("/v1/spaces/{space}/heartbeat");
    api.call(request(
        Method::POST,
        &uri,
        Some(&json!({"id": id})),
        Some(WRITER),
    ))
    .await
    .ok();
}

/// The endpoint of `GET /v1/webhooks` named `space:HOST:…`, once it has
/// failed at least once.
async fn failed_endpoint(api: &Api, host: &str) -> Value {
    let prefix = format!("space:{host}:");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let view = api
            .call(request(Method::GET, "/v1/webhooks", None, Some(WRITER)))
            .await
            .ok();
        let found = view["endpoints"].as_array().and_then(|list| {
            list.iter()
                .find(|e| e["name"].as_str().unwrap_or("").starts_with(&prefix))
                .cloned()
        });
        if let Some(e) = found
            && e["failed"].as_u64().unwrap_or(0) > 0
        {
            return e;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no failure shown: {view}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn every_refused_class_is_refused_when_set_naming_its_rule() {
    let api = server("").await;
    let cases = [
        ("http://127.0.0.1:6379/", "loopback"),
        ("http://127.9.9.9/", "loopback"),
        ("http://[::1]:8080/", "loopback"),
        ("http://localhost:9/", "loopback"),
        ("http://hooks.localhost/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://10.0.0.1/", "private"),
        ("http://172.16.5.4/", "private"),
        ("https://192.168.0.1/", "private"),
        ("http://100.64.0.1/", "shared (CGNAT)"),
        ("http://[fd00::1]/", "unique-local"),
        ("http://[fc00::1]/", "unique-local"),
        ("http://224.0.0.1/", "multicast"),
        ("http://[ff02::1]/", "multicast"),
        ("http://0.0.0.0:80/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://255.255.255.255/", "broadcast"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://[::ffff:10.1.1.1]/", "private"),
    ];
    for (url, rule) in cases {
        let answer = put(&api, "room", url).await;
        answer.problem(StatusCode::BAD_REQUEST, "webhook-not-allowed");
        let detail = answer.json()["detail"].as_str().unwrap().to_owned();
        assert!(
            detail.contains(&format!("a {rule} address")),
            "{url}: {detail}"
        );
        assert!(detail.contains("--space-webhook-allow"), "{detail}");
    }
    // Nothing was stored, the policy included.
    let shown = api
        .call(request(
            Method::GET,
            "/v1/spaces/room/config",
            None,
            Some(WRITER),
        ))
        .await
        .ok();
    assert_eq!(shown["webhooks"], json!([]), "{shown}");
    assert_ne!(shown["online_ms"], 30_000, "{shown}");
}

#[tokio::test]
async fn the_allow_list_lets_a_private_endpoint_through() {
    let api = server("127.0.0.0/8").await;
    let mut rx = Receiver::start().await;
    assert!(rx.url().starts_with("http://127.0.0.1:"), "{}", rx.url());
    put(&api, "room", &rx.url()).await.ok();
    beat(&api, "room", "ann").await;
    let got = rx.next().await;
    assert_eq!(said(&got.events()), [("join".into(), "ann".into())]);
    // What the list does not name stays refused.
    put(&api, "room", "http://169.254.169.254/")
        .await
        .problem(StatusCode::BAD_REQUEST, "webhook-not-allowed");
    put(&api, "room", "http://[::1]:9/")
        .await
        .problem(StatusCode::BAD_REQUEST, "webhook-not-allowed");
    // A host name on the list passes whatever it resolves to.
    let by_name = server("localhost").await;
    let mut rx = Receiver::start().await;
    let port = rx.url().rsplit(':').next().unwrap().to_owned();
    put(&by_name, "room", &format!("http://localhost:{port}"))
        .await
        .ok();
    beat(&by_name, "room", "bob").await;
    let got = rx.next().await;
    assert_eq!(said(&got.events()), [("join".into(), "bob".into())]);
}

/// An endpoint the store holds (set before the allow-list was narrowed,
/// or by hand) whose name resolves to loopback is refused by the
/// delivering client's resolver: the receiver listening there gets
/// nothing, and `GET /v1/webhooks` says only that delivery failed. An
/// address written in the URL is refused before any request.
#[tokio::test]
async fn a_name_resolving_inward_is_refused_at_connect_time() {
    let api = server("").await;
    let mut rx = Receiver::start().await;
    let port = rx.url().rsplit(':').next().unwrap().to_owned();
    let hooks = api.state.store().space_webhooks().unwrap();
    let hook = |url: String| SpaceHook {
        url,
        kinds: vec![OutboxKind::Join],
        secret: SECRET.to_owned(),
    };
    hooks
        .set_space_hooks(
            &SpaceName::new("room").unwrap(),
            &[hook(format!("http://localhost:{port}/hook"))],
        )
        .await
        .unwrap();
    hooks
        .set_space_hooks(&SpaceName::new("hall").unwrap(), &[hook(rx.url())])
        .await
        .unwrap();
    api.state.webhooks().space_hooks_changed();
    beat(&api, "room", "ann").await;
    beat(&api, "hall", "bob").await;
    let shown = failed_endpoint(&api, "localhost").await;
    assert_eq!(
        shown["last_error"]["error"], "delivery failed: no answer from the endpoint",
        "{shown}"
    );
    let text = shown.to_string();
    assert!(
        !text.contains("loopback") && !text.contains("refused") && !text.contains("connect"),
        "{text}"
    );
    // The literal address never got a lane: counted as skipped.
    let metrics = api.state.metrics().render();
    assert!(
        metrics.lines().any(
            |l| l.starts_with("herenow_webhook_space_endpoint_skipped_total") && !l.ends_with(" 0")
        ),
        "{metrics}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rx.try_next().is_none(), "a refused endpoint got a request");
}

/// A space's endpoint that is allowed but does not answer (a closed
/// port): its error says that delivery failed, not whether the
/// connection was refused or timed out.
#[tokio::test]
async fn failures_of_spaces_endpoints_say_only_that_delivery_failed() {
    let api = server("127.0.0.0/8").await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    put(&api, "room", &format!("http://{addr}/hook")).await.ok();
    beat(&api, "room", "ann").await;
    let shown = failed_endpoint(&api, "127.0.0.1").await;
    assert_eq!(
        shown["last_error"]["error"], "delivery failed: no answer from the endpoint",
        "{shown}"
    );
}

#[test]
fn the_allow_list_parses_hosts_addresses_and_networks() {
    let allow: SpaceWebhookAllow = "hooks.internal,10.0.0.0/8, fd00::/8".parse().unwrap();
    assert!(!allow.is_empty());
    assert!(allow.allows_host("hooks.internal"));
    assert!(allow.check_addr("x", "10.2.3.4".parse().unwrap()).is_ok());
    assert!(
        allow
            .check_addr("x", "192.168.0.1".parse().unwrap())
            .is_err()
    );
    assert!("300.0.0.0/8".parse::<SpaceWebhookAllow>().is_err());
}
