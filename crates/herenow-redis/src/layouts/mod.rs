//! The seeds' own Redis layouts, so a site that already runs the seeds'
//! code can point herenow at the same keys and both see the same "who's
//! online" ([`SeedLayoutStore`]).
//!
//! The default layout ([`RedisStore`](crate::RedisStore)) is herenow's own
//! and answers everything. The layouts here are the ones the seed documents
//! write, read back and written exactly as the seeds' Python and Go code do
//! (member ids are written raw, with no kind prefix), so they answer only
//! what those keys can tell. Everything else is
//! [`Error::Unsupported`](herenow_core::Error::Unsupported) naming the
//! layout (`redis layout rotation`, …), which the server turns into a
//! 501: never a wrong or an empty answer.
//! A listing that asks for no order gets the layout's default: most recent
//! first where the keys hold times, by id where they hold none
//! (`rotation`), and [`Page::order`](herenow_core::Page::order) says which.
//!
//! | [`SeedLayout`] | seed | keys | precision of last-seen |
//! | --- | --- | --- | --- |
//! | `sorted-set` ([`sorted_set`]) | 001, 004 | one sorted set, score = whole UNIX seconds (`whos_online:users`, `presence:{space}`) | 1 s |
//! | `minute-buckets` ([`minute_buckets`]) | 002 | a set per minute of the hour with `EXPIRE` (`active.users:{minute}`) | 1 min |
//! | `rotation` ([`rotation`]) | 000 | `wo_user_current` / `wo_user_old` (`wo_user_{generation}`), rotated by [`tick`](herenow_core::PresenceStore::tick) | none: unsupported (listings are by id) |
//!
//! # Key templates
//!
//! A template is a key name with placeholders: `{space}` (the space's
//! name), `{minute}` (two digits, `00`–`59`) and `{generation}` (`current`
//! or `old`). A template without `{space}` serves every space from the same
//! keys (seed 001's `whos_online:users`); with `{space}` each space has its
//! own. Any other `{…}` is kept literally, which is how a template carries a
//! Redis Cluster hash tag: `{wo}_user_{generation}` gives `{wo}_user_current`
//! and `{wo}_user_old`, both in the slot of `wo`, and `presence:{{space}}` gives
//! `presence:{room}`. On a cluster, the layouts that run one command over
//! several keys (`SUNION`, `RENAME`) need all of a space's keys in one slot:
//! [`SeedLayoutStore::connect`] refuses a `rotation` or `minute-buckets`
//! template whose keys would land in different slots.
//!
//! # Guests
//!
//! Seed 000 tracks guests (by address) in a second pair of sets. Guests
//! live under their own template (`wo_guest_{generation}`, say), of the same
//! layout as the users'. Without a guest template the store tracks no
//! guests: a guest heartbeat, leave, status or guest-only listing is
//! `Unsupported`, and counts report no guests (none can exist in herenow's
//! view of those keys).
//!
//! # Time
//!
//! "Now" is the injected [`Clock`], as in the default layout, so tests can
//! drive time: the minute of a bucket, the cut-off of a window, when a
//! rotation is due and what the sorted-set sweep forgets all come from it.
//! The one exception is what the seeds themselves expire with `EXPIRE`
//! (the minute buckets): those keys still expire by Redis's own clock, as
//! they do for the seed's code.
//!
//! # What no layout here answers
//!
//! Metadata, friends (and so online friends), events and subscriptions,
//! live connections (attach and detach), webhooks (the outbox), setting a space's policy,
//! listing spaces, remembered last seen ("last seen anywhere", and
//! erasing a user, which needs every space a user was in) are
//! `Unsupported` in every layout: the seeds' keys hold none of it. A
//! member's leave or expiry forgets it there, as the seeds' code does
//! (`status` answers `last_seen_ms: null`). [`config`] answers the fixed policy the layout applies
//! (derived from the defaults given at construction; see
//! [`SeedLayoutStore::connect`]).
//!
//! # Code
//!
//! `layout_options.rs` holds what the operator chooses; `common.rs` what
//! the layouts share (the `LayoutOps` trait each implements, keyset
//! paging and cursors); one file per layout. [`SeedLayoutStore`] checks
//! every call's input and hands it to its layout.
//!
//! [`config`]: herenow_core::PresenceStore::config

