//! Webhook endpoints a space's configuration names (`PUT
//! /v1/spaces/{space}/config` with `webhooks`): on a server with no
//! operator endpoints, delivered signed with the space's secret, the kinds
//! asked for only, shown to writers without their secrets and to readers
//! not at all, removed by `[]`, refused whole when any is bad, and on a
//! store that keeps none, a clear 501.

mod support;

use axum::http::{Method, StatusCode};
use herenow_core::ManualClock;
use herenow_server::Config;
use herenow_server::WebhookConfig;
use serde_json::{Value, json};
use support::http::{Answer, Api, request};
use support::receiver::{Receiver, said, verify};
use support::{T0, memory_state, memory_store};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET: &str = "whsec_c2Vjb25kIHNlY3JldCBvZiAyNCBieXRlcyE=";
const WRITER: &str = "writer-key-1";
const READER: &str = "reader-key-1";

/// A server with keys, no operator endpoints, webhooks started.
async fn server(default_secret: Option<&str>) -> Api {
    let config = Config {
        api_keys: vec![
            format!("{READER}:read").parse().unwrap(),
            format!("{WRITER}:write").parse().unwrap(),
        ],
        webhooks: WebhookConfig {
            default_secret: default_secret.map(|s| s.parse().unwrap()),
            ..support::quick_webhooks()
        },
        ..Config::default()
    };
    let clock = ManualClock::new(T0);
    let state = memory_state(memory_store(&clock), &config);
    support::start_webhooks(&state).await;
    Api::over(state, clock)
}

fn policy(webhooks: Value) -> Value {
    json!({
        "online_ms": 30_000, "away_ms": 60_000, "window_ms": 60_000,
        "retention_ms": 120_000, "webhooks": webhooks,
    })
}

async fn put(api: &Api, space: &str, body: &Value) -> Answer {
    let uri = format!("/v1/spaces/{space}/config");
    api.call(request(Method::PUT, &uri, Some(body), Some(WRITER)))
        .await
}

async fn get(api: &Api, space: &str, key: &str) -> Value {
    let uri = format!("/v1/spaces/{space}/config");
    api.call(request(Method::GET, &uri, None, Some(key)))
        .await
        .ok()
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

async fn leave(api: &Api, space: &str, id: &str) {
    let uri = format!("/v1/spaces/{space}/leave");
    let body = json!({"members": [{"id": id}]});
    api.call(request(Method::POST, &uri, Some(&body), Some(WRITER)))
        .await
        .ok();
}

#[tokio::test]
async fn a_space_names_its_own_endpoints_without_operator_ones() {
    let api = server(None).await;
    let mut joins = Receiver::start().await;
    let mut all = Receiver::start().await;
    let hooks = json!([
        {"url": joins.url(), "events": ["join", "leave"], "secret": SECRET},
        {"url": format!("{}?token=t0p", all.url()), "secret": OTHER_SECRET},
    ]);
    let answer = put(&api, "room-1", &policy(hooks)).await.ok();
    assert_eq!(answer["online_ms"], 30_000, "the policy is set too");
    let shown = answer["webhooks"].as_array().unwrap();
    assert_eq!(shown.len(), 2);
    assert_eq!(shown[0]["url"], joins.url());
    assert_eq!(shown[0]["events"], json!(["join", "leave"]));
    assert_eq!(
        shown[1]["events"],
        json!([
            "join", "away", "back", "leave", "update", "occupied", "vacated"
        ]),
        "all kinds when none are named"
    );
    assert!(
        shown[0]["name"]
            .as_str()
            .unwrap()
            .starts_with("space:127.0.0.1:"),
        "{shown:?}"
    );
    let text = answer.to_string();
    assert!(
        !text.contains("MfKQ9r8") && !text.contains("secret"),
        "{text}"
    );

    beat(&api, "room-1", "ann").await;
    beat(&api, "elsewhere", "bob").await;
    let got = joins.next().await;
    assert!(
        verify(SECRET, &got.id, &got.timestamp, &got.body, &got.signature),
        "signed with the space's secret: {got:?}"
    );
    assert_eq!(said(&got.events()), [("join".into(), "ann".into())]);
    let events = all.events(2).await;
    let mut kinds = said(&events);
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("join".into(), "ann".into()),
            ("occupied".into(), "-".into())
        ],
        "only the space's own events"
    );
    let got_all = all.try_next();
    assert!(got_all.is_none(), "nothing of another space: {got_all:?}");

    // Readers see the policy, not where events go.
    let read = get(&api, "room-1", READER).await;
    assert_eq!(read["online_ms"], 30_000);
    assert!(read.get("webhooks").is_none(), "{read}");
    let written = get(&api, "room-1", WRITER).await;
    assert_eq!(
        written["webhooks"][1]["url"],
        format!("{}?token=t0p", all.url())
    );

    // GET /v1/webhooks lists the lanes, redacted.
    let view = api
        .call(request(Method::GET, "/v1/webhooks", None, Some(WRITER)))
        .await
        .ok();
    assert_eq!(view["enabled"], true);
    let names: Vec<&str> = view["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{view:#}");
    assert!(names.iter().all(|n| n.starts_with("space:")), "{names:?}");
    assert!(!view.to_string().contains("t0p"), "{view}");

    // A PUT without `webhooks` keeps them; `[]` removes them.
    let body = json!({"online_ms": 20_000, "away_ms": 60_000, "window_ms": 60_000, "retention_ms": 120_000});
    let kept = put(&api, "room-1", &body).await.ok();
    assert_eq!(kept["webhooks"].as_array().unwrap().len(), 2);
    put(
        &api,
        "room-1",
        &policy(json!([{"url": all.url(), "secret": OTHER_SECRET}])),
    )
    .await
    .ok();
    leave(&api, "room-1", "ann").await;
    let events = all.events(2).await;
    let mut kinds = said(&events);
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("leave".into(), "ann".into()),
            ("vacated".into(), "-".into())
        ]
    );
    assert!(
        joins.try_next().is_none(),
        "an endpoint removed from the space gets nothing more"
    );
    let gone = put(&api, "room-1", &policy(json!([]))).await.ok();
    assert_eq!(gone["webhooks"], json!([]));
}

