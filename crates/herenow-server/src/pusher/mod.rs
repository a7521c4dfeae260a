//! The Pusher Channels protocol (version 7), so apps on pusher-js and
//! Laravel Echo get herenow's presence by changing a host name (issue 38).
//!
//! Served only when the server has apps (`--pusher-app ID:KEY:SECRET`,
//! [`PusherConfig`]), on the same listener as everything else. Everything
//! of the protocol is here:
//!
//! - `socket`: the WebSocket at `/app/{key}`, an adapter on the server's
//!   socket core: `pusher:connection_established`, ping / pong,
//!   subscribe / unsubscribe to public, `private-`, `private-encrypted-`
//!   (payloads relayed unread) and `presence-` channels, client events,
//!   `pusher:signin`;
//! - `http`: the HTTP API Pusher's server libraries call under
//!   `/apps/{app_id}`, each request checked by Pusher's signature;
//! - `hub` ([`Pusher`]): what the sockets share in one server: the apps
//!   as served, the local sockets' channels and their fan-out, the
//!   presence channels' member feeds, the protocol's frames, the relay
//!   between servers;
//! - `config` ([`PusherConfig`]): the apps, their limits and webhooks, as
//!   the flags and the config file give them;
//! - `webhook_format`: Pusher's webhook bodies, handed to the server's
//!   webhooks as the [`EventFormat`](crate::webhooks::EventFormat) of
//!   each app's endpoints;
//! - `sign`: the signatures.
//!
//! The server's state makes the routes' [`PusherState`] (its store,
//! sockets, watchers, webhooks) and reaches the hub for a reload
//! (`AppState::reload`); nothing here names that state, so the protocol
//! sits on the server's parts without a cycle through them.
//!
//! **Presence channels are herenow spaces.** `presence-X` is the space
//! `presence-X`; a subscribed socket is a live connection of the user
//! `user_id` there (with `user_info` as the connection's metadata), so the
//! store's rules make one member per user however many sockets or
//! servers, and herenow's own API answers about these channels as about
//! any space. Member events come from the space's event stream: `join`
//! is `pusher_internal:member_added`, `leave` is `member_removed`.
//!
//! Errors, as this server answers them:
//!
//! - a socket is closed with the protocol's codes: `4001` unknown app key
//!   (or an app a reload removed), `4004` an app over its connection quota
//!   (`max_connections` of its limits, `pusher/config/limits.rs`),
//!   `4006` / `4007` / `4008` a bad, unsupported or missing `protocol`
//!   version, `4100` over capacity (the server's socket bound, a client
//!   too slow to read its queue, or whose ping still waits in it:
//!   reconnect after a while), `4200` the server is shutting down
//!   (reconnect at once), `4201` no pong in time to a ping it was sent;
//! - `pusher:error` with `code` `4301` for a client event past the app's
//!   rate, `null` for one over its data bound, or that the socket may not
//!   send (a channel it has
//!   not subscribed, a public or encrypted channel; Pusher's 4000–4299
//!   mean the connection closes, and it stays open) and for a message
//!   that cannot be read (not JSON, no `event`, a binary frame, an unknown
//!   `pusher:` event);
//! - `pusher:subscription_error` on the channel, with `{type, error,
//!   status}` (what pusher-js passes to `channel.bind('pusher:subscription_error')`
//!   and Laravel Echo to `.error()`): `AuthError` / `401` for a bad
//!   signature, `BadRequest` / `400` for a bad channel name or
//!   `channel_data`, `LimitReached` / `413` for `user_info` over 1 KiB,
//!   `LimitReached` / `4100` for a presence channel at its member cap,
//!   `AuthError` / `403` for another user's `#server-to-user-` channel;
//! - for `pusher:signin`: a bad signature is `pusher:error` `4009`, then
//!   the close `4009`; `user_data` that cannot be used (not an object
//!   with a string `id`, over 16 KiB, `user_info` over 1 KiB, a
//!   `watchlist` past 100 ids) is `pusher:error` with `code` `null`, and
//!   the socket stays, not signed in;
//! - the HTTP API answers a refusal with its status (`400`, `401` for the
//!   signature, `404` for an unknown app, `413` for data or a body past
//!   its bound, `503` when the store fails) and a plain-text sentence
//!   naming the problem, which Pusher's server libraries show as it is.
//!
//! **Users.** `pusher:signin` (`socket`'s `user`) binds a socket to a
//! user: it gets the events sent to `#server-to-user-{id}` (the npm
//! `pusher`'s `sendToUser`), `terminate_connections` closes it (`4009`),
//! and its `watchlist` gets `online` / `offline` of the users named,
//! from herenow's watch: a user is online while online in any space, and
//! a signed-in socket is a live connection of its user in the space
//! `pusher-users:{app_id}`, so "signed in anywhere" counts (as Pusher
//! counts it) as well as any presence channel or herenow's own API.
//!
//! **Between servers.** Events of the HTTP API, client events and
//! `terminate_connections` go out once through the store's relay
//! ([`herenow_core::Relay`]) and each server delivers them to its own
//! sockets from its relay feed (`pusher::hub`); a server whose feed
//! lagged closes its sockets with `4100` (reconnect after a while) rather
//! than leave them missing events.
//!
//! Webhooks in Pusher's format (`--pusher-webhook`) are
//! `webhook_format`'s: presence channels' occupancy and
//! members come from the store's webhook outbox, where `socket`'s
//! `client_event` keeps a client event, on the server whose socket sent
//! it, before relaying it. **Occupancy of other channels**: each server holding a
//! public, `private-` or `private-encrypted-` channel keeps one live
//! connection of the guest named by the channel in the app's space
//! `pusher-channels:{app_id}`, counting its sockets there
//! (`pusher::hub`'s occupancy), so the store's one member per guest
//! makes the guest's `join` the channel's `channel_occupied` and its
//! `leave` `channel_vacated`, once across servers, counts and the channel
//! list are the same on every server, and a dead server's hold expires by
//! the TTL as presence does.
//!
//! What is not served yet: cache channels.

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

/// What the protocol's handlers use of the server, as the state of its
/// routes: its own hub, and the server's store, sockets, watchers,
/// webhooks and timing. The server's state makes it; this module does
/// not know that state.
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
