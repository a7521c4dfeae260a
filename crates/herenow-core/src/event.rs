//! Presence events and subscriptions.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::conn::ConnId;
use crate::id::{MemberKey, SpaceName};
use crate::meta::Metadata;
use crate::policy::Status;
use crate::time::Millis;
use crate::values::MemberStatus;

/// What happened to a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// Offline (or unknown) → present.
    Join,
    /// Online → away: no heartbeat for the space's `online_ms`.
    Away,
    /// Away → online.
    Back,
    /// Present → gone: explicit leave, silence past `away_ms`, or expiry.
    Leave,
    /// Metadata changed while present.
    Update,
    /// A present member opened another visible connection.
    Connect,
    /// A present member closed one of its visible connections, and stays
    /// present through the others.
    Disconnect,
}

impl EventKind {
    /// The lowercase name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Join => "join",
            EventKind::Away => "away",
            EventKind::Back => "back",
            EventKind::Leave => "leave",
            EventKind::Update => "update",
            EventKind::Connect => "connect",
            EventKind::Disconnect => "disconnect",
        }
    }
}

/// Why a member left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaveReason {
    /// It said goodbye: a `leave` call, or a detach of its last visible
    /// connection.
    Explicit,
    /// It went silent for longer than the space's `away_ms`.
    Timeout,
    /// It was swept at the end of its retention while still present
    /// (only when retention is shorter than `away_ms`).
    Expired,
}

/// One change to a space's presence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The space it happened in; a subscription carries only its own.
    pub space: SpaceName,
    /// What happened (`type` on the wire).
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// The member it happened to; kind and id are flattened into the JSON
    /// object.
    #[serde(flatten)]
    pub member: MemberKey,
    /// The member's status after the event.
    pub status: Status,
    /// The member's last heartbeat, if it still has one.
    pub last_seen_ms: Option<Millis>,
    /// The member's metadata after the event; for an event a connection
    /// caused, that connection's metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Metadata>,
    /// Why the member left; only on `leave`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<LeaveReason>,
    /// The connection that caused the event, if one did (see
    /// [`crate::conn`]). A client keeps a member's connections ("metas") by
    /// this id: `join`, `connect`, `back` and `update` set it,
    /// `disconnect` and `leave` remove it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conn: Option<ConnId>,
}

/// A consistent picture of a space, then everything that happens after it.
pub struct Subscription {
    /// Members present (online or away) when the subscription started, most
    /// recent first, at most [`crate::limits::MAX_SNAPSHOT`].
    pub snapshot: Vec<MemberStatus>,
    /// How many present members the snapshot left out.
    pub snapshot_omitted: u64,
    /// The events after the snapshot.
    pub events: EventReceiver,
}

/// The receiving end of a space's events.
pub struct EventReceiver(pub(crate) broadcast::Receiver<Arc<Event>>);

/// Why [`EventReceiver::recv`] returned no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// The subscriber fell behind and missed this many events. It should
    /// start over from a new snapshot.
    #[error("subscriber lagged and missed {0} events")]
    Lagged(u64),
    /// The store is shutting down; no more events will come.
    #[error("event stream closed")]
    Closed,
}

impl EventReceiver {
    /// Wraps a broadcast receiver (for stores outside this crate).
    pub fn new(rx: broadcast::Receiver<Arc<Event>>) -> Self {
        Self(rx)
    }

    /// Waits for the next event.
    pub async fn recv(&mut self) -> Result<Arc<Event>, RecvError> {
        match self.0.recv().await {
            Ok(e) => Ok(e),
            Err(broadcast::error::RecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
            Err(broadcast::error::RecvError::Closed) => Err(RecvError::Closed),
        }
    }

    /// The next event if one is waiting, without waiting: `Ok(None)` when
    /// none is; errors as [`recv`](Self::recv)'s. For synchronous callers
    /// (the engines' own tests).
    pub fn try_recv(&mut self) -> Result<Option<Arc<Event>>, RecvError> {
        match self.0.try_recv() {
            Ok(e) => Ok(Some(e)),
            Err(broadcast::error::TryRecvError::Empty) => Ok(None),
            Err(broadcast::error::TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
            Err(broadcast::error::TryRecvError::Closed) => Err(RecvError::Closed),
        }
    }
}
