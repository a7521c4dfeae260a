//! The [`PresenceStore`] trait: the presence operations every store has;
//! what only some stores can do is [`crate::capability`]'s, named by
//! [`Capability`]. The values that cross it live in [`crate::values`] and
//! are re-exported here.

use async_trait::async_trait;

use crate::capability::{
    Following, LiveConnections, Relay, SpaceWebhooks, UserIndex, WebhookOutbox,
};
use crate::error::{Error, Result};
use crate::event::Subscription;
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::policy::SpaceConfig;
use crate::time::Millis;

pub use crate::values::{
    Counts, ErasureReport, Heartbeat, HeartbeatReport, KindFilter, ListQuery, MemberStatus, Order,
    Page, SeenAnywhere, SpaceSummary, TickReport, check_batch, check_beats, sort_most_recent_first,
};

/// Where presence lives.
///
/// Small, async and fallible, used as `Arc<dyn PresenceStore>`. It knows no
/// HTTP and no Redis types. Every batch argument is bounded by
/// [`crate::limits::MAX_BATCH`]; stores check it and answer
/// [`InvalidInput::BatchTooLarge`](crate::InvalidInput::BatchTooLarge). The derived queries
/// ([`online_friends`](Self::online_friends),
/// [`online_among`](Self::online_among)) have default implementations over
/// the primitives; a store overrides them where it can do better.
///
/// A new backend implements the required methods and passes the contract
/// suite's core part; the capability accessors default to `None`
/// ([`crate::capability`]).
#[async_trait]
pub trait PresenceStore: Send + Sync + 'static {
    /// A short name for logs and metrics (`memory`, `redis`).
    fn name(&self) -> &'static str;

    /// The store's current time: the time "now" heartbeats get.
    fn now_ms(&self) -> Millis;

    /// Records heartbeats in `space`; newest time wins per member.
    async fn heartbeat(&self, space: &SpaceName, beats: &[Heartbeat]) -> Result<HeartbeatReport>;

    /// Members say goodbye: offline at once, their last seen remembered as
    /// the leave's time (see [`SpaceConfig::remember_ms`]); one no longer
    /// present (timed out, not yet expired) keeps its last heartbeat.
    /// Returns how many were present.
    async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64>;

    /// Last-seen time and status of each member, in the order asked.
    async fn status(&self, space: &SpaceName, members: &[MemberKey]) -> Result<Vec<MemberStatus>>;

    /// Members seen within a window, one page at a time.
    async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page>;

    /// How many users and guests were seen within a window (`None`: the
    /// space's default window).
    async fn count(&self, space: &SpaceName, window_ms: Option<Millis>) -> Result<Counts>;

    /// The space's time policy (the defaults for a space never configured).
    async fn config(&self, space: &SpaceName) -> Result<SpaceConfig>;

    /// Sets the space's time policy.
    async fn set_config(&self, space: &SpaceName, config: SpaceConfig) -> Result<()>;

    /// Spaces holding members, by name, after `after`, at most `limit`
    /// (and at most [`limits::MAX_BATCH`](crate::limits::MAX_BATCH) per
    /// call: callers page with `after`).
    async fn spaces(&self, after: Option<&SpaceName>, limit: usize) -> Result<Vec<SpaceSummary>>;

    /// Replaces a user's friend set. Friend sets are global, not per space.
    async fn set_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64>;

    /// Adds to a user's friend set; returns its new size.
    async fn add_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64>;

    /// Removes from a user's friend set; returns its new size.
    async fn remove_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64>;

    /// A user's friends, sorted by id.
    async fn friends(&self, user: &MemberId) -> Result<Vec<MemberId>>;

    /// A consistent snapshot of the members present in `space`, and every
    /// event after it.
    async fn subscribe(&self, space: &SpaceName) -> Result<Subscription>;

    /// One round of background work: emit `away`/`leave` for members whose
    /// status changed with time, and forget members past their retention,
    /// without holding any space for long.
    async fn tick(&self) -> Result<TickReport>;

    /// How messages name this store: its [`name`](Self::name) unless it
    /// has a more precise one (a seed's layout names the layout), so an
    /// `Unsupported` answer or a refused flag says which store lacks what.
    fn label(&self) -> String {
        self.name().to_owned()
    }

    /// Live connections (WebSocket presence), if this store keeps them.
    fn live_connections(&self) -> Option<&dyn LiveConnections> {
        None
    }

    /// Following users across spaces (watching), if this store can.
    fn following(&self) -> Option<&dyn Following> {
        None
    }

    /// The webhook outbox, if this store can keep events.
    fn webhook_outbox(&self) -> Option<&dyn WebhookOutbox> {
        None
    }

    /// Spaces' webhook endpoints, if this store keeps them.
    fn space_webhooks(&self) -> Option<&dyn SpaceWebhooks> {
        None
    }

    /// Last seen anywhere and erasure, if this store can find a user's
    /// spaces from the user.
    fn user_index(&self) -> Option<&dyn UserIndex> {
        None
    }

    /// A relay of messages to every server sharing the store, if this
    /// store has one.
    fn relay(&self) -> Option<&dyn Relay> {
        None
    }

    /// Of `members`, those seen within the window, most recent first, at
    /// most `limit`: present members only, never remembered ones.
    ///
    /// The default filters [`status`](Self::status) by time, so it cannot
    /// tell a remembered member who left a minute ago from a present one:
    /// a store that remembers last seen must override it (the memory and
    /// Redis stores do; the seed layouts remember nothing).
    async fn online_among(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
    ) -> Result<Vec<MemberStatus>> {
        let config = self.config(space).await?;
        let window = config.check_window(window_ms)?;
        if members.is_empty() {
            // Nobody to look up (a user without friends): not a bad batch.
            return Ok(Vec::new());
        }
        let cutoff = self.now_ms().saturating_sub(window);
        let mut online: Vec<MemberStatus> = self
            .status(space, members)
            .await?
            .into_iter()
            .filter(|m| m.last_seen_ms.is_some_and(|t| t >= cutoff))
            .collect();
        sort_most_recent_first(&mut online);
        online.dedup_by(|a, b| a.member == b.member);
        online.truncate(limit);
        Ok(online)
    }

    /// A user's friends seen within the window in `space`, most recent
    /// first, at most `limit` (seed 002's "online friends").
    async fn online_friends(
        &self,
        space: &SpaceName,
        user: &MemberId,
        window_ms: Option<Millis>,
        limit: usize,
    ) -> Result<Vec<MemberStatus>> {
        let friends: Vec<MemberKey> = self
            .friends(user)
            .await?
            .into_iter()
            .map(MemberKey::user)
            .collect();
        self.online_among(space, &friends, window_ms, limit).await
    }
}

