//! Issue 11, through the binary: `herenow webhooks test` and `herenow
//! webhooks`, and the embedded store's webhook outbox surviving SIGKILL.
//!
//! `herenow serve --data-dir D --webhook URL` records joins and leaves
//! while the receiver is down (every attempt fails and is retried), is
//! killed with SIGKILL, and restarts on D with the receiver up: every
//! event arrives, signed, and the outbox empties. Events the first
//! process delivered but had not acknowledged would arrive twice, with
//! the same id (at least once); here none was delivered before the kill.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

mod support;
use support::{Server, temp_dir};

#[path = "../../herenow-server/tests/support/receiver.rs"]
mod receiver;
use receiver::{Receiver, Reply, verify};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn outbox_depth(server: &Server) -> u64 {
    server.json(&["webhooks"])["outbox"]["depth"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_11_undelivered_webhooks_survive_sigkill_with_a_data_dir() {
    let dir = temp_dir("webhooks-crash");
    // The receiver is down: its port closes every connection at once.
    // Held, not freed, so that no other test's receiver binds it meanwhile
    // (one did, and took this server's events).
    let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = down.local_addr().unwrap();
    let refusing = tokio::spawn(async move {
        loop {
            if let Ok((socket, _)) = down.accept().await {
                drop(socket);
            }
        }
    });
    let hook = format!("http://{addr}/hook,secret={SECRET}");
    let args = ["--data-dir", dir.to_str().unwrap(), "--webhook", &hook];
    let mut server = Server::start(&args);
    server.ok(&["seen", "room", "ann", "bob", "carol"]);
    server.ok(&["seen", "hall", "dan"]);
    server.ok(&["leave", "room", "ann"]);
    // occupied(room), 3 joins, occupied(hall), join, leave.
    let expected: BTreeSet<(String, String, String)> = [
        ("room", "occupied", "-"),
        ("room", "join", "ann"),
        ("room", "join", "bob"),
        ("room", "join", "carol"),
        ("hall", "occupied", "-"),
        ("hall", "join", "dan"),
        ("room", "leave", "ann"),
    ]
    .iter()
    .map(|(s, t, m)| ((*s).into(), (*t).into(), (*m).into()))
    .collect();
    // A write that waits for fdatasync, which covers every record before
    // it: the lazily journaled events are on disk too.
    server.ok(&["friends", "set", "zed", "amy"]);
    assert_eq!(outbox_depth(&server), expected.len() as u64);
    let view = server.json(&["webhooks"]);
    assert_ne!(view["endpoints"][0]["state"], "ok", "{view}");
    server.kill();
    refusing.abort();
    let _ = refusing.await;

    let mut rx = Receiver::on(tokio::net::TcpListener::bind(addr).await.unwrap());
    let server = Server::start(&args);
    let mut got = BTreeSet::new();
    while !expected.is_subset(&got) {
        let request = rx.next_within(Duration::from_secs(30)).await;
        assert!(verify(
            SECRET,
            &request.id,
            &request.timestamp,
            &request.body,
            &request.signature
        ));
        for e in request.events() {
            let field = |k: &str| e[k].as_str().unwrap_or("-").to_owned();
            got.insert((field("space"), field("type"), field("member")));
        }
    }
    assert_eq!(got, expected);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while outbox_depth(&server) != 0 {
        assert!(std::time::Instant::now() < deadline, "never acknowledged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let view: Value = server.json(&["webhooks"]);
    assert_eq!(view["endpoints"][0]["state"], "ok", "{view}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_test_sends_a_signed_sample_and_says_how_it_went() {
    let mut rx = Receiver::start().await;
    rx.script([Reply::Status(500), Reply::Status(404)]);
    let url = rx.url();
    let run = |url: String, secret: &'static str| {
        tokio::task::spawn_blocking(move || {
            support::herenow()
                .args(["webhooks", "test", &url, "--secret", secret])
                .output()
                .unwrap()
        })
    };
    let out = run(url.clone(), SECRET).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        support::stderr(&out).contains("HTTP 500"),
        "{}",
        support::stderr(&out)
    );
    let out = run(url.clone(), SECRET).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = run(url.clone(), SECRET).await.unwrap();
    assert!(out.status.success(), "{}", support::stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("delivered msg_"));
    for _ in 0..3 {
        let got = rx.next().await;
        assert!(verify(
            SECRET,
            &got.id,
            &got.timestamp,
            &got.body,
            &got.signature
        ));
        assert_eq!(got.events()[0]["space"], "herenow.test");
    }
    // A bad secret is refused before anything is sent, and not echoed.
    let out = run(url, "whsec_aHVudGVyMg==").await.unwrap();
    assert!(!out.status.success());
    assert!(!support::stderr(&out).contains("aHVudGVyMg"));
    assert!(rx.try_next().is_none());
}

#[test]
fn webhooks_lists_each_endpoint() {
    let hook = format!("http://127.0.0.1:9/hook,secret={SECRET},name=site,events=leave");
    let server = Server::start(&["--webhook", &hook]);
    let text = server.ok(&["webhooks"]);
    assert!(text.starts_with("site  "), "{text}");
    assert!(text.contains("http://127.0.0.1:9/hook"), "{text}");
    assert!(text.contains("outbox: 0 waiting"), "{text}");
    let off = Server::start(&[]);
    assert!(off.ok(&["webhooks"]).starts_with("no webhooks configured"));
    // A bad --webhook is a usage error (exit 2), its secret not echoed.
    let out = support::herenow()
        .args(["serve", "--listen", "127.0.0.1:0", "--webhook"])
        .arg("http://h/x,secret=whsec_aHVudGVyMg==")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", support::stderr(&out));
    assert!(!support::stderr(&out).contains("aHVudGVyMg"));
}

/// `PUT uri` with a JSON body; its status and JSON answer.
async fn put_json(url: &str, body: &Value) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let answer = reqwest::Client::new()
        .put(url)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_11_a_spaces_webhooks_survive_sigkill_with_a_data_dir() {
    let dir = temp_dir("space-webhooks-crash");
    // The receiver listens on loopback, which spaces' endpoints may not
    // reach unless allowed.
    let args = [
        "--data-dir",
        dir.to_str().unwrap(),
        "--space-webhook-allow",
        "127.0.0.0/8",
    ];
    let mut server = Server::start(&args);
    let mut rx = Receiver::start().await;
    let body = serde_json::json!({
        "online_ms": 60_000, "away_ms": 120_000, "window_ms": 120_000,
        "retention_ms": 300_000,
        "webhooks": [{"url": rx.url(), "events": ["join"], "secret": SECRET}],
    });
    let (status, answer) = put_json(&format!("{}/v1/spaces/room/config", server.url), &body).await;
    assert_eq!(status, 200, "{answer}");
    // Acknowledged means on disk: killed at once, the endpoint is back.
    server.kill();

    let server = Server::start(&args);
    server.ok(&["seen", "room", "ann"]);
    server.ok(&["seen", "hall", "bob"]);
    let got = rx.next_within(Duration::from_secs(30)).await;
    assert!(verify(
        SECRET,
        &got.id,
        &got.timestamp,
        &got.body,
        &got.signature
    ));
    let events = got.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0]["type"].as_str(), events[0]["member"].as_str()),
        (Some("join"), Some("ann"))
    );
    let view = server.json(&["webhooks"]);
    assert_eq!(view["enabled"], true, "{view}");
    assert!(
        view["endpoints"][0]["name"]
            .as_str()
            .unwrap()
            .starts_with("space:"),
        "{view}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 37: without `--space-webhook-allow`, a space may not name an
/// endpoint on loopback or the metadata address (`400
/// webhook-not-allowed`, naming the rule); with it (the environment
/// variable here), the allowed network is accepted and the others still
/// refused. A bad entry is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_37_space_webhook_allow_lets_through_only_what_it_names() {
    let body = |url: &str| {
        serde_json::json!({
            "online_ms": 60_000, "away_ms": 120_000, "window_ms": 120_000,
            "retention_ms": 300_000,
            "webhooks": [{"url": url, "secret": SECRET}],
        })
    };
    let closed = Server::start(&[]);
    let config = format!("{}/v1/spaces/room/config", closed.url);
    for (url, rule) in [
        ("http://127.0.0.1:6379/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://localhost:9/", "loopback"),
    ] {
        let (status, answer) = put_json(&config, &body(url)).await;
        assert_eq!(status, 400, "{url}: {answer}");
        assert_eq!(answer["code"], "webhook-not-allowed", "{answer}");
        assert!(
            answer["detail"].as_str().unwrap().contains(rule),
            "{answer}"
        );
    }

    let open = Server::start_with_env(&[], &[("HERENOW_SPACE_WEBHOOK_ALLOW", "127.0.0.0/8,::1")]);
    let config = format!("{}/v1/spaces/room/config", open.url);
    let (status, answer) = put_json(&config, &body("http://127.0.0.1:6379/")).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = put_json(&config, &body("http://169.254.169.254/")).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some("webhook-not-allowed"))
    );

    let out = support::herenow()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--space-webhook-allow",
            "10.0.0.0/33",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", support::stderr(&out));
}
