//! What the three layouts share: [`LayoutCtx`] (the client, the key
//! templates, the clock, the policy and the options of one
//! [`SeedLayoutStore`](super::SeedLayoutStore)), the [`LayoutOps`] trait
//! each layout implements, and the reading and paging every layout does
//! the same way (member ids as the seeds wrote them, keyset pages over
//! what was read whole, cursors).

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::{RedisResult, Value};

use herenow_core::cursor::{self, Cursor};
use herenow_core::store::{check_batch, check_beats};
use herenow_core::{
    Clock, Counts, Error, Heartbeat, HeartbeatReport, KindFilter, ListQuery, MemberId, MemberKey,
    MemberKind, MemberStatus, Millis, Order, Page, Result, SpaceConfig, SpaceName, TickReport,
};

use super::layout_options::{KeyTemplate, LayoutOptions};
use crate::client::RedisClient;
use crate::reply::{array, bad_reply, bytes_of, timed};
use crate::scripts::bare;

/// One seed layout: how it writes and reads its keys. The
/// [`SeedLayoutStore`](super::SeedLayoutStore) checks every call's input,
/// then hands it to its layout; what a layout's keys cannot tell it
/// answers with [`LayoutCtx::unsupported`], naming the layout, never a
/// guess.
#[async_trait]
pub(super) trait LayoutOps: Send + Sync {
    /// The policy the layout applies, from the defaults given to
    /// `connect`: what its keys can tell decides the window and the
    /// retention.
    fn policy(&self, defaults: SpaceConfig, opts: &LayoutOptions) -> Result<SpaceConfig>;

    /// What `{minute}` / `{generation}` become in a space's keys: on a
    /// cluster, every one of them must land in one slot (empty when the
    /// layout has one key per space).
    fn slot_parts(&self) -> &'static [&'static str];

    /// Whether `tick` works on each space's keys, so the store must
    /// remember the spaces it touched.
    fn sweeps_spaces(&self) -> bool;

    /// Writes checked heartbeats (no metadata, no guest without a
    /// template, none in the future).
    async fn heartbeat(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        beats: &[Heartbeat],
    ) -> Result<HeartbeatReport>;

    /// Removes members; answers how many were present.
    async fn leave(&self, s: &LayoutCtx, space: &SpaceName, members: &[MemberKey]) -> Result<u64>;

    /// Last seen and status of each member, in order.
    async fn status(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<MemberStatus>>;

    /// The order of a listing that asks for none: most recent first where
    /// the keys hold times, by id where they hold none.
    fn default_order(&self) -> Order {
        Order::Recent
    }

    /// One page in `order` (the query's, or [`default_order`](Self::default_order)
    /// when it names none), after the decoded `cursor`.
    async fn list(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        query: &ListQuery,
        order: Order,
        cursor: Option<&Cursor>,
    ) -> Result<Page>;

    /// Users and guests within the window.
    async fn count(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        window_ms: Option<Millis>,
    ) -> Result<Counts>;

    /// Background work: what the seed's own expiry or cron job does.
    async fn tick(&self, s: &LayoutCtx) -> Result<TickReport>;
}

/// The policy of a layout whose keys cover `span` ms: the defaults' online
/// and away thresholds (at most the span), and the span as window and
/// retention.
pub(super) fn policy_over(d: SpaceConfig, span: Millis) -> Result<SpaceConfig> {
    let policy = SpaceConfig {
        online_ms: d.online_ms.min(span),
        away_ms: d.away_ms.min(span),
        window_ms: span,
        retention_ms: span,
        ..d
    };
    policy.validate()?;
    Ok(policy)
}

/// What every layout of one store works with.
pub(super) struct LayoutCtx {
    /// The client every call clones.
    pub client: RedisClient,
    /// The users' key template.
    pub users: KeyTemplate,
    /// The guests' key template; without one, the store tracks no guests.
    pub guests: Option<KeyTemplate>,
    /// "Now": the minute of a bucket, the cut-off of a window, when a
    /// rotation is due.
    pub clock: Arc<dyn Clock>,
    /// The policy the layout applies: the defaults, adjusted to what the
    /// layout can tell (see [`LayoutOps::policy`]).
    pub policy: SpaceConfig,
    /// As given to `connect`.
    pub opts: LayoutOptions,
    /// Whether to remember touched spaces: keys are per space and the
    /// layout's `tick` visits them.
    pub remember: bool,
    /// Spaces touched since start, for background work on per-space keys.
    pub known: Mutex<BTreeSet<SpaceName>>,
    /// The `store` of every `Unsupported` answer: `redis layout <name>`.
    pub label: String,
}

impl LayoutCtx {
    /// What the layout cannot answer, naming the layout.
    pub fn unsupported(&self, what: &'static str) -> Error {
        Error::Unsupported {
            what,
            store: self.label.clone(),
        }
    }

