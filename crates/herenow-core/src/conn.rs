//! Live connections: presence held by a socket rather than by heartbeats.
//!
//! A WebSocket client is present in a space through a *connection*: a
//! record with an id, the member it belongs to, its own metadata, an
//! invisible flag and an expiry. Pings push the expiry forward; a
//! connection that stops pinging (a cut network, a killed tab, a dead
//! server) expires at the next [`PresenceStore::tick`] after its TTL.
//!
//! The rules every store follows, atomically per call:
//!
//! - a member is present through its connections while at least one
//!   *visible* connection lives; an attach of a visible connection is a
//!   heartbeat "now" for the member (with that connection's metadata);
//! - the first visible connection makes the member `join` (if it was not
//!   present already); further ones emit `connect`; the last one to go
//!   makes it `leave` (reason `explicit` on detach, `timeout` on expiry);
//!   others emit `disconnect`;
//! - an invisible connection causes no event and no heartbeat: the member
//!   sees the space but appears offline. Turning the last visible
//!   connection invisible is a `leave`.
//!
//! **The grace.** A connection that ends without a goodbye (its socket
//! closed or dropped, its server stopping or dead) is not detached but
//! *lingers* ([`LiveConnections::linger`]): it stays for the space's
//! [`grace_ms`](crate::SpaceConfig::grace_ms), its member seen at the
//! moment it ended, and expires at the first `tick` after. The next
//! visible connection of the same member, on any server, takes its place:
//! no `join`, no `connect`, and the lingering one's `leave` or
//! `disconnect` never comes (an `update` only if the metadata differs).
//! So a page reload, a reconnect or a rollout shows nothing to anyone,
//! while a member that does not come back leaves once, when the grace
//! ends, last seen when its connection ended. A member in its grace is
//! present: listed, counted and given a status like any other. An
//! explicit detach is never delayed; a grace of 0 makes a linger a detach.
//!
//! [`LiveConnections::linger`]: crate::LiveConnections::linger
//! [`PresenceStore::tick`]: crate::store::PresenceStore::tick

use compact_str::CompactString;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::id::MemberKey;
use crate::limits;
use crate::meta::Metadata;
use crate::time::Millis;

/// A connection's id: unique across servers (the server makes it from a
/// random process id and a counter).
///
/// 1 to [`limits::MAX_CONN_ID_BYTES`] bytes of ASCII letters, digits and
/// `- _ . :`, so it fits in key names and JSON without escaping.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ConnId(CompactString);

impl ConnId {
    /// Checks `id` and wraps it.
    pub fn new(id: &str) -> Result<Self, InvalidInput> {
        if id.is_empty()
            || id.len() > limits::MAX_CONN_ID_BYTES
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
        {
            return Err(InvalidInput::BadConnId);
        }
        Ok(Self(CompactString::from(id)))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ConnId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ConnId::new(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// "This connection is alive, with this state": open, ping, metadata
/// change and visibility change are all one upsert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attach {
    /// The member the connection holds present; a connection id attached
    /// for another member is refused ([`InvalidInput::ConnIdTaken`]).
    pub member: MemberKey,
    /// The connection's id, the same for every attach of its life.
    pub conn: ConnId,
    /// The connection's metadata (`None`: none).
    pub meta: Option<Metadata>,
    /// Whether it hides its member.
    pub invisible: bool,
    /// How long it lives without another attach, in ms.
    pub ttl_ms: Millis,
}

impl Attach {
    /// Refuses a TTL outside [`limits::MIN_CONN_TTL_MS`] ..=
    /// [`limits::MAX_CONN_TTL_MS`] with [`InvalidInput::ConnTtlOutOfRange`].
    pub fn check(&self) -> Result<(), InvalidInput> {
        if !(limits::MIN_CONN_TTL_MS..=limits::MAX_CONN_TTL_MS).contains(&self.ttl_ms) {
            return Err(InvalidInput::ConnTtlOutOfRange {
                ttl_ms: self.ttl_ms,
            });
        }
        Ok(())
    }
}

/// What an attach did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AttachReport {
    /// The connection was not known before.
    pub opened: bool,
    /// Its member became present (a `join`).
    pub joined: bool,
    /// Its member stopped being present (it turned invisible last).
    pub left: bool,
    /// It took the place of a connection of its member in their grace
    /// (see the module docs): the member never left.
    pub resumed: bool,
}

/// What a detach did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DetachReport {
    /// The connection was attached (`false`: already gone, expired or
    /// never seen; the detach changed nothing).
    pub found: bool,
    /// Its member stopped being present (it was the last visible one).
    pub left: bool,
}

/// One live connection, as listed under its member (Phoenix's "metas").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    /// The id it was attached with.
    pub conn: ConnId,
    /// The metadata of its latest attach (`None`: none given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Metadata>,
    /// Whether it hides its member.
    pub invisible: bool,
    /// When it expires unless pinged, in ms since the UNIX epoch.
    pub expires_ms: Millis,
    /// It ended without a goodbye and lives out its member's grace (it
    /// expires at `expires_ms` unless the member comes back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lingering: bool,
}

/// Sorts a member's connections by id, so every store lists them alike.
pub fn sort_connections(conns: &mut [Connection]) {
    conns.sort_by(|a, b| a.conn.cmp(&b.conn));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_ids() {
        assert!(ConnId::new("a1b2-3:4.x_y").is_ok());
        assert_eq!(ConnId::new(""), Err(InvalidInput::BadConnId));
        assert_eq!(ConnId::new("a b"), Err(InvalidInput::BadConnId));
        assert_eq!(ConnId::new("a{b}"), Err(InvalidInput::BadConnId));
        assert_eq!(
            ConnId::new(&"x".repeat(limits::MAX_CONN_ID_BYTES + 1)),
            Err(InvalidInput::BadConnId)
        );
        assert!(ConnId::new(&"x".repeat(limits::MAX_CONN_ID_BYTES)).is_ok());
    }
}
