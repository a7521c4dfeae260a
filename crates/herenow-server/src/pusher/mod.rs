//! The Pusher Channels protocol (version 7), so apps on pusher-js and
//! Laravel Echo get herenow's presence by changing a host name. What
//! clients see (close codes, errors, limits, what differs from Pusher) is
//! docs/PUSHER.md; the map of the folder is ARCHITECTURE.md.
//!
//! - `socket`: the WebSocket at `/app/{key}`, an adapter on the socket core;
//! - `http`: the HTTP API under `/apps/{app_id}`, checked by Pusher's signature;
//! - `hub` ([`Pusher`]): what one server's sockets share (apps, channels and
//!   their fan-out, member feeds, frames, the relay between servers);
//! - `config` ([`PusherConfig`]): the apps and their limits and webhooks;
//! - `webhook_format`: Pusher's webhook bodies, an
//!   [`EventFormat`](crate::webhooks::EventFormat); `sign`: the signatures.
//!
//! Nothing here names the server's state: the routes get a
//! [`PusherState`], so the protocol sits on the server's parts without a
//! cycle through them.
//!
//! `presence-X` is the herenow space `presence-X`, a subscribed socket a
//! live connection of its `user_id` there (`user_info` its metadata): the
//! store makes one member per user across sockets and servers. A signed-in
//! socket is a live connection of its user in `pusher-users:{app_id}`; a
//! server holding a public or private channel holds one live connection of
//! the guest named by the channel in `pusher-channels:{app_id}` (the
//! guest's `join` / `leave` are `channel_occupied` / `channel_vacated`).
//! Events, client events and `terminate_connections` go once through the
//! store's [`herenow_core::Relay`]; each server delivers them to its own
//! sockets, and closes them with `4100` when its feed lagged.

mod config;
mod http;
mod hub;
mod sign;
mod socket;
mod webhook_format;

use hub::frames;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use herenow_core::PresenceStore;
use tokio_util::sync::CancellationToken;

pub use config::{PusherApp, PusherAppLimits, PusherConfig, PusherConfigError, PusherWebhook};
pub use hub::{AppsChange, Pusher};

use crate::socket::Hub;
use crate::watch::WatchHub;
use crate::webhooks::Webhooks;

/// What the protocol's routes use of the server.
#[derive(Clone)]
pub struct PusherState(Arc<PusherParts>);

/// The parts of a [`PusherState`].
pub struct PusherParts {
    /// The apps, channels and sockets of the protocol.
    pub hub: Arc<Pusher>,
    /// The store every handler talks to.
    pub store: Arc<dyn PresenceStore>,
    /// The server's WebSocket connections, of both protocols.
    pub sockets: Arc<Hub>,
    /// The watchers of users (a signed-in socket's `watchlist`).
    pub watch: Arc<WatchHub>,
    /// Where client events are kept for the apps' webhooks.
    pub webhooks: Webhooks,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// The longest one store call may take.
    pub request_timeout: Duration,
}

impl PusherState {
    /// The routes' state of `parts`.
    pub fn new(parts: PusherParts) -> Self {
        Self(Arc::new(parts))
    }

    pub(crate) fn pusher(&self) -> &Arc<Pusher> {
        &self.0.hub
    }

    pub(crate) fn store(&self) -> &Arc<dyn PresenceStore> {
        &self.0.store
    }

    pub(crate) fn ws(&self) -> &Hub {
        &self.0.sockets
    }

    pub(crate) fn watch(&self) -> &Arc<WatchHub> {
        &self.0.watch
    }

    pub(crate) fn webhooks(&self) -> &Webhooks {
        &self.0.webhooks
    }

    pub(crate) fn shutdown_token(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.0.request_timeout
    }
}