    /// The template of `kind`, or `Unsupported` for guests without one.
    pub fn template(&self, kind: MemberKind) -> Result<&KeyTemplate> {
        match kind {
            MemberKind::User => Ok(&self.users),
            MemberKind::Guest => self
                .guests
                .as_ref()
                .ok_or_else(|| self.unsupported("guests (no guest key template is configured)")),
        }
    }

    /// The kinds a query reads: guests only if they have a template
    /// (without one there are none to read).
    pub fn kinds(&self, filter: KindFilter) -> Result<Vec<(MemberKind, &KeyTemplate)>> {
        match filter {
            KindFilter::Users => Ok(vec![(MemberKind::User, &self.users)]),
            KindFilter::Guests => Ok(vec![(MemberKind::Guest, self.template(MemberKind::Guest)?)]),
            KindFilter::All => Ok(std::iter::once((MemberKind::User, &self.users))
                .chain(self.guests.as_ref().map(|g| (MemberKind::Guest, g)))
                .collect()),
        }
    }

    /// Remembers `space` for background work, when keys are per space.
    pub fn touch(&self, space: &SpaceName) {
        if !self.remember {
            return;
        }
        let mut known = self.known.lock();
        if known.len() < self.opts.max_known_spaces && !known.contains(space) {
            known.insert(space.clone());
        }
    }

    /// The spaces background work visits: every known space, or one
    /// stand-in when every space shares the same keys.
    pub fn sweep_spaces(&self) -> Vec<SpaceName> {
        if self.users.per_space() {
            self.known.lock().iter().cloned().collect()
        } else {
            vec![SpaceName::new("all").expect("a valid space name")]
        }
    }

    /// Forgets a space whose keys are gone; whether it was remembered.
    pub fn forget(&self, space: &SpaceName) -> bool {
        self.users.per_space() && self.known.lock().remove(space)
    }

    /// Runs one Redis call under the timeout, mapping failures.
    pub async fn io<T>(
        &self,
        what: &'static str,
        f: impl Future<Output = RedisResult<T>>,
    ) -> Result<T> {
        timed(&self.opts.observer, self.opts.timeout, what, f).await
    }

    /// The window of a query, checked against the layout's policy.
    pub fn window(&self, asked: Option<Millis>) -> Result<Millis> {
        Ok(self.policy.check_window(asked)?)
    }

    /// Refuses what every store refuses ([`check_beats`]), then metadata
    /// and guests without a template, before anything is written, so a
    /// batch is applied whole or not at all.
    pub fn check_beats(&self, beats: &[Heartbeat]) -> Result<()> {
        check_beats(beats, self.clock.now_ms())?;
        for b in beats {
            if b.meta.is_some() {
                return Err(self.unsupported("metadata"));
            }
            self.template(b.member.kind)?;
        }
        Ok(())
    }

    /// Refuses guests without a template, before anything is read or
    /// written.
    pub fn check_members(&self, members: &[MemberKey]) -> Result<()> {
        check_batch(members.len())?;
        for m in members {
            self.template(m.kind)?;
        }
        Ok(())
    }

    /// Status answers for `members` from their last-seen times (in the
    /// same order), by this layout's policy. Layouts keep no metadata.
    pub fn answer(
        &self,
        members: &[MemberKey],
        seen: Vec<Option<Millis>>,
        now: Millis,
    ) -> Vec<MemberStatus> {
        members
            .iter()
            .zip(seen)
            .map(|(m, t)| MemberStatus {
                member: m.clone(),
                status: self.policy.status(t, now),
                last_seen_ms: t,
                meta: None,
            })
            .collect()
    }

    /// The size of the union of `sets`, using `scratch` (same slot).
    pub async fn union_count(&self, scratch: String, sets: &[String]) -> Result<u64> {
        let mut inv = UNION_COUNT.prepare_invoke();
        inv.key(scratch);
        for k in sets {
            inv.key(k);
        }
        let mut c = self.client.clone();
        self.io("count", inv.invoke_async(&mut c)).await
    }

    /// Refuses to read whole sets whose sizes add up past
    /// [`LayoutOptions::max_scan`].
    pub async fn check_scan(&self, sets: &[String]) -> Result<()> {
        let mut pipe = redis::pipe();
        for k in sets {
            pipe.cmd("SCARD").arg(k);
        }
        let mut c = self.client.clone();
        let sizes: Vec<u64> = self.io("list", pipe.query_async(&mut c)).await?;
        if sizes.iter().sum::<u64>() > self.opts.max_scan as u64 {
            return Err(
                self.unsupported("listing a union of sets larger than max_scan (count it instead)")
            );
        }
        Ok(())
    }
}

/// KEYS: a scratch key in the same slot, then the sets. The size of their
/// union, without sending the members to the client: `SUNIONSTORE` into
/// the scratch key, which is deleted in the same script (so concurrent
/// counts may share it, and it never outlives the call).
static UNION_COUNT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| bare(include_str!("../lua/layouts/union_count.lua")));

