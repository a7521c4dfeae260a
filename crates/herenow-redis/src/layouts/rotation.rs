//! `rotation`: seed 000. Two sets, `wo_user_current` and `wo_user_old`
//! (template `wo_user_{generation}`), member = the raw id:
//!
//! - heartbeat: `SADD current`, as the seed's `report_user` does;
//! - who's online: `SUNION current old` (`get_users_online`); count: the
//!   size of that union;
//! - leave: `SREM` from both;
//! - rotation: every [`LayoutOptions::rotate_every`](super::LayoutOptions),
//!   `tick` does the seed's `tick()`: `RENAME current old`, or, when
//!   nobody was seen and "current" does not exist, `DEL old`.
//!
//! A member stays listed from one to two periods after its last heartbeat,
//! and the sets record nothing else, so the layout answers only for its one
//! window (twice the period): last-seen times, statuses, other windows,
//! "most recent first" and heartbeats with an explicit past time are
//! `Unsupported`. A listing that asks for no order is by id, and its page
//! says so ([`Page::order`]); one that asks for most recent first is
//! `Unsupported`. Listed members carry `status: online` (they are in the
//! union, the layout's definition of online) and no last-seen time.
//!
//! Several herenow servers may tick the same keys: the script rotates only
//! when the rotation mark (the template with `{generation}` =
//! `rotated-at`, holding the time of the last rotation by the injected
//! clock) is a period old, so the keys rotate once per period however many
//! servers tick. The seed's own cron job must then stop rotating them (or
//! switch herenow's off with [`LayoutOptions::rotate`](super::LayoutOptions)).
//! On a cluster `RENAME` needs both sets in one slot: the template must
//! carry a hash tag (`{wo}_user_{generation}`), which
//! [`SeedLayoutStore::connect`](super::SeedLayoutStore::connect) checks.

use std::sync::LazyLock;
use std::time::Instant;

use async_trait::async_trait;
use redis::{Script, Value};

use herenow_core::cursor::Cursor;
use herenow_core::{
    Counts, Heartbeat, HeartbeatReport, KindFilter, ListQuery, MemberKey, MemberKind, MemberStatus,
    Millis, Order, Page, Result, SpaceConfig, SpaceName, Status, TickReport,
};

use super::common::{Item, LayoutCtx, LayoutOps, ids_of, members_of, page_of, policy_over};
use super::layout_options::{KeyTemplate, LayoutOptions, bad_config};
use crate::scripts::bare;

/// Seed 000's layout: see the module documentation.
pub(super) struct Rotation;

/// What `{generation}` becomes in the rotation mark's key.
const MARK_PART: &str = "rotated-at";
/// What `{generation}` becomes in the scratch key of counts.
const TEMP_PART: &str = "herenow-count";

/// KEYS: current, old. ARGV: ids. Adds them to current; returns how many
/// were in neither set (joins).
static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/layouts/rotation_heartbeat.lua")));

/// KEYS: current, old. ARGV: ids. Removes them from both; returns how many
/// were in either.
static LEAVE: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/layouts/rotation_leave.lua")));

/// KEYS: current, old, mark. ARGV: now ms, period ms. The seed's `tick()`,
/// at most once per period across every store: the first call only starts
/// the clock (a store that just started cannot know when the seed's cron
/// last rotated). Returns whether it rotated, how many members it forgot
/// (in old, not in current), and whether either set still exists.
static ROTATE: LazyLock<Script> = LazyLock::new(|| bare(include_str!("../lua/layouts/rotate.lua")));

fn pair(t: &KeyTemplate, space: &SpaceName) -> [String; 2] {
    [t.render(space, "current"), t.render(space, "old")]
}

/// The layout answers for its own window only.
fn check_rotation_window(s: &LayoutCtx, asked: Option<Millis>) -> Result<()> {
    match asked {
        Some(w) if w != s.policy.window_ms => {
            Err(s.unsupported("a window other than the rotation's (twice the rotation period)"))
        }
        _ => Ok(()),
    }
}

#[async_trait]
impl LayoutOps for Rotation {
    /// Window and retention are twice the rotation period: the longest a
    /// member stays in the union.
    fn policy(&self, d: SpaceConfig, opts: &LayoutOptions) -> Result<SpaceConfig> {
        let period = opts.rotate_every.as_millis() as Millis;
        if period < 1_000 {
            return Err(bad_config(
                "the rotation period must be at least one second",
            ));
        }
        policy_over(d, 2 * period)
    }

