//! Relaying messages between servers on one Redis, where the contract
//! suite (one store per scenario) cannot look: a message sent through one
//! store reaches another's feed, on a server and across a cluster's
//! nodes, and a feed lags when the link to Redis drops, then hears again.

use herenow_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use herenow_core::{ManualClock, PresenceStore, RecvError, RelayFeed, RelayMessage, SpaceConfig};
use herenow_redis::{RedisOptions, RedisStore};

const T0: u64 = 1_700_000_000_000;

async fn store(url: &str, clock: &ManualClock) -> RedisStore {
    let opts = RedisOptions {
        timeout: Duration::from_millis(500),
        ..RedisOptions::default()
    };
    RedisStore::connect(url, Arc::new(clock.clone()), SpaceConfig::default(), opts)
        .await
        .expect("connect")
}

async fn next(feed: &mut RelayFeed) -> Result<Arc<RelayMessage>, RecvError> {
    tokio::time::timeout(Duration::from_secs(5), feed.recv())
        .await
        .expect("a message in time")
}

/// Sends `payload` through `from` until `feed` hears it (a lag on the way
/// is what the test may expect; it is returned as seen).
async fn heard(from: &RedisStore, feed: &mut RelayFeed, payload: &[u8]) -> bool {
    let relay = from.relay().expect("a relay");
    relay.relay_send("t", payload).await.unwrap();
    let mut lagged = false;
    loop {
        match next(feed).await {
            Ok(m) if m.payload == payload => return lagged,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => lagged = true,
            Err(e) => panic!("{e:?}"),
        }
    }
}

async fn across(url: &str) {
    let clock = ManualClock::new(T0);
    let a = store(url, &clock).await;
    let b = store(url, &clock).await;
    let mut on_a = a.relay().unwrap().relay_feed().await.unwrap();
    let mut on_b = b.relay().unwrap().relay_feed().await.unwrap();
    b.relay().unwrap().relay_send("t", b"from b").await.unwrap();
    for feed in [&mut on_a, &mut on_b] {
        let m = next(feed).await.unwrap();
        assert_eq!((m.topic.as_str(), &m.payload[..]), ("t", &b"from b"[..]));
    }
}

#[tokio::test]
async fn a_message_reaches_every_store_on_one_server() {
    let server = common::RedisServer::standalone();
    across(&server.url()).await;
}

#[tokio::test]
async fn a_message_reaches_every_store_on_a_cluster() {
    let cluster = common::RedisCluster::start();
    across(&cluster.url()).await;
}

#[tokio::test]
async fn a_feed_lags_when_the_link_drops_then_hears_again() {
    let server = common::RedisServer::standalone();
    let clock = ManualClock::new(T0);
    let sender = store(&server.url(), &clock).await;
    let listener = store(&server.url(), &clock).await;
    let mut feed = listener.relay().unwrap().relay_feed().await.unwrap();
    assert!(!heard(&sender, &mut feed, b"before").await);
    for kind in ["normal", "pubsub"] {
        common::raw_command(server.port, &format!("CLIENT KILL TYPE {kind}")).unwrap();
    }
    // The loss is told once the listener is subscribed again; then
    // messages flow (the sender's own link may still be coming back).
    assert!(matches!(next(&mut feed).await, Err(RecvError::Lagged(_))));
    for _ in 0..50 {
        let sent = sender.relay().unwrap().relay_send("t", b"after").await;
        if sent.is_ok() {
            let m = next(&mut feed).await.unwrap();
            assert_eq!(&m.payload[..], b"after");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the sender never reached Redis again");
}