impl dyn PresenceStore {
    /// The answer to a call this store lacks `capability` for:
    /// [`Error::Unsupported`] naming the capability (its
    /// [`phrase`](Capability::phrase)) and the store's
    /// [`label`](PresenceStore::label).
    pub fn lacks(&self, capability: Capability) -> Error {
        Error::Unsupported {
            what: capability.phrase(),
            store: self.label(),
        }
    }
}

/// A capability a store may offer, by name: what a server checks its
/// flags against at start, what the contract suite runs a part of, and
/// what a call to a store without it answers (`store.lacks(capability)`).
/// Here rather than in [`crate::capability`], beside the accessors it
/// asks, so that module of traits needs nothing of this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// [`LiveConnections`]: WebSocket presence.
    LiveConnections,
    /// [`Following`]: watching users across spaces.
    Following,
    /// [`WebhookOutbox`]: events kept for webhooks.
    WebhookOutbox,
    /// [`SpaceWebhooks`]: webhook endpoints named by a space's
    /// configuration.
    SpaceWebhooks,
    /// [`UserIndex`]: a user found in every space (last seen anywhere,
    /// erasure).
    UserIndex,
    /// [`Relay`]: messages relayed to every server sharing the store.
    Relay,
}

impl Capability {
    /// Every capability, in the order documentation lists them.
    pub const ALL: [Capability; 6] = [
        Capability::LiveConnections,
        Capability::Following,
        Capability::WebhookOutbox,
        Capability::SpaceWebhooks,
        Capability::UserIndex,
        Capability::Relay,
    ];

    /// What it is, as a phrase for messages ("live connections").
    pub fn phrase(self) -> &'static str {
        match self {
            Capability::LiveConnections => "live connections",
            Capability::Following => "following users",
            Capability::WebhookOutbox => "a webhook outbox",
            Capability::SpaceWebhooks => "spaces' webhook endpoints",
            Capability::UserIndex => "an index of each user's spaces",
            Capability::Relay => "a relay between servers",
        }
    }

    /// Whether `store` offers it, asked through its accessor.
    pub fn is_offered_by(self, store: &dyn PresenceStore) -> bool {
        match self {
            Capability::LiveConnections => store.live_connections().is_some(),
            Capability::Following => store.following().is_some(),
            Capability::WebhookOutbox => store.webhook_outbox().is_some(),
            Capability::SpaceWebhooks => store.space_webhooks().is_some(),
            Capability::UserIndex => store.user_index().is_some(),
            Capability::Relay => store.relay().is_some(),
        }
    }

    /// The capabilities `store` offers, in [`ALL`](Self::ALL)'s order.
    pub fn offered_by(store: &dyn PresenceStore) -> Vec<Capability> {
        Self::ALL
            .into_iter()
            .filter(|c| c.is_offered_by(store))
            .collect()
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.phrase())
    }
}
