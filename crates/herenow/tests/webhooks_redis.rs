//! Issue 11 with many servers: two `herenow serve` processes on one
//! Redis, one webhook receiver. Each event is claimed by one server; the
//! server holding the first batch is killed with SIGKILL while the
//! receiver keeps that request hanging, and the other takes its events
//! over after `--webhook-reclaim`: every event arrives, and the only ones
//! that arrive twice are those of the batch in flight at the kill (the
//! at-least-once window). Their `--webhook-max-age` is the outbox's
//! lease and keep time in Redis.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use herenow_testkit::RedisServer;

mod support;
use support::Server;

#[path = "../../herenow-server/tests/support/receiver.rs"]
mod receiver;
use receiver::{Receiver, Reply, said, verify};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn outbox_depth(server: &Server) -> u64 {
    server.json(&["webhooks"])["outbox"]["depth"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_11_two_servers_deliver_every_event_though_one_is_killed_mid_delivery() {
    let redis = RedisServer::standalone();
    let mut rx = Receiver::start().await;
    rx.script([Reply::Hang]);
    let start = |path: &str| {
        let hook = format!("http://{}/{path},secret={SECRET}", rx.addr);
        Server::start(&[
            "--store",
            &redis.url(),
            "--webhook",
            &hook,
            "--webhook-timeout",
            "2s",
            "--webhook-reclaim",
            "3s",
            "--webhook-max-age",
            "2h",
        ])
    };
    let mut servers: HashMap<String, Server> = [("a", start("a")), ("b", start("b"))]
        .into_iter()
        .map(|(k, s)| (format!("/{k}"), s))
        .collect();
    // The servers keep the outbox's switch on for their maximum age, and
    // the streams they capture live that long after their newest event.
    let pttl = |key: &str| -> i64 {
        let r = herenow_testkit::raw_command(redis.port, &format!("PTTL {key}")).unwrap();
        r.trim().trim_start_matches(':').parse().unwrap()
    };
    const TWO_HOURS: i64 = 2 * 3_600_000;
    let ttl = pttl("herenow:{~outbox}:open");
    assert!(ttl > TWO_HOURS - 60_000 && ttl <= TWO_HOURS, "{ttl}");
    let keep = herenow_testkit::raw_command(redis.port, "GET herenow:{~outbox}:keep").unwrap();
    assert!(keep.contains("7200000"), "{keep}");
    let mut expected = BTreeSet::new();
    for s in 0..8 {
        let space = format!("room-{s}");
        let ids: Vec<String> = (0..5).map(|m| format!("u{s}-{m}")).collect();
        let mut args = vec!["seen".to_owned(), space.clone()];
        args.extend(ids.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        servers["/a"].ok(&args);
        servers["/b"].ok(&["leave", &space, &ids[0]]);
        expected.insert((space.clone(), "occupied".to_owned(), "-".to_owned()));
        for id in &ids {
            expected.insert((space.clone(), "join".to_owned(), id.clone()));
        }
        expected.insert((space.clone(), "leave".to_owned(), ids[0].clone()));
    }
    // Each stream not drained yet (-2: gone) expires two hours after its
    // newest event; the hung batch's stays until it is taken over.
    let ttls: Vec<i64> = (0..8)
        .map(|s| pttl(&format!("herenow:{{room-{s}}}:wh")))
        .collect();
    assert!(
        ttls.iter()
            .all(|&t| t == -2 || (t > TWO_HOURS - 60_000 && t <= TWO_HOURS)),
        "{ttls:?}"
    );
    assert!(ttls.iter().any(|&t| t > 0), "{ttls:?}");

    // The first request hangs: its server is mid-delivery. Kill it.
    let hung = rx.next_within(Duration::from_secs(30)).await;
    let mut victim = servers.remove(&hung.path).expect("a known server");
    victim.kill();
    let survivor = servers.into_values().next().unwrap();

    let hung_ids: BTreeSet<String> = hung
        .events()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    let mut times: HashMap<String, u32> = HashMap::new();
    let mut got = BTreeSet::new();
    for e in hung.events() {
        *times
            .entry(e["id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
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
            *times.entry(field("id")).or_default() += 1;
            got.insert((field("space"), field("type"), field("member")));
        }
    }
    assert_eq!(got, expected);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while outbox_depth(&survivor) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "never acknowledged: {}",
            survivor.json(&["webhooks"])
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    while let Some(late) = rx.try_next() {
        for e in late.events() {
            *times
                .entry(e["id"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    for (id, n) in &times {
        assert!(
            *n == 1 || hung_ids.contains(id),
            "{id} arrived {n} times, outside the batch in flight at the kill"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_11_a_spaces_webhooks_set_through_one_server_are_delivered_by_another() {
    let redis = RedisServer::standalone();
    let mut rx = Receiver::start().await;
    let start = || {
        Server::start(&[
            "--store",
            &redis.url(),
            "--webhook-timeout",
            "2s",
            "--webhook-reclaim",
            "3s",
            // The receiver listens on loopback.
            "--space-webhook-allow",
            "127.0.0.0/8",
        ])
    };
    let mut a = start();
    let b = start();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let body = serde_json::json!({
        "online_ms": 60_000, "away_ms": 120_000, "window_ms": 120_000,
        "retention_ms": 300_000,
        "webhooks": [{"url": rx.url(), "events": ["join", "leave"], "secret": SECRET}],
    });
    let answer = reqwest::Client::new()
        .put(format!("{}/v1/spaces/room/config", a.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    // The server that set them is gone; the other one finds them in Redis
    // (it looks every 2 s) and delivers, capturing from then on (another
    // server's store follows the outbox's switch within a tick).
    a.kill();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while b.json(&["webhooks"])["enabled"] != true {
        assert!(std::time::Instant::now() < deadline, "b never delivers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.ok(&["seen", "room", "ann"]);
    b.ok(&["leave", "room", "ann"]);
    let mut got = Vec::new();
    while got.len() < 2 {
        let request = rx.next_within(Duration::from_secs(30)).await;
        assert!(verify(
            SECRET,
            &request.id,
            &request.timestamp,
            &request.body,
            &request.signature
        ));
        got.extend(said(&request.events()));
    }
    assert_eq!(
        got,
        [
            ("join".to_owned(), "ann".to_owned()),
            ("leave".to_owned(), "ann".to_owned())
        ]
    );
}
