//! What a store may offer beyond presence: one trait per capability, each
//! reached through its accessor on [`PresenceStore`](crate::PresenceStore) (`None` when the
//! store does not offer it).
//!
//! A capability is a set of calls that only some stores can answer: a
//! seed's Redis layout keeps no connections, captures no events and
//! cannot find a user's spaces from the user. Asking the store once, when
//! the server starts, lets a flag that needs a capability be refused
//! there, rather than every request that needs it failing with
//! [`Error::Unsupported`](crate::Error::Unsupported).
//!
//! [`Capability`](crate::store::Capability) names each one; a store is
//! asked what it offers with
//! [`Capability::offered_by`](crate::store::Capability::offered_by).
//!
//! Each trait is `Send + Sync`, async and fallible like
//! [`PresenceStore`](crate::PresenceStore), and as free of HTTP and Redis types. A store offers
//! one by implementing it and returning `Some(self)` from the accessor.

use async_trait::async_trait;

use crate::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use crate::error::Result;
use crate::follow::UserFeed;
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::outbox::{OutboxEvent, OutboxOptions, OutboxStats, SpaceHook};
use crate::relay::RelayFeed;
use crate::time::Millis;
use crate::values::{ErasureReport, SeenAnywhere};

/// Live connections, by the rules of [`crate::conn`].
#[async_trait]
pub trait LiveConnections: Send + Sync {
    /// Opens, pings or changes a live connection.
    async fn attach(&self, space: &SpaceName, attach: &Attach) -> Result<AttachReport>;

    /// Closes a live connection of `member`.
    async fn detach(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport>;

    /// A live connection of `member` ended without a goodbye (its socket
    /// closed or dropped, its server stopping): it lingers for the space's
    /// grace and then expires, unless the member's next connection takes
    /// its place (see [`crate::conn`]). With a grace of 0, a detach. An id
    /// that is unknown or another member's is not found.
    async fn linger(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport>;

    /// Each member's live connections (invisible ones included), by id, in
    /// the order asked.
    async fn connections(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>>;
}

/// Following users across spaces (see [`crate::follow`]).
#[async_trait]
pub trait Following: Send + Sync {
    /// A feed of what happens to the users this server follows
    /// ([`follow`](Self::follow)), in every space: their status-changing
    /// events and friend-set changes. A server opens one and reads it for
    /// as long as it has watchers.
    fn user_feed(&self) -> Result<UserFeed>;

    /// Follows each of `users` once more: from now on their changes
    /// reach [`user_feed`](Self::user_feed)s, whichever server made them.
    /// Counted: a user followed twice stays followed until unfollowed
    /// twice.
    async fn follow(&self, users: &[MemberId]) -> Result<()>;

    /// Follows each of `users` once less.
    async fn unfollow(&self, users: &[MemberId]) -> Result<()>;
}

/// The webhook outbox (see [`crate::outbox`]): events kept until a
/// consumer acknowledges them, shared by every server on the store.
#[async_trait]
pub trait WebhookOutbox: Send + Sync {
    /// Turns the outbox on: from now on every `join`, `away`, `back`,
    /// `leave` and `update`, and a space's `occupied` / `vacated`, is kept
    /// until a consumer acknowledges it. Calling it again changes the
    /// options.
    async fn outbox_open(&self, options: OutboxOptions) -> Result<()>;

    /// Claims up to `max` events for `consumer` (a name unique to the
    /// server): first those another consumer claimed and left
    /// unacknowledged for at least `reclaim_idle_ms`, then new ones, each
    /// space's in the order they happened. A space's events go to one
    /// consumer at a time.
    async fn outbox_claim(
        &self,
        consumer: &str,
        max: usize,
        reclaim_idle_ms: Millis,
    ) -> Result<Vec<OutboxEvent>>;

    /// Forgets delivered events, by [`OutboxEvent::id`], a batch of 1 to
    /// [`MAX_BATCH`](crate::limits::MAX_BATCH) ids ([`check_batch`](crate::store::check_batch));
    /// unknown ids (acknowledged before, or trimmed) are ignored.
    async fn outbox_ack(&self, ids: &[String]) -> Result<()>;

    /// How many events wait, are claimed, and were trimmed.
    async fn outbox_stats(&self) -> Result<OutboxStats>;

    /// Keeps `body` as a message of `space` ([`OutboxKind::Message`](crate::outbox::OutboxKind::Message))
    /// while the outbox captures, claimed in order with the space's
    /// events; `false` when it does not capture (nothing kept). As
    /// durable as the space's events. A body over
    /// [`MAX_OUTBOX_MESSAGE_BYTES`](crate::limits::MAX_OUTBOX_MESSAGE_BYTES)
    /// is refused.
    async fn outbox_message(&self, space: &SpaceName, body: &str) -> Result<bool>;
}

/// Webhook endpoints a space's configuration names, kept beside its
/// policy. A store offering it offers a [`WebhookOutbox`] too: naming an
/// endpoint opens the outbox.
#[async_trait]
pub trait SpaceWebhooks: Send + Sync {
    /// The webhook endpoints `space`'s configuration names (none unless
    /// set).
    async fn space_hooks(&self, space: &SpaceName) -> Result<Vec<SpaceHook>>;

    /// Replaces the webhook endpoints of `space` (checked by
    /// [`SpaceHook::check_all`]; empty removes them), as durably as
    /// [`set_config`](crate::PresenceStore::set_config). Naming any opens the
    /// outbox (with the default options when it was closed), so the
    /// space's events are kept from this call on, whichever server
    /// delivers them. Removing the last space's endpoints may close it
    /// again where it was opened only for spaces
    /// ([`OutboxOptions::for_spaces`]: the memory store does).
    async fn set_space_hooks(&self, space: &SpaceName, hooks: &[SpaceHook]) -> Result<()>;

    /// A number that changes whenever any space's webhook endpoints are
    /// set, so a server can cache them and look again only after a change.
    async fn space_hooks_version(&self) -> Result<u64>;
}

/// A user found from the user, in every space: what a store needs an
/// index of each user's spaces and remembered times for. A layout keyed
/// by space alone cannot answer either call without reading every space.
#[async_trait]
pub trait UserIndex: Send + Sync {
    /// Each user's newest last seen over every space, present or
    /// remembered, in the order asked (at most
    /// [`crate::limits::MAX_BATCH`]): "last seen anywhere", what a contact
    /// list shows.
    async fn seen_anywhere(&self, users: &[MemberId]) -> Result<Vec<SeenAnywhere>>;

    /// Erases a user everywhere, for account deletion and erasure
    /// requests: its presence in every space (each space gets a `leave`),
    /// its remembered last-seen times, its friend set, and its place in
    /// other users' friend sets. Durable before it returns, like a friend
    /// write.
    async fn erase_user(&self, user: &MemberId) -> Result<ErasureReport>;
}

/// Opaque messages relayed to every server sharing the store, at most
/// once (see [`crate::relay`]).
#[async_trait]
pub trait Relay: Send + Sync {
    /// A feed of every message relayed from now on, by any server sharing
    /// the store, this one included.
    async fn relay_feed(&self) -> Result<RelayFeed>;

    /// Relays `payload` on `topic` to every open feed (checked by
    /// [`check_relay`](crate::relay::check_relay)). `Ok` once the store
    /// took it; it reaches each feed afterwards, in the order relayed by
    /// this store.
    async fn relay_send(&self, topic: &str, payload: &[u8]) -> Result<()>;
}