#[tokio::test]
async fn bad_endpoints_are_refused_whole_and_change_nothing() {
    let api = server(None).await;
    let good = json!({"url": "https://example.com/hooks", "secret": SECRET});
    put(&api, "lobby", &policy(json!([good]))).await.ok();
    let nine: Vec<Value> = (0..9)
        .map(|i| json!({"url": format!("https://h{i}.example/"), "secret": SECRET}))
        .collect();
    let cases = [
        ("nine endpoints", json!(nine), "bad-webhook"),
        (
            "no secret, none by default",
            json!([{"url": "https://example.com/x"}]),
            "bad-webhook",
        ),
        (
            "not whsec_",
            json!([{"url": "https://example.com/x", "secret": "hunter2hunter2hunter2hunter2"}]),
            "bad-webhook",
        ),
        (
            "a short secret",
            json!([{"url": "https://example.com/x", "secret": "whsec_aGk="}]),
            "bad-webhook",
        ),
        (
            "ftp",
            json!([{"url": "ftp://example.com/x", "secret": SECRET}]),
            "bad-webhook",
        ),
        (
            "not a URL",
            json!([{"url": "example.com", "secret": SECRET}]),
            "bad-webhook",
        ),
        (
            "a fragment",
            json!([{"url": "https://example.com/x#y", "secret": SECRET}]),
            "bad-webhook",
        ),
        (
            "a long URL",
            json!([{"url": format!("https://example.com/{}", "a".repeat(2_100)), "secret": SECRET}]),
            "bad-webhook",
        ),
        (
            "a URL twice",
            json!([good, {"url": "https://example.com/hooks", "secret": OTHER_SECRET}]),
            "bad-webhook",
        ),
        (
            "no kinds",
            json!([{"url": "https://example.com/x", "secret": SECRET, "events": []}]),
            "bad-webhook",
        ),
        (
            "a kind twice",
            json!([{"url": "https://example.com/x", "secret": SECRET, "events": ["join", "join"]}]),
            "bad-webhook",
        ),
        (
            "an unknown kind",
            json!([{"url": "https://example.com/x", "secret": SECRET, "events": ["arrive"]}]),
            "bad-json",
        ),
        (
            "an unknown field",
            json!([{"url": "https://example.com/x", "secret": SECRET, "spaces": "*"}]),
            "unknown-field",
        ),
        (
            "not a list",
            json!({"url": "https://example.com/x"}),
            "bad-json",
        ),
    ];
    for (why, hooks, code) in cases {
        let answer = put(&api, "lobby", &policy(hooks)).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{why}: {}",
            answer.json()
        );
        answer.problem(StatusCode::BAD_REQUEST, code);
        let text = answer.json().to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("MfKQ9r8"),
            "{why}: the secret is never echoed: {text}"
        );
    }
    // A bad policy leaves the endpoints as they were, and the reverse.
    let bad_policy = json!({"online_ms": 0, "away_ms": 1, "window_ms": 1, "retention_ms": 1,
        "webhooks": [{"url": "https://other.example/", "secret": SECRET}]});
    put(&api, "lobby", &bad_policy)
        .await
        .problem(StatusCode::BAD_REQUEST, "bad-config");
    let now = get(&api, "lobby", WRITER).await;
    assert_eq!(now["webhooks"][0]["url"], "https://example.com/hooks");
    assert_eq!(now["webhooks"].as_array().unwrap().len(), 1);
    assert_eq!(now["online_ms"], 30_000);

    // Reading keys cannot set them.
    let uri = "/v1/spaces/lobby/config";
    api.call(request(
        Method::PUT,
        uri,
        Some(&policy(json!([]))),
        Some(READER),
    ))
    .await
    .problem(StatusCode::FORBIDDEN, "insufficient-scope");
}

#[tokio::test]
async fn the_servers_secret_signs_for_endpoints_given_without_one() {
    let api = server(Some(OTHER_SECRET)).await;
    let mut rx = Receiver::start().await;
    put(
        &api,
        "lobby",
        &policy(json!([{"url": rx.url(), "events": ["join"]}])),
    )
    .await
    .ok();
    beat(&api, "lobby", "cy").await;
    let got = rx.next().await;
    assert!(verify(
        OTHER_SECRET,
        &got.id,
        &got.timestamp,
        &got.body,
        &got.signature
    ));
}

#[tokio::test]
async fn the_openapi_document_describes_spaces_endpoints() {
    let api = server(None).await;
    let doc = api.get("/openapi.json").await.ok();
    let schemas = &doc["components"]["schemas"];
    let hook = &schemas["SpaceWebhookDto"];
    assert_eq!(hook["properties"]["secret"]["writeOnly"], true, "{hook:#}");
    assert_eq!(hook["properties"]["name"]["readOnly"], true, "{hook:#}");
    assert_eq!(hook["properties"]["url"]["maxLength"], 2048);
    assert_eq!(
        schemas["WebhookEvent"]["enum"],
        json!([
            "join", "away", "back", "leave", "update", "occupied", "vacated"
        ])
    );
}
