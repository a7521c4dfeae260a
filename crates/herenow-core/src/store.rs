//! The [`PresenceStore`] trait. The values that cross it live in
//! [`crate::values`] and are re-exported here.

use async_trait::async_trait;

use crate::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use crate::error::{Error, Result};
use crate::event::Subscription;
use crate::follow::UserFeed;
use crate::id::{MemberId, MemberKey, SpaceName};
use crate::outbox::{OutboxEvent, OutboxOptions, OutboxStats, SpaceHook};

use crate::policy::SpaceConfig;
use crate::time::Millis;

pub use crate::values::{
    Counts, ErasureReport, Heartbeat, HeartbeatReport, KindFilter, ListQuery, MemberStatus, Order,
    Page, SeenAnywhere, SpaceSummary, TickReport, check_batch, sort_most_recent_first,
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

    /// Spaces holding members, by name, after `after`, at most `limit`.
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

    /// Each user's newest last seen over every space, present or
    /// remembered, in the order asked (at most [`crate::limits::MAX_BATCH`]):
    /// "last seen anywhere", what a contact list shows.
    async fn seen_anywhere(&self, users: &[MemberId]) -> Result<Vec<SeenAnywhere>> {
        let _ = users;
        Err(Error::Unsupported {
            what: "last seen anywhere",
            store: self.name().to_owned(),
        })
    }

    /// Erases a user everywhere, for account deletion and erasure
    /// requests: its presence in every space (each space gets a `leave`),
    /// its remembered last-seen times, its friend set, and its place in
    /// other users' friend sets. Durable before it returns, like a friend
    /// write.
    async fn erase_user(&self, user: &MemberId) -> Result<ErasureReport> {
        let _ = user;
        Err(Error::Unsupported {
            what: "erasing a user",
            store: self.name().to_owned(),
        })
    }

    /// A feed of what happens to the users this server follows
    /// ([`follow`](Self::follow)), in every space: their status-changing
    /// events and friend-set changes (see [`crate::follow`]). A server
    /// opens one and reads it for as long as it has watchers.
    fn user_feed(&self) -> Result<UserFeed> {
        Err(Error::Unsupported {
            what: "watching users",
            store: self.name().to_owned(),
        })
    }

    /// Follows each of `users` once more: from now on their changes
    /// reach [`user_feed`](Self::user_feed)s, whichever server made them.
    /// Counted: a user followed twice stays followed until unfollowed
    /// twice.
    async fn follow(&self, users: &[MemberId]) -> Result<()> {
        let _ = users;
        Err(Error::Unsupported {
            what: "watching users",
            store: self.name().to_owned(),
        })
    }

    /// Follows each of `users` once less.
    async fn unfollow(&self, users: &[MemberId]) -> Result<()> {
        let _ = users;
        Ok(())
    }

    /// Turns the webhook outbox on (see [`crate::outbox`]): from now on
    /// every `join`, `away`, `back`, `leave` and `update`, and a space's
    /// `occupied` / `vacated`, is kept until a consumer acknowledges it.
    /// Calling it again changes the options.
    async fn outbox_open(&self, options: OutboxOptions) -> Result<()> {
        let _ = options;
        Err(Error::Unsupported {
            what: "webhooks",
            store: self.name().to_owned(),
        })
    }

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
    ) -> Result<Vec<OutboxEvent>> {
        let _ = (consumer, max, reclaim_idle_ms);
        Err(Error::Unsupported {
            what: "webhooks",
            store: self.name().to_owned(),
        })
    }

    /// Forgets delivered events, by [`OutboxEvent::id`]; unknown ids (acknowledged
    /// before, or trimmed) are ignored.
    async fn outbox_ack(&self, ids: &[String]) -> Result<()> {
        let _ = ids;
        Err(Error::Unsupported {
            what: "webhooks",
            store: self.name().to_owned(),
        })
    }

    /// How many events wait, are claimed, and were trimmed.
    async fn outbox_stats(&self) -> Result<OutboxStats> {
        Err(Error::Unsupported {
            what: "webhooks",
            store: self.name().to_owned(),
        })
    }

    /// The webhook endpoints `space`'s configuration names (none unless
    /// set).
    async fn space_hooks(&self, space: &SpaceName) -> Result<Vec<SpaceHook>> {
        let _ = space;
        Err(Error::Unsupported {
            what: "webhooks",
            store: self.name().to_owned(),
        })
    }

    /// Replaces the webhook endpoints of `space` (checked by
    /// [`SpaceHook::check_all`]; empty removes them), as durably as
    /// [`set_config`](Self::set_config). Naming any opens the outbox
    /// (with the default options when it was closed), so the space's
    /// events are kept from this call on, whichever server delivers them.
    /// Removing the last space's endpoints may close it again where it
    /// was opened only for spaces ([`OutboxOptions::for_spaces`]: the
    /// memory store does).
    async fn set_space_hooks(&self, space: &SpaceName, hooks: &[SpaceHook]) -> Result<()> {
        let _ = (space, hooks);
        Err(Error::Unsupported {
            what: "webhooks",
            store: self.name().to_owned(),
        })
    }

    /// A number that changes whenever any space's webhook endpoints are
    /// set, so a server can cache them and look again only after a change.
    async fn space_hooks_version(&self) -> Result<u64> {
        Err(Error::Unsupported {
            what: "webhooks",
            store: self.name().to_owned(),
        })
    }

    /// Opens, pings or changes a live connection (see [`crate::conn`]).
    /// Stores without connections answer [`Error::Unsupported`].
    async fn attach(&self, space: &SpaceName, attach: &Attach) -> Result<AttachReport> {
        let _ = (space, attach);
        Err(Error::Unsupported {
            what: "live connections",
            store: self.name().to_owned(),
        })
    }

    /// Closes a live connection of `member`.
    async fn detach(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        let _ = (space, member, conn);
        Err(Error::Unsupported {
            what: "live connections",
            store: self.name().to_owned(),
        })
    }

    /// Each member's live connections (invisible ones included), by id, in
    /// the order asked. A store without connections has none.
    async fn connections(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>> {
        let _ = space;
        check_batch(members.len())?;
        Ok(vec![Vec::new(); members.len()])
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
        let window = config.check_window(window_ms.unwrap_or(config.window_ms))?;
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