mod common;
mod layout_options;
pub mod minute_buckets;
pub mod rotation;
pub mod sorted_set;

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;

use herenow_core::cursor::Cursor;
use herenow_core::{
    Clock, Counts, Heartbeat, HeartbeatReport, ListQuery, MemberId, MemberKey, MemberStatus,
    Millis, Page, PresenceStore, Result, SpaceConfig, SpaceName, SpaceSummary, Subscription,
    TickReport,
};

pub use layout_options::{KeyTemplate, LayoutOptions, SeedLayout};

use crate::client::{RedisClient, RedisNodes};
use crate::reply::timed;
use common::{LayoutCtx, LayoutOps};
use layout_options::bad_config;
use minute_buckets::MinuteBuckets;
use rotation::Rotation;
use sorted_set::SortedSet;

/// A presence store over one of the seeds' layouts on Redis or Redis
/// Cluster; see the [module documentation](self) for what each layout
/// answers. Cheap to share as `Arc<dyn PresenceStore>`; any number of
/// stores, and the seed's own code, may use the same keys.
pub struct SeedLayoutStore {
    layout: SeedLayout,
    /// The layout's reads and writes: the one place that differs by layout.
    ops: Box<dyn LayoutOps>,
    /// What every layout works with.
    ctx: LayoutCtx,
}

/// The implementation of `layout`.
fn ops_of(layout: SeedLayout) -> Box<dyn LayoutOps> {
    match layout {
        SeedLayout::SortedSet => Box::new(SortedSet),
        SeedLayout::MinuteBuckets => Box::new(MinuteBuckets),
        SeedLayout::Rotation => Box::new(Rotation),
    }
}

impl SeedLayoutStore {
    /// Connects to `spec` (`redis://HOST:PORT[/DB]` or
    /// `redis+cluster://H1:P1,…`) and serves `layout` from the keys of
    /// `key_template`, guests from `guest_template` (same layout) or not at
    /// all.
    ///
    /// The policy the store applies ([`config`](PresenceStore::config)) is
    /// `defaults`, adjusted to the layout:
    /// - `sorted-set`: `defaults` as given;
    /// - `minute-buckets`: the window rounded up to whole minutes (at most
    ///   59: key names repeat every hour); buckets are written with
    ///   `EXPIRE` of that many minutes, as seed 002 does, so the retention
    ///   is the window;
    /// - `rotation`: window and retention are twice
    ///   [`LayoutOptions::rotate_every`], the longest a member stays in the
    ///   union.
    ///
    /// Fails with [`Error::Invalid`](herenow_core::Error::Invalid) for a bad
    /// spec, template or policy (and, on a cluster, a template whose keys of
    /// one space would span several slots), and with
    /// [`Error::Unavailable`](herenow_core::Error::Unavailable) if Redis does
    /// not answer within the timeout. It never falls back to anything else.
    pub async fn connect(
        spec: &str,
        layout: SeedLayout,
        key_template: &str,
        guest_template: Option<&str>,
        clock: Arc<dyn Clock>,
        defaults: SpaceConfig,
        options: LayoutOptions,
    ) -> Result<SeedLayoutStore> {
        defaults.validate()?;
        let target = RedisNodes::parse(spec)?;
        let ops = ops_of(layout);
        let users = KeyTemplate::parse(key_template, layout)?;
        let guests = guest_template
            .map(|t| KeyTemplate::parse(t, layout))
            .transpose()?;
        if guests
            .as_ref()
            .is_some_and(|g| g.as_str() == users.as_str())
        {
            return Err(bad_config(
                "the guest key template must differ from the user key template",
            ));
        }
        if target.is_cluster() {
            for t in std::iter::once(&users).chain(guests.as_ref()) {
                check_one_slot(t, ops.slot_parts())?;
            }
        }
        let policy = ops.policy(defaults, &options)?;
        if options.expire_batch == 0 || options.tick_batches == 0 || options.max_scan == 0 {
            return Err(bad_config(
                "expire_batch, tick_batches and max_scan must be positive",
            ));
        }
        let client = timed(
            &options.observer,
            options.timeout,
            "connect",
            RedisClient::open(&target, options.timeout, |_| {}),
        )
        .await?;
        let ctx = LayoutCtx {
            client,
            remember: users.per_space() && ops.sweeps_spaces(),
            users,
            guests,
            clock,
            policy,
            opts: options,
            known: Mutex::new(BTreeSet::new()),
            label: format!("redis layout {}", layout.as_str()),
        };
        // Fail now, loudly, rather than at the first heartbeat.
        let mut c = ctx.client.clone();
        ctx.io("ping", redis::cmd("PING").query_async::<()>(&mut c))
            .await?;
        Ok(SeedLayoutStore { layout, ops, ctx })
    }

