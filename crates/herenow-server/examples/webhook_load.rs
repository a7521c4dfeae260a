//! Webhooks under load, on the memory store, to a receiver on loopback
//! that answers `200` and counts the events it is sent:
//!
//! 1. **Delivery rate**: 50,000 members join then leave (100,000 events
//!    and the space's occupied / vacated), written as fast as the store
//!    takes them; the time until the receiver has every event.
//! 2. **Heartbeats with webhooks on against off**: two stores in one
//!    process, one delivering to the receiver, rounds alternating; steady
//!    heartbeats (no events: the common case) and churn (every member
//!    leaves and joins again: two events each, delivered meanwhile).
//!
//! ```sh
//! cargo run --release -p herenow-server --example webhook_load
//! ROUNDS=11 cargo run --release -p herenow-server --example webhook_load
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use herenow_core::{
    Heartbeat, MemberId, MemberKey, PresenceStore, SpaceConfig, SpaceName, SystemClock,
    WebhookOutbox,
};
use herenow_memory::MemoryStore;
use herenow_server::Backend;
use herenow_server::{AppState, Config};
use herenow_server::{WebhookConfig, WebhookEndpoint as Endpoint, WebhookSecret as Secret};
use tokio_util::task::TaskTracker;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const MEMBERS: usize = 50_000;
const BATCH: usize = 1_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Counts the events of every batch it is sent.
async fn receive(State(count): State<Arc<AtomicU64>>, body: Bytes) -> &'static str {
    let n = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["data"]["events"].as_array().map(Vec::len))
        .unwrap_or(0);
    count.fetch_add(n as u64, Ordering::Relaxed);
    "ok"
}

async fn started(store: Arc<MemoryStore>, url: Option<&str>) -> AppState {
    let webhooks = match url {
        Some(url) => {
            let secret: Secret = SECRET.parse().unwrap();
            WebhookConfig {
                endpoints: vec![Endpoint::parse(url, 0, Some(&secret)).unwrap()],
                outbox_max: 1_000_000,
                queue_limit: 1_000_000,
                ..WebhookConfig::default()
            }
        }
        None => WebhookConfig::default(),
    };
    let config = Config {
        webhooks,
        ..Config::default()
    };
    let state = AppState::new(Backend::memory(store), &config);
    state
        .webhooks()
        .start(&TaskTracker::new(), state.shutdown_token())
        .await
        .unwrap();
    state
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let count = Arc::new(AtomicU64::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/hooks", post(receive))
        .with_state(count.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let on = Arc::new(MemoryStore::new(
        Arc::new(SystemClock),
        SpaceConfig::default(),
    ));
    let off = Arc::new(MemoryStore::new(
        Arc::new(SystemClock),
        SpaceConfig::default(),
    ));
    let _on_state = started(on.clone(), Some(&url)).await;
    let _off_state = started(off.clone(), None).await;
    let members: Vec<MemberKey> = (0..MEMBERS)
        .map(|i| MemberKey::user(MemberId::new(&format!("user-{i}")).unwrap()))
        .collect();
    let batches: Vec<Vec<Heartbeat>> = members
        .chunks(BATCH)
        .map(|c| c.iter().cloned().map(Heartbeat::now).collect())
        .collect();

    // 1. Delivery rate.
    let rate_space = SpaceName::new("rate").unwrap();
    let t = Instant::now();
    for b in &batches {
        on.heartbeat(&rate_space, b).await.unwrap();
    }
    for keys in members.chunks(BATCH) {
        on.leave(&rate_space, keys).await.unwrap();
    }
    let written = t.elapsed();
    let want = 2 * MEMBERS as u64 + 2;
    while count.load(Ordering::Relaxed) < want {
        assert!(t.elapsed() < Duration::from_secs(120), "not all delivered");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let all = t.elapsed();
    println!(
        "delivery: {want} events written in {:.0} ms, all received after {:.0} ms: {:.0} events/s delivered",
        written.as_secs_f64() * 1e3,
        all.as_secs_f64() * 1e3,
        want as f64 / all.as_secs_f64()
    );

    // 2. Heartbeats, webhooks on against off.
    let space = SpaceName::new("load").unwrap();
    for store in [&on, &off] {
        for b in &batches {
            store.heartbeat(&space, b).await.unwrap();
        }
    }
    let mut rates: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let store = if which == 0 { &off } else { &on };
            // The previous round's deliveries done first: each phase
            // measures its own work only.
            while on.outbox_stats().await.unwrap().depth > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let t = Instant::now();
            for b in &batches {
                store.heartbeat(&space, b).await.unwrap();
            }
            rates[which]
                .0
                .push(MEMBERS as f64 / t.elapsed().as_secs_f64());
            let t = Instant::now();
            for (b, keys) in batches.iter().zip(members.chunks(BATCH)) {
                store.leave(&space, keys).await.unwrap();
                store.heartbeat(&space, b).await.unwrap();
            }
            rates[which]
                .1
                .push(MEMBERS as f64 / t.elapsed().as_secs_f64());
        }
    }
    println!(
        "{rounds} rounds, {MEMBERS} members in batches of {BATCH}; medians, members per second"
    );
    for (name, (steady, churn)) in ["webhooks off", "webhooks on"].iter().zip(&rates) {
        println!(
            "{name:13} steady: {:>10.0}   churn (leave + join, delivered meanwhile): {:>10.0}",
            median(steady.clone()),
            median(churn.clone())
        );
    }
    let paired = |a: &[f64], b: &[f64]| median(b.iter().zip(a).map(|(n, f)| n / f).collect());
    println!(
        "on / off (medians of per-round ratios): steady {:.3}, churn {:.3}",
        paired(&rates[0].0, &rates[1].0),
        paired(&rates[0].1, &rates[1].1)
    );
}
