//! The Pusher Channels protocol (version 7), so apps on pusher-js and
//! Laravel Echo get herenow's presence by changing a host name (issue 38).
//!
//! Served only when the server has apps (`--pusher-app ID:KEY:SECRET`,
//! [`PusherConfig`]), on the same listener as everything else:
//!
//! - `socket`: the WebSocket at `/app/{key}`: `pusher:connection_established`,
//!   ping / pong, subscribe / unsubscribe to public, `private-`,
//!   `private-encrypted-` (payloads relayed unread) and `presence-`
//!   channels, client events; `frames`: the messages it reads and writes;
//! - `http`: the HTTP API Pusher's server libraries call under
//!   `/apps/{app_id}`, each request checked by Pusher's signature;
//! - `channels` ([`Channels`]): which local sockets subscribe to which
//!   channel, and the fan-out of events to them;
//! - `sign`: the signatures; `config`: the apps.
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
//! - a socket is closed with the protocol's codes: `4001` unknown app key,
//!   `4006` / `4007` / `4008` a bad, unsupported or missing `protocol`
//!   version, `4100` over capacity (the server's socket bound, a client
//!   too slow to read its queue: reconnect after a while), `4200` the
//!   server is shutting down (reconnect at once), `4201` no pong in time;
//! - `pusher:error` with `code` `4301` for a client event past the rate,
//!   `4009` for a client event the socket may not send (a channel it has
//!   not subscribed, a public or encrypted channel), `null` for a message
//!   that cannot be read (not JSON, no `event`, a binary frame, an unknown
//!   `pusher:` event);
//! - `pusher:subscription_error` on the channel, with `{type, error,
//!   status}` (what pusher-js passes to `channel.bind('pusher:subscription_error')`
//!   and Laravel Echo to `.error()`): `AuthError` / `401` for a bad
//!   signature, `BadRequest` / `400` for a bad channel name or
//!   `channel_data`, `LimitReached` / `413` for `user_info` over 1 KiB,
//!   `LimitReached` / `4100` for a presence channel at its member cap.
//!
//! Webhooks in Pusher's format (`--pusher-webhook`) are
//! `crate::webhooks::pusher_format`'s: presence channels' occupancy and
//! members come from the store's webhook outbox, and a client event is
//! handed to it by `socket`'s `client_event`.
//!
//! What is not served yet: `pusher:signin` and the Watchlist, events
//! between servers for public and private channels (presence rosters are
//! right across servers: they live in the store), `channel_occupied` /
//! `channel_vacated` webhooks of public and private channels (their
//! subscriptions are not in the store), cache channels.

mod frames;
mod http;
mod sign;
mod socket;

use axum::Router;
use axum::routing::{get, post};

use crate::config::PusherApp;
use crate::pusher_hub::Pusher;

use crate::state::AppState;

/// The routes of the Pusher protocol, or none when `state` has no apps.
pub fn router(state: &AppState) -> Router<AppState> {
    if state.pusher().is_none() {
        return Router::new();
    }
    Router::new()
        .route("/app/{key}", get(socket::upgrade))
        .route("/apps/{app_id}/events", post(http::events))
        .route("/apps/{app_id}/batch_events", post(http::batch_events))
        .route("/apps/{app_id}/channels", get(http::channels))
        .route("/apps/{app_id}/channels/{channel}", get(http::channel))
        .route("/apps/{app_id}/channels/{channel}/users", get(http::users))
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
}

/// Longest channel name the protocol allows.
pub(crate) const MAX_CHANNEL_BYTES: usize = 164;

impl ChannelKind {
    /// The kind of `name`, or `None` for a name the protocol refuses: 1 to
    /// 164 bytes of letters, digits and `_ - = @ , . ;`.
    pub(crate) fn of(name: &str) -> Option<Self> {
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
        self != ChannelKind::Public
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
    }
}