    /// The layout this store serves.
    pub fn layout(&self) -> SeedLayout {
        self.layout
    }

    /// The key template of users, then of guests (if any), as given.
    pub fn templates(&self) -> (&str, Option<&str>) {
        (
            self.ctx.users.as_str(),
            self.ctx.guests.as_ref().map(|g| g.as_str()),
        )
    }

    /// The policy this store applies to every space.
    pub fn policy(&self) -> SpaceConfig {
        self.ctx.policy
    }
}

/// On a cluster, every key of one space must share a slot for the
/// multi-key commands of the set layouts (`SUNION`, `RENAME`, scripts):
/// the template rendered with each of `parts` must keep one hash tag.
fn check_one_slot(t: &KeyTemplate, parts: &[&str]) -> Result<()> {
    let Some(first_part) = parts.first() else {
        return Ok(());
    };
    let space = SpaceName::new("s").expect("a valid space name");
    let first = t.render(&space, first_part);
    if parts
        .iter()
        .any(|p| slot_tag(&t.render(&space, p)) != slot_tag(&first))
    {
        return Err(bad_config(
            "on a cluster this layout's keys must share a hash tag: put one in the template, \
             e.g. {wo}_user_{generation} or active.users:{au}:{minute}",
        ));
    }
    Ok(())
}

