//! Relaying messages between servers ([`crate::relay`]): what a server
//! sends reaches every feed, its own included, in order, and nothing past
//! the bounds is relayed.

use super::*;
use crate::error::InvalidInput;
use crate::relay::{RelayFeed, RelayMessage};

/// The next message on `topic`, waiting at most two seconds; messages
/// of other topics (another scenario's, on a shared backend) are passed
/// over.
async fn next_on(feed: &mut RelayFeed, topic: &str) -> Arc<RelayMessage> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let m = tokio::time::timeout_at(deadline, feed.recv())
            .await
            .expect("a relayed message within 2 s")
            .expect("a message, not an error");
        if m.topic == topic {
            return m;
        }
    }
}

/// Asserts nothing on `topic` arrives within a short grace period.
async fn nothing_on(feed: &mut RelayFeed, topic: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(150);
    while let Ok(m) = tokio::time::timeout_at(deadline, feed.recv()).await {
        let m = m.expect("a message, not an error");
        assert_ne!(m.topic, topic, "unexpected message {m:?}");
    }
}

pub(super) async fn relayed_messages_reach_every_feed_in_order(s: Store, _clock: ManualClock) {
    let r = relay(&*s);
    let mut first = r.relay_feed().await.unwrap();
    let mut second = r.relay_feed().await.unwrap();
    for i in 0..50u32 {
        r.relay_send("c-relay-order", format!("m{i}").as_bytes())
            .await
            .unwrap();
    }
    for feed in [&mut first, &mut second] {
        for i in 0..50u32 {
            let m = next_on(feed, "c-relay-order").await;
            assert_eq!(m.payload, format!("m{i}").into_bytes());
        }
    }
    // Opaque bytes, the largest allowed and none at all, come back as sent.
    let big: Vec<u8> = (0..crate::limits::MAX_RELAY_PAYLOAD_BYTES)
        .map(|i| (i % 251) as u8)
        .collect();
    r.relay_send("c-relay-order", &big).await.unwrap();
    r.relay_send("c-relay-order", b"").await.unwrap();
    assert_eq!(next_on(&mut first, "c-relay-order").await.payload, big);
    assert!(
        next_on(&mut first, "c-relay-order")
            .await
            .payload
            .is_empty()
    );
    // A feed opened later gets only what is relayed after.
    let mut late = r.relay_feed().await.unwrap();
    nothing_on(&mut late, "c-relay-order").await;
    r.relay_send("c-relay-order", b"after").await.unwrap();
    assert_eq!(next_on(&mut late, "c-relay-order").await.payload, b"after");
}

pub(super) async fn relay_refuses_what_is_past_its_bounds(s: Store, _clock: ManualClock) {
    let r = relay(&*s);
    let mut feed = r.relay_feed().await.unwrap();
    let too_big = vec![b'x'; crate::limits::MAX_RELAY_PAYLOAD_BYTES + 1];
    let err = r.relay_send("c-relay-bounds", &too_big).await.unwrap_err();
    assert!(
        matches!(err, Error::Invalid(InvalidInput::RelayTooLarge { .. })),
        "{err:?}"
    );
    let long = "t".repeat(crate::limits::MAX_RELAY_TOPIC_BYTES + 1);
    for topic in ["", "has space", "c-relay\nbounds", long.as_str()] {
        let err = r.relay_send(topic, b"x").await.unwrap_err();
        assert!(
            matches!(err, Error::Invalid(InvalidInput::BadRelayTopic)),
            "{topic:?}: {err:?}"
        );
    }
    nothing_on(&mut feed, "c-relay-bounds").await;
    // The relay still works after refusals.
    r.relay_send("c-relay-bounds", b"ok").await.unwrap();
    assert_eq!(next_on(&mut feed, "c-relay-bounds").await.payload, b"ok");
}