/// The routes of the Pusher protocol, or none when the server has no
/// apps (`state` is `None`).
pub fn router<S: Clone + Send + Sync + 'static>(state: Option<PusherState>) -> Router<S> {
    let Some(state) = state else {
        return Router::new();
    };
    Router::new()
        .route("/app/{key}", get(socket::upgrade))
        .route("/apps/{app_id}/events", post(http::events))
        .route("/apps/{app_id}/batch_events", post(http::batch_events))
        .route("/apps/{app_id}/channels", get(http::channels))
        .route("/apps/{app_id}/channels/{channel}", get(http::channel))
        .route("/apps/{app_id}/channels/{channel}/users", get(http::users))
        .route(
            "/apps/{app_id}/users/{user_id}/terminate_connections",
            post(http::terminate_connections),
        )
        .with_state(state)
}

/// What kind of channel a name makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChannelKind {
    /// Anyone may subscribe; no client events.
    Public,
    /// `private-`: a signature to subscribe; client events.
    Private,
    /// `private-encrypted-`: a signature; payloads are encrypted by the
    /// apps and relayed unread; no client events.
    Encrypted,
    /// `presence-`: a signature over the member's `channel_data`; a
    /// herenow space.
    Presence,
    /// `#server-to-user-{id}`: the events sent to a user, which every
    /// socket signed in as that user gets (and only those).
    User,
}

/// The prefix of a user's channel.
pub(crate) const USER_CHANNEL: &str = "#server-to-user-";

/// Longest channel name the protocol allows.
pub(crate) const MAX_CHANNEL_BYTES: usize = 164;

impl ChannelKind {
    /// Whether each server writes its subscriptions of such a channel to
    /// the store (public and private ones; a presence channel's are its
    /// space's members, a user's channel is not listed).
    pub(crate) fn is_occupancy(self) -> bool {
        matches!(self, Self::Public | Self::Private | Self::Encrypted)
    }

    /// The kind of `name`, or `None` for a name the protocol refuses: 1 to
    /// 164 bytes of letters, digits and `_ - = @ , . ;`, or
    /// `#server-to-user-` and a user id (a herenow member id).
    pub(crate) fn of(name: &str) -> Option<Self> {
        if let Some(user) = name.strip_prefix(USER_CHANNEL) {
            return herenow_core::MemberId::new(user)
                .ok()
                .map(|_| ChannelKind::User);
        }
        if name.is_empty()
            || name.len() > MAX_CHANNEL_BYTES
            || !name.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(b, b'_' | b'-' | b'=' | b'@' | b',' | b'.' | b';')
            })
        {
            return None;
        }
        Some(if name.starts_with("private-encrypted-") {
            ChannelKind::Encrypted
        } else if name.starts_with("private-") {
            ChannelKind::Private
        } else if name.starts_with("presence-") {
            ChannelKind::Presence
        } else {
            ChannelKind::Public
        })
    }

    /// Whether subscribing takes a signature.
    pub(crate) fn needs_auth(self) -> bool {
        !matches!(self, ChannelKind::Public | ChannelKind::User)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_kinds() {
        assert_eq!(ChannelKind::of("news"), Some(ChannelKind::Public));
        assert_eq!(ChannelKind::of("private-a"), Some(ChannelKind::Private));
        assert_eq!(
            ChannelKind::of("private-encrypted-a"),
            Some(ChannelKind::Encrypted)
        );
        assert_eq!(ChannelKind::of("presence-a=b"), Some(ChannelKind::Presence));
        assert_eq!(ChannelKind::of(""), None);
        assert_eq!(ChannelKind::of("a b"), None);
        assert_eq!(ChannelKind::of(&"a".repeat(165)), None);
        assert!(ChannelKind::of(&"a".repeat(164)).is_some());
        assert_eq!(
            ChannelKind::of("#server-to-user-7"),
            Some(ChannelKind::User)
        );
        assert_eq!(ChannelKind::of("#server-to-user-"), None);
        assert_eq!(ChannelKind::of("#other"), None);
    }
}
