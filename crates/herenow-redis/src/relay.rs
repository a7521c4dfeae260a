//! Relaying messages between the servers on one Redis
//! ([`herenow_core::relay`]): one channel, `P:relay`
//! ([`Keys::relay_channel`](crate::key_names::Keys::relay_channel)), that
//! every store opening a feed subscribes to, and `PUBLISH` to send.
//!
//! Classic `PUBLISH`, not sharded: a cluster's bus carries it to every
//! node, so a subscriber connected to any node hears it (the users'
//! channels of `follow.rs` travel the same way). A message is the topic,
//! a newline and the payload, as bytes.
//!
//! Pub/sub keeps nothing for a client that was away: when the link drops,
//! the store's restorer (`store/follow.rs`) subscribes again and then
//! bumps [`Relays::lost`], and every open [`RelayFeed`] lags. A message
//! that cannot be read makes them lag too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redis::{PushInfo, PushKind};
use tokio::sync::{broadcast, watch};

use herenow_core::relay::{RELAY_QUEUE, RelayFeed, RelayMessage};

use crate::reply::bytes_of;

/// The relay of one store: its channel, whether it listens, its feeds.
pub(crate) struct Relays {
    channel: String,
    tx: broadcast::Sender<Arc<RelayMessage>>,
    losses: watch::Sender<u64>,
    /// Set once the store subscribed to the channel (its first feed): a
    /// store whose server relays nothing hears nothing.
    listening: AtomicBool,
}

impl Relays {
    /// Not listening yet, on `channel`.
    pub fn new(channel: String) -> Self {
        Self {
            channel,
            tx: broadcast::channel(RELAY_QUEUE).0,
            losses: watch::channel(0).0,
            listening: AtomicBool::new(false),
        }
    }

    /// The channel every store on the Redis relays on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// A new feed, from now on.
    pub fn feed(&self) -> RelayFeed {
        RelayFeed::with_losses(self.tx.subscribe(), self.losses.subscribe())
    }

    /// Whether the store subscribed to the channel.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }

    /// The store subscribed to the channel.
    pub fn listen(&self) {
        self.listening.store(true, Ordering::Release);
    }

    /// Messages may have been lost: every open feed lags.
    pub fn lost(&self) {
        self.losses.send_modify(|n| *n += 1);
    }

    /// Takes the relay channel's messages out of the client's pushes;
    /// hands back every other push.
    pub fn push(&self, info: PushInfo) -> Option<PushInfo> {
        if info.kind != PushKind::Message
            || info.data.first().and_then(bytes_of) != Some(self.channel.as_bytes())
        {
            return Some(info);
        }
        match info.data.get(1).and_then(bytes_of).and_then(decode) {
            Some(message) => {
                // An error only means no feed is open.
                let _ = self.tx.send(Arc::new(message));
            }
            None => {
                tracing::warn!("unreadable message on the relay channel; feeds lag");
                self.lost();
            }
        }
        None
    }
}

/// A message as published: the topic, `\n`, the payload.
pub(crate) fn encode(topic: &str, payload: &[u8]) -> Vec<u8> {
    [topic.as_bytes(), b"\n", payload].concat()
}

fn decode(bytes: &[u8]) -> Option<RelayMessage> {
    let at = bytes.iter().position(|b| *b == b'\n')?;
    let topic = std::str::from_utf8(&bytes[..at]).ok()?;
    herenow_core::relay::check_relay(topic, &bytes[at + 1..]).ok()?;
    Some(RelayMessage {
        topic: topic.to_owned(),
        payload: bytes[at + 1..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herenow_core::RecvError;
    use redis::Value;

    fn message(chan: &str, payload: &[u8]) -> PushInfo {
        PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(chan.as_bytes().to_vec()),
                Value::BulkString(payload.to_vec()),
            ],
        }
    }

    #[tokio::test]
    async fn relay_messages_are_taken_and_others_handed_back() {
        let r = Relays::new("p:relay".into());
        let mut feed = r.feed();
        let other = message("p:u:ann", b"friends");
        assert_eq!(r.push(other.clone()), Some(other));
        assert_eq!(r.push(message("p:relay", &encode("t", b"a\nb"))), None);
        let m = feed.recv().await.unwrap();
        assert_eq!((m.topic.as_str(), &m.payload[..]), ("t", &b"a\nb"[..]));
        // No newline, a bad topic: lost, said as a lag.
        assert_eq!(r.push(message("p:relay", b"no topic")), None);
        assert_eq!(feed.recv().await, Err(RecvError::Lagged(0)));
        assert_eq!(r.push(message("p:relay", b"a b\nx")), None);
        assert_eq!(feed.recv().await, Err(RecvError::Lagged(0)));
    }
}