/// A member id read from Redis. The seed's code may have written ids
/// herenow refuses (over 256 bytes, control characters, not UTF-8); those
/// are left out of answers and logged rather than failing every answer.
pub(super) fn member_id(raw: &[u8]) -> Option<MemberId> {
    let id = std::str::from_utf8(raw)
        .ok()
        .and_then(|s| MemberId::new(s).ok());
    if id.is_none() {
        tracing::warn!(
            member = %String::from_utf8_lossy(raw),
            "a member id in a seed layout's key is not a valid herenow id; left out"
        );
    }
    id
}

/// The ids of those of `members` of `kind`, in order.
pub(super) fn ids_of<'a>(
    members: impl IntoIterator<Item = &'a MemberKey>,
    kind: MemberKind,
) -> Vec<&'a str> {
    members
        .into_iter()
        .filter(|m| m.kind == kind)
        .map(|m| m.id.as_str())
        .collect()
}

/// The members of a set or list reply (`SMEMBERS`, `SUNION`, `ZRANGE`).
pub(super) fn members_of(v: Value) -> Result<Vec<MemberId>> {
    let items = array(v)?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(raw) = bytes_of(&item) else {
            return Err(bad_reply(&format!("{item:?} as a member")));
        };
        out.extend(member_id(raw));
    }
    Ok(out)
}

/// A listed member: who, and when last seen (if the layout knows).
pub(super) struct Item {
    pub member: MemberKey,
    pub last_seen: Option<Millis>,
}

/// Sorts fully read items in the query's order and cuts the page after the
/// cursor: keyset pagination, exact for any set read whole.
pub(super) fn page_of(
    mut items: Vec<Item>,
    order: Order,
    cursor: Option<&Cursor>,
    limit: usize,
    status_of: impl Fn(Option<Millis>) -> herenow_core::Status,
) -> Page {
    match order {
        Order::Recent => items.sort_by(|a, b| {
            b.last_seen
                .cmp(&a.last_seen)
                .then_with(|| a.member.cmp(&b.member))
        }),
        Order::Id => items.sort_by(|a, b| {
            a.member
                .id
                .cmp(&b.member.id)
                .then_with(|| a.member.kind.cmp(&b.member.kind))
        }),
    }
    let mut rest: Vec<Item> = items
        .into_iter()
        .filter(|i| cursor.is_none_or(|c| precedes(c, i)))
        .collect();
    let next_cursor = (rest.len() > limit).then(|| cursor_after(&rest[limit - 1], order).encode());
    rest.truncate(limit);
    Page {
        members: rest
            .into_iter()
            .map(|i| MemberStatus {
                member: i.member,
                status: status_of(i.last_seen),
                last_seen_ms: i.last_seen,
                meta: None,
            })
            .collect(),
        next_cursor,
        order,
    }
}

/// The cursor of a page that ended at `item`: its sort key, in the one
/// cursor format of every store ([`herenow_core::cursor`]). Recent pages
/// carry the time too, so a cursor of one order is refused by the other;
/// ties of time are broken by kind and id, so the tiebreak is 0.
fn cursor_after(item: &Item, order: Order) -> Cursor {
    let member = item.member.clone();
    match order {
        Order::Recent => Cursor::Recent(cursor::RecentCursor {
            at_ms: item.last_seen.unwrap_or(0),
            tiebreak: 0,
            member,
        }),
        Order::Id => Cursor::Id(cursor::IdCursor { member }),
    }
}

/// Whether `cursor` comes before `item`, in the cursor's order.
pub(super) fn precedes(cursor: &Cursor, item: &Item) -> bool {
    let (kind, id) = (item.member.kind, item.member.id.as_str());
    match cursor {
        Cursor::Recent(c) => {
            let t = item.last_seen.unwrap_or(0);
            let (c_kind, c_id) = (c.member.kind, c.member.id.as_str());
            t < c.at_ms || (t == c.at_ms && (kind, id) > (c_kind, c_id))
        }
        Cursor::Id(c) => (id, kind) > (c.member.id.as_str(), c.member.kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, last_seen: Option<Millis>) -> Item {
        Item {
            member: MemberKey::guest(MemberId::new(id).unwrap()),
            last_seen,
        }
    }

    /// A page's cursor, written and read back, lets through what comes
    /// after the page's last item in the page's order, and nothing up to
    /// it.
    #[test]
    fn a_cursor_read_back_resumes_after_its_item() {
        let last = item("a.b 🙂", Some(42));
        let recent = Cursor::decode(&cursor_after(&last, Order::Recent).encode(), Order::Recent);
        let recent = recent.unwrap();
        assert!(!precedes(&recent, &last));
        assert!(precedes(&recent, &item("z", Some(41))));
        assert!(precedes(&recent, &item("b", Some(42))));
        assert!(!precedes(&recent, &item("a", Some(42))));
        assert!(!precedes(&recent, &item("z", Some(43))));
        let by_id = Cursor::decode(&cursor_after(&last, Order::Id).encode(), Order::Id).unwrap();
        assert!(!precedes(&by_id, &last));
        assert!(precedes(&by_id, &item("b", Some(1))));
        assert!(!precedes(&by_id, &item("a", Some(99))));
    }
}