/// The part of a key Redis Cluster hashes: the first non-empty `{…}`, else
/// the whole key.
fn slot_tag(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// Checks each call's input, then hands it to the layout; what no seed
/// layout holds is `Unsupported` here, for all three, and no capability
/// of [`herenow_core::capability`] is offered.
#[async_trait]
impl PresenceStore for SeedLayoutStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn now_ms(&self) -> Millis {
        self.ctx.clock.now_ms()
    }

    async fn heartbeat(&self, space: &SpaceName, beats: &[Heartbeat]) -> Result<HeartbeatReport> {
        self.ctx.check_beats(beats)?;
        self.ctx.touch(space);
        self.ops.heartbeat(&self.ctx, space, beats).await
    }

    async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        self.ctx.check_members(members)?;
        self.ops.leave(&self.ctx, space, members).await
    }

    async fn status(&self, space: &SpaceName, members: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        self.ctx.check_members(members)?;
        self.ctx.touch(space);
        self.ops.status(&self.ctx, space, members).await
    }

    async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page> {
        query.check_limit()?;
        // Decided the same way on every page, so the cursor of a listing
        // that named no order decodes on the next page too.
        let order = query.order_or(self.ops.default_order());
        let cursor = query
            .cursor
            .as_deref()
            .map(|c| Cursor::decode(c, order))
            .transpose()?;
        self.ctx.touch(space);
        self.ops
            .list(&self.ctx, space, query, order, cursor.as_ref())
            .await
    }

    async fn count(&self, space: &SpaceName, window_ms: Option<Millis>) -> Result<Counts> {
        self.ctx.touch(space);
        self.ops.count(&self.ctx, space, window_ms).await
    }

    async fn config(&self, _space: &SpaceName) -> Result<SpaceConfig> {
        Ok(self.ctx.policy)
    }

    async fn set_config(&self, _space: &SpaceName, _config: SpaceConfig) -> Result<()> {
        Err(self.ctx.unsupported("setting a space's policy"))
    }

    async fn spaces(&self, _after: Option<&SpaceName>, _limit: usize) -> Result<Vec<SpaceSummary>> {
        Err(self.ctx.unsupported("listing spaces"))
    }

    async fn set_friends(&self, _user: &MemberId, _friends: &[MemberId]) -> Result<u64> {
        Err(self.ctx.unsupported("friends"))
    }

    async fn add_friends(&self, _user: &MemberId, _friends: &[MemberId]) -> Result<u64> {
        Err(self.ctx.unsupported("friends"))
    }

    async fn remove_friends(&self, _user: &MemberId, _friends: &[MemberId]) -> Result<u64> {
        Err(self.ctx.unsupported("friends"))
    }

    async fn friends(&self, _user: &MemberId) -> Result<Vec<MemberId>> {
        Err(self.ctx.unsupported("friends"))
    }

    async fn subscribe(&self, _space: &SpaceName) -> Result<Subscription> {
        Err(self.ctx.unsupported("events"))
    }

    async fn tick(&self) -> Result<TickReport> {
        self.ops.tick(&self.ctx).await
    }

    /// The layout, so an `Unsupported` answer names it.
    fn label(&self) -> String {
        self.ctx.label.clone()
    }

    // No capability is offered: the seeds' keys hold no connections,
    // their scripts publish and capture no events (no following, no
    // webhook outbox, nowhere to keep a space's endpoints), and keys kept
    // per space cannot be found from a user (no last seen anywhere, no
    // erasure).
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_templates_need_one_slot() {
        let ok = KeyTemplate::parse("{wo}_user_{generation}", SeedLayout::Rotation).unwrap();
        assert!(check_one_slot(&ok, ops_of(SeedLayout::Rotation).slot_parts()).is_ok());
        let seed = KeyTemplate::parse("wo_user_{generation}", SeedLayout::Rotation).unwrap();
        assert!(check_one_slot(&seed, ops_of(SeedLayout::Rotation).slot_parts()).is_err());
        let per_space =
            KeyTemplate::parse("au:{{space}}:{minute}", SeedLayout::MinuteBuckets).unwrap();
        assert!(check_one_slot(&per_space, ops_of(SeedLayout::MinuteBuckets).slot_parts()).is_ok());
        assert_eq!(slot_tag("a{}b{c}"), "a{}b{c}");
        assert_eq!(slot_tag("x{tag}y"), "tag");
    }

    #[test]
    fn policies_follow_the_layout() {
        let d = SpaceConfig::default();
        let o = LayoutOptions::default();
        assert_eq!(ops_of(SeedLayout::SortedSet).policy(d, &o).unwrap(), d);
        let b = ops_of(SeedLayout::MinuteBuckets).policy(d, &o).unwrap();
        assert_eq!((b.window_ms, b.retention_ms), (600_000, 600_000));
        let r = ops_of(SeedLayout::Rotation).policy(d, &o).unwrap();
        assert_eq!((r.window_ms, r.retention_ms), (600_000, 600_000));
        let long = SpaceConfig {
            window_ms: 60 * 60_000,
            retention_ms: 60 * 60_000,
            ..d
        };
        assert!(ops_of(SeedLayout::MinuteBuckets).policy(long, &o).is_err());
    }
}
