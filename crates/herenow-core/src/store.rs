//! The [`PresenceStore`] trait and the values that cross it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
use crate::error::{Error, InvalidInput, Result};
use crate::event::Subscription;
use crate::id::{MemberId, MemberKey, MemberKind, SpaceName};
use crate::limits;
use crate::meta::Metadata;
use crate::policy::{SpaceConfig, Status};
use crate::time::Millis;

/// "This member was active": one item of a heartbeat call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// Who.
    pub member: MemberKey,
    /// When; `None` means "now" by the store's clock. An explicit time is
    /// for imports and backfills, and the server allows it to write-scoped
    /// callers only.
    pub at_ms: Option<Millis>,
    /// New metadata; `None` keeps what the member had.
    pub meta: Option<Metadata>,
}

impl Heartbeat {
    /// A heartbeat "now" without metadata.
    pub fn now(member: MemberKey) -> Self {
        Self {
            member,
            at_ms: None,
            meta: None,
        }
    }
}

/// What a heartbeat call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HeartbeatReport {
    /// Heartbeats applied.
    pub accepted: u64,
    /// Of those, members that became present (a `join`).
    pub joined: u64,
    /// Heartbeats ignored because the member already had a newer time, or
    /// because the time was already past the retention.
    pub stale: u64,
}

/// A member's presence as answered to queries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberStatus {
    /// Who.
    #[serde(flatten)]
    pub member: MemberKey,
    /// Online, away or offline, by the space's thresholds.
    pub status: Status,
    /// Last heartbeat; `None` if never seen (or forgotten).
    pub last_seen_ms: Option<Millis>,
    /// Metadata, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Metadata>,
}

/// Which kinds of members a query covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KindFilter {
    /// Users only (the default, like seed 000's "who's online").
    #[default]
    Users,
    /// Guests only.
    Guests,
    /// Both.
    All,
}

impl KindFilter {
    /// Whether `kind` passes.
    pub fn admits(self, kind: MemberKind) -> bool {
        match self {
            KindFilter::Users => kind == MemberKind::User,
            KindFilter::Guests => kind == MemberKind::Guest,
            KindFilter::All => true,
        }
    }
}

/// The order of a listing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Most recently seen first.
    #[default]
    Recent,
    /// By id (bytewise), users before guests for equal ids.
    Id,
}

/// A "who's online" query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListQuery {
    /// Members seen within this many ms; `None`: the space's window.
    pub window_ms: Option<Millis>,
    /// Users, guests or both.
    pub kinds: KindFilter,
    /// Sort order.
    pub order: Order,
    /// Page size, 1 to [`limits::MAX_PAGE`].
    pub limit: usize,
    /// Where the previous page ended.
    pub cursor: Option<String>,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            window_ms: None,
            kinds: KindFilter::Users,
            order: Order::Recent,
            limit: 100,
            cursor: None,
        }
    }
}

impl ListQuery {
    /// Checks the page size.
    pub fn check_limit(&self) -> Result<(), InvalidInput> {
        if self.limit == 0 || self.limit > limits::MAX_PAGE {
            return Err(InvalidInput::LimitOutOfRange {
                got: self.limit as i64,
                max: limits::MAX_PAGE,
            });
        }
        Ok(())
    }
}

/// One page of a listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Page {
    /// The members.
    pub members: Vec<MemberStatus>,
    /// Pass this back for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// How many members were seen within a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Users.
    pub users: u64,
    /// Guests.
    pub guests: u64,
}

impl Counts {
    /// Users and guests together.
    pub fn total(&self) -> u64 {
        self.users + self.guests
    }
}

/// A space, as listed by [`PresenceStore::spaces`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SpaceSummary {
    /// Its name.
    pub space: SpaceName,
    /// Members stored (seen within the retention), by kind.
    pub members: Counts,
}

/// What one round of background maintenance did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Members forgotten at the end of their retention.
    pub expired: u64,
    /// `away` and timeout `leave` events emitted.
    pub transitions: u64,
    /// Spaces dropped because they held nothing and nobody listened.
    pub spaces_dropped: u64,
    /// The longest time one space was held, in microseconds.
    pub max_hold_us: u64,
    /// Connections closed because they stopped pinging.
    pub connections_expired: u64,
}

/// Where presence lives.
///
/// Small, async and fallible, used as `Arc<dyn PresenceStore>`. It knows no
/// HTTP and no Redis types. Every batch argument is bounded by
/// [`limits::MAX_BATCH`]; stores check it and answer
/// [`InvalidInput::BatchTooLarge`]. The derived queries
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

    /// Members say goodbye: offline at once. Returns how many were present.
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
    /// most `limit`.
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

/// Sorts by last-seen time, newest first; ties by kind and id, so every
/// store answers in the same order.
pub fn sort_most_recent_first(members: &mut [MemberStatus]) {
    members.sort_by(|a, b| {
        b.last_seen_ms
            .cmp(&a.last_seen_ms)
            .then_with(|| a.member.cmp(&b.member))
    });
}

/// Checks a batch's size.
pub fn check_batch(len: usize) -> Result<(), InvalidInput> {
    if len == 0 {
        return Err(InvalidInput::EmptyBatch);
    }
    if len > limits::MAX_BATCH {
        return Err(InvalidInput::BatchTooLarge {
            len,
            max: limits::MAX_BATCH,
        });
    }
    Ok(())
}
