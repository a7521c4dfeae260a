//! The values that cross the [`PresenceStore`](crate::PresenceStore)
//! trait: heartbeats in, statuses, pages, counts and reports out, and the
//! checks every store applies to them the same way.
//!
//! A leaf below [`crate::store`] and [`crate::event`], which both speak in
//! these values.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use crate::error::{InvalidInput, Result};
use crate::id::{MemberId, MemberKey, MemberKind, SpaceName};
use crate::limits;
use crate::meta::Metadata;
use crate::policy::Status;
use crate::time::Millis;

/// "This member was active": one item of a heartbeat call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The member that was active; its kind decides which list (users or
    /// guests) it is counted in.
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

    /// Neither a time of its own nor metadata: a heartbeat "now", as
    /// [`Heartbeat::now`] builds (nearly all of them). The journal writes
    /// these in its compact form.
    #[inline]
    pub fn is_plain(&self) -> bool {
        self.at_ms.is_none() && self.meta.is_none()
    }
}

/// What a heartbeat call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReport {
    /// Heartbeats that moved a member's last-seen time (the call's items
    /// minus the `stale` ones).
    pub accepted: u64,
    /// Of those, members that became present (a `join`).
    pub joined: u64,
    /// Heartbeats ignored because the member already had a newer time, or
    /// because the time was already past the retention.
    pub stale: u64,
}

/// Sums reports: a call's parts (a striped space's stripes, a client's
/// batches) into the call's.
impl std::ops::AddAssign for HeartbeatReport {
    fn add_assign(&mut self, part: HeartbeatReport) {
        self.accepted += part.accepted;
        self.joined += part.joined;
        self.stale += part.stale;
    }
}

/// A member's presence as answered to queries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberStatus {
    /// The member answered about; its kind and id are flattened into the
    /// JSON object.
    #[serde(flatten)]
    pub member: MemberKey,
    /// Online, away or offline, by the space's thresholds.
    pub status: Status,
    /// Last heartbeat, or for a member no longer present the remembered
    /// time presence ended (its leave or last heartbeat) until the
    /// space's `remember_ms` horizon; `None` if never seen or forgotten.
    pub last_seen_ms: Option<Millis>,
    /// The latest metadata a heartbeat (or connection) gave it, kept across
    /// heartbeats that send none; left out of the JSON when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Metadata>,
}

/// A user's newest last seen over every space: what a contact list shows
/// next to an avatar ([`UserIndex::seen_anywhere`](crate::UserIndex::seen_anywhere)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SeenAnywhere {
    /// The user asked about.
    pub id: MemberId,
    /// The best status over the spaces the user is present in (online if
    /// online in any); `offline` when present nowhere.
    pub status: Status,
    /// The newest last-seen time over every space, present or remembered;
    /// `None` when never seen or past every horizon.
    pub last_seen_ms: Option<Millis>,
    /// The space of `last_seen_ms`.
    pub space: Option<SpaceName>,
}

impl SeenAnywhere {
    /// A user seen nowhere.
    pub fn unseen(id: MemberId) -> Self {
        Self {
            id,
            status: Status::Offline,
            last_seen_ms: None,
            space: None,
        }
    }

    /// Folds in what one space knows of the user: its status there and
    /// its last-seen time (`None`: not known there).
    pub fn merge(&mut self, space: &SpaceName, status: Status, last_seen_ms: Option<Millis>) {
        self.status = self.status.min(status);
        if let Some(t) = last_seen_ms
            && self.last_seen_ms.is_none_or(|mine| t > mine)
        {
            self.last_seen_ms = Some(t);
            self.space = Some(space.clone());
        }
    }
}

/// What erasing a user removed ([`UserIndex::erase_user`](crate::UserIndex::erase_user)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureReport {
    /// Spaces the user was present in (each got a `leave`).
    pub presence: u64,
    /// Remembered last-seen times forgotten.
    pub remembered: u64,
    /// Whether the user's own friend set existed.
    pub friend_set: bool,
    /// Other users' friend sets the user was removed from.
    pub listed_by: u64,
}

/// Which kinds of members a query covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KindFilter {
    /// Users only (the default, like seed 000's "who's online").
    #[default]
    Users,
    /// Guests only (seed 000's visitors by IP).
    Guests,
    /// Users and guests, in one listing.
    All,
}

impl KindFilter {
    /// Whether members of `kind` belong in the answer.
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
    /// Most recently seen first: the default of every store that keeps
    /// last-seen times.
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
    /// Most recent first, or by id; `None`: the store's default order
    /// (most recent first where the store keeps last-seen times, by id
    /// where it keeps none), which the answer names in [`Page::order`].
    /// An order the store cannot give (by id at this size, most recent
    /// first without times) is [`Error::Unsupported`](crate::Error::Unsupported).
    pub order: Option<Order>,
    /// Page size, 1 to [`limits::MAX_PAGE`].
    pub limit: usize,
    /// [`Page::next_cursor`] of the previous page; it must come from a
    /// listing in the same order ([`InvalidInput::BadCursor`] otherwise):
    /// a page of a listing that asked for no order continues with `None`
    /// again, or with the [`Page::order`] it was answered in.
    pub cursor: Option<String>,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            window_ms: None,
            kinds: KindFilter::Users,
            order: None,
            limit: 100,
            cursor: None,
        }
    }
}

impl ListQuery {
    /// The order this listing uses on a store whose default order is
    /// `default`: the one asked for, else the store's.
    pub fn order_or(&self, default: Order) -> Order {
        self.order.unwrap_or(default)
    }

    /// Refuses a `limit` of 0 or above [`limits::MAX_PAGE`] with
    /// [`InvalidInput::LimitOutOfRange`].
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
    /// At most the query's `limit` members, in [`order`](Self::order).
    pub members: Vec<MemberStatus>,
    /// Pass this back for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
    /// The order the members are in: the query's, or the store's default
    /// when the query named none.
    pub order: Order,
}

/// How many members were seen within a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Users seen within the window.
    pub users: u64,
    /// Guests seen within the window.
    pub guests: u64,
}

impl Counts {
    /// Users and guests together.
    pub fn total(&self) -> u64 {
        self.users + self.guests
    }
}

/// A space, as listed by [`PresenceStore::spaces`](crate::PresenceStore::spaces).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SpaceSummary {
    /// The space's name; listings are sorted by it.
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
    /// Remembered last-seen times forgotten at their horizon (stores that
    /// remember and count them; 0 otherwise).
    pub forgotten: u64,
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

/// What a store checks of a whole batch of heartbeats at `now` before
/// applying any of it: its size ([`check_batch`]), and no time more than
/// [`limits::MAX_FUTURE_SKEW_MS`] ahead ([`InvalidInput::AtInFuture`]).
/// The beats may be borrowed (`&Heartbeat`).
pub fn check_beats<B: Borrow<Heartbeat>>(beats: &[B], now: Millis) -> Result<(), InvalidInput> {
    check_batch(beats.len())?;
    let latest = now + limits::MAX_FUTURE_SKEW_MS;
    if let Some(at_ms) = beats
        .iter()
        .filter_map(|b| b.borrow().at_ms)
        .find(|&at| at > latest)
    {
        return Err(InvalidInput::AtInFuture { at_ms });
    }
    Ok(())
}

/// Refuses an empty batch ([`InvalidInput::EmptyBatch`]) or one of more
/// than [`limits::MAX_BATCH`] items ([`InvalidInput::BatchTooLarge`]).
/// Stores call it again on every batch, so a direct caller cannot bypass
/// the bound.
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
