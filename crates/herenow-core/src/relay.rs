//! Relaying opaque messages to every server sharing a store: what lets an
//! event sent through one server reach the sockets held by another.
//!
//! A server [`relay_send`](crate::capability::Relay::relay_send)s a message on a
//! *topic* (a short name saying which part of the server it is for) and
//! every server sharing the store, the sender included, reads it from its
//! [`RelayFeed`]. The store neither reads nor keeps the payload: a
//! message relayed while a server was away is not delivered to it later.
//! A feed that fell behind, or whose store lost its link to the shared
//! database, answers [`RecvError::Lagged`](crate::event::RecvError::Lagged) before any further message, so
//! its reader knows messages may be missing and can act on it (close what
//! depended on them) rather than miss them silently.
//!
//! [`RelayTap`] is the channel of a store that is one process (the memory
//! store): a relayed message goes straight to the feeds.

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::error::{InvalidInput, Result};
use crate::feed::Feed;
use crate::limits::{MAX_RELAY_PAYLOAD_BYTES, MAX_RELAY_TOPIC_BYTES};

/// Messages a feed may fall behind before it lags.
pub const RELAY_QUEUE: usize = 16_384;

/// One relayed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayMessage {
    /// What part of a server it is for.
    pub topic: String,
    /// The bytes as relayed.
    pub payload: Vec<u8>,
}

/// Checks a message before it is relayed: a topic of 1 to
/// [`MAX_RELAY_TOPIC_BYTES`] ASCII letters, digits and `- _ . :`, and a
/// payload of at most [`MAX_RELAY_PAYLOAD_BYTES`]. Every store calls it,
/// so no caller can relay past the bounds.
pub fn check_relay(topic: &str, payload: &[u8]) -> Result<()> {
    if topic.is_empty()
        || topic.len() > MAX_RELAY_TOPIC_BYTES
        || !topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        return Err(InvalidInput::BadRelayTopic.into());
    }
    if payload.len() > MAX_RELAY_PAYLOAD_BYTES {
        return Err(InvalidInput::RelayTooLarge { len: payload.len() }.into());
    }
    Ok(())
}

/// The messages relayed by every server sharing a store, from the moment
/// the feed was opened, in the order the store delivered them; a [`Feed`]
/// tells of lost messages first.
pub type RelayFeed = Feed<Arc<RelayMessage>>;

/// The relay of a store that is one process: a message goes straight to
/// every open feed.
#[derive(Debug)]
pub struct RelayTap {
    tx: broadcast::Sender<Arc<RelayMessage>>,
}

impl Default for RelayTap {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(RELAY_QUEUE).0,
        }
    }
}

impl RelayTap {
    /// A new feed, from now on.
    pub fn feed(&self) -> RelayFeed {
        RelayFeed::new(self.tx.subscribe())
    }

    /// Checks and sends a message to every open feed.
    pub fn relay(&self, topic: &str, payload: &[u8]) -> Result<()> {
        check_relay(topic, payload)?;
        // An error only means no feed is open.
        let _ = self.tx.send(Arc::new(RelayMessage {
            topic: topic.to_owned(),
            payload: payload.to_vec(),
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_and_payloads_are_bounded() {
        assert!(check_relay("pusher", b"x").is_ok());
        assert!(check_relay("a.b:c-d_e", &[]).is_ok());
        for bad in ["", "a b", "é", &"t".repeat(MAX_RELAY_TOPIC_BYTES + 1)] {
            assert!(check_relay(bad, b"x").is_err(), "{bad:?}");
        }
        assert!(check_relay("t", &vec![0; MAX_RELAY_PAYLOAD_BYTES]).is_ok());
        assert!(check_relay("t", &vec![0; MAX_RELAY_PAYLOAD_BYTES + 1]).is_err());
    }
}