    fn slot_parts(&self) -> &'static [&'static str] {
        &["current", "old", MARK_PART, TEMP_PART]
    }

    fn sweeps_spaces(&self) -> bool {
        true
    }

    /// The sets hold no times, so "who's online" without an order is by
    /// id (the answer says so); most recent first is `Unsupported`.
    fn default_order(&self) -> Order {
        Order::Id
    }

    /// The sets record no times.
    async fn status(
        &self,
        s: &LayoutCtx,
        _space: &SpaceName,
        _members: &[MemberKey],
    ) -> Result<Vec<MemberStatus>> {
        Err(s.unsupported("last-seen times and statuses"))
    }

    async fn heartbeat(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        beats: &[Heartbeat],
    ) -> Result<HeartbeatReport> {
        let now = s.clock.now_ms();
        if beats.iter().any(|b| b.at_ms.is_some_and(|at| at < now)) {
            // The sets cannot place a heartbeat in the past: "current" means
            // "since the last rotation", whenever that was.
            return Err(s.unsupported("heartbeats with an explicit past time"));
        }
        let mut report = HeartbeatReport::default();
        for kind in MemberKind::ALL {
            let ids = ids_of(beats.iter().map(|b| &b.member), kind);
            if ids.is_empty() {
                continue;
            }
            let mut inv = HEARTBEAT.prepare_invoke();
            inv.key(&pair(s.template(kind)?, space)[..]).arg(&ids);
            let mut c = s.client.clone();
            report.joined += s.io("heartbeat", inv.invoke_async::<u64>(&mut c)).await?;
            report.accepted += ids.len() as u64;
        }
        Ok(report)
    }

    async fn leave(&self, s: &LayoutCtx, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        let mut present = 0;
        for kind in MemberKind::ALL {
            let ids = ids_of(members, kind);
            if ids.is_empty() {
                continue;
            }
            let mut inv = LEAVE.prepare_invoke();
            inv.key(&pair(s.template(kind)?, space)[..]).arg(&ids);
            let mut c = s.client.clone();
            present += s.io("leave", inv.invoke_async::<u64>(&mut c)).await?;
        }
        Ok(present)
    }

    async fn list(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        query: &ListQuery,
        order: Order,
        cursor: Option<&Cursor>,
    ) -> Result<Page> {
        check_rotation_window(s, query.window_ms)?;
        if order == Order::Recent {
            // Only when asked for: a listing that names no order is by id.
            return Err(
                s.unsupported("listing most recent first (the sets hold no times; list by id)")
            );
        }
        let mut items = Vec::new();
        for (kind, t) in s.kinds(query.kinds)? {
            let keys = pair(t, space);
            s.check_scan(&keys).await?;
            let mut c = s.client.clone();
            let union: Value = s
                .io(
                    "list",
                    redis::cmd("SUNION").arg(&keys[..]).query_async(&mut c),
                )
                .await?;
            items.extend(members_of(union)?.into_iter().map(|id| Item {
                member: MemberKey { kind, id },
                last_seen: None,
            }));
        }
        Ok(page_of(items, order, cursor, query.limit, |_| {
            Status::Online
        }))
    }

    async fn count(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        window_ms: Option<Millis>,
    ) -> Result<Counts> {
        check_rotation_window(s, window_ms)?;
        let mut counts = Counts::default();
        for (kind, t) in s.kinds(KindFilter::All)? {
            let n = s
                .union_count(t.render(space, TEMP_PART), &pair(t, space))
                .await?;
            match kind {
                MemberKind::User => counts.users = n,
                MemberKind::Guest => counts.guests = n,
            }
        }
        Ok(counts)
    }

    async fn tick(&self, s: &LayoutCtx) -> Result<TickReport> {
        let mut report = TickReport::default();
        if !s.opts.rotate {
            return Ok(report);
        }
        let now = s.clock.now_ms();
        let period = s.opts.rotate_every.as_millis() as u64;
        for space in s.sweep_spaces() {
            let mut exists = false;
            for (_, t) in s.kinds(KindFilter::All)? {
                let [current, old] = pair(t, &space);
                let mut inv = ROTATE.prepare_invoke();
                inv.key(current)
                    .key(old)
                    .key(t.render(&space, MARK_PART))
                    .arg(now)
                    .arg(period);
                let mut c = s.client.clone();
                let started = Instant::now();
                let (_rotated, gone, still): (u64, u64, u64) =
                    s.io("rotate", inv.invoke_async(&mut c)).await?;
                report.max_hold_us = report.max_hold_us.max(started.elapsed().as_micros() as u64);
                report.expired += gone;
                exists |= still == 1;
            }
            if !exists && s.forget(&space) {
                report.spaces_dropped += 1;
            }
        }
        Ok(report)
    }
}
