//! `minute-buckets`: seed 002. A set per minute of the hour,
//! `active.users:MM` (template `active.users:{minute}`), member = the raw
//! id, written as the seed's `visit` handler does: `SADD` into the bucket
//! of the current minute and `EXPIRE` it for the window (the seed's ten
//! minutes), so Redis forgets old buckets by itself and the name is free
//! again before the minute comes round next hour.
//!
//! - who's online: the union of the last N buckets, N = the window in
//!   minutes rounded up (`SUNION`, as the seed's `online` handler does);
//!   count: the size of that union (`SUNIONSTORE` into a scratch key in the
//!   same slot, deleted in the same script);
//! - last seen: the start of the newest bucket holding the member, so
//!   minute precision, rounded down like the seed's keys themselves. The
//!   buckets are exact about which minute a member was last seen in, so
//!   the answer is reliable to the minute; statuses derived from it are
//!   therefore only as fine as a minute (with the default 60 s `online`
//!   threshold, "online" means "seen in the current minute"). Listing most
//!   recent first orders by that minute, then by id;
//! - leave: `SREM` from every bucket of the hour, so the seed's code stops
//!   listing the member too;
//! - expiry: Redis's `EXPIRE`, by Redis's clock; `tick` has nothing to do.
//!
//! The minute in key names is UTC's, plus
//! [`LayoutOptions::utc_offset_minutes`](super::LayoutOptions): the seed
//! formats `time.localtime()`, whose minute is UTC's wherever the zone is a
//! whole number of hours from UTC. Bucket writes never shorten a bucket's
//! expiry (`EXPIRE … NX` then `EXPIRE … GT`), so where herenow and the
//! seed's code both write, the longer of their windows wins.

use std::collections::HashMap;
use std::sync::LazyLock;

use async_trait::async_trait;
use redis::{Script, Value};

use herenow_core::cursor::Cursor;
use herenow_core::{
    Counts, Heartbeat, HeartbeatReport, KindFilter, ListQuery, MemberKey, MemberKind, MemberStatus,
    Millis, Order, Page, Result, SpaceConfig, SpaceName, TickReport,
};

use super::common::{Item, LayoutCtx, LayoutOps, ids_of, members_of, page_of, policy_over};
use super::layout_options::{KeyTemplate, LayoutOptions, bad_config};
use crate::reply::bad_reply;
use crate::scripts::bare;

/// Seed 002's layout: see the module documentation.
pub(super) struct MinuteBuckets;

/// What `{minute}` becomes in the scratch key of counts.
const TEMP_PART: &str = "herenow-count";

const MINUTE_MS: Millis = 60_000;

/// KEYS: the bucket to write, then the buckets of the window (newest
/// first). ARGV: the expiry in seconds, then ids. Returns how many ids were
/// in none of the window's buckets (joins).
static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/layouts/minute_buckets_heartbeat.lua")));

/// KEYS: every bucket of the hour, newest first. ARGV: how many of them the
/// window covers, then ids. Removes the ids everywhere; returns how many
/// were in the window.
static LEAVE: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/layouts/minute_buckets_leave.lua")));

/// The index of the minute holding `ms` (minutes since the epoch).
fn minute_of(ms: Millis) -> u64 {
    ms / MINUTE_MS
}

/// The key of the bucket of minute `index`.
fn bucket(s: &LayoutCtx, t: &KeyTemplate, space: &SpaceName, index: u64) -> String {
    let mm = (index as i64 + i64::from(s.opts.utc_offset_minutes)).rem_euclid(60);
    t.render(space, &format!("{mm:02}"))
}

/// The `n` buckets ending with the current minute, newest first, with
/// their minute indexes.
fn buckets(s: &LayoutCtx, t: &KeyTemplate, space: &SpaceName, n: u64) -> Vec<(u64, String)> {
    let now = minute_of(s.clock.now_ms());
    (0..n.min(now + 1))
        .map(|i| (now - i, bucket(s, t, space, now - i)))
        .collect()
}

/// Buckets a window covers: its length in minutes, rounded up.
fn window_buckets(s: &LayoutCtx, window_ms: Option<Millis>) -> Result<u64> {
    Ok(s.window(window_ms)?.div_ceil(MINUTE_MS))
}

/// Buckets the policy covers: the retention, in whole minutes.
fn policy_buckets(s: &LayoutCtx) -> u64 {
    s.policy.retention_ms / MINUTE_MS
}

#[async_trait]
impl LayoutOps for MinuteBuckets {
    /// The window rounded up to whole minutes (at most 59: key names repeat
    /// every hour), which is also the retention: buckets expire after it.
    fn policy(&self, d: SpaceConfig, _opts: &LayoutOptions) -> Result<SpaceConfig> {
        let minutes = d.window_ms.div_ceil(60_000);
        if minutes > 59 {
            return Err(bad_config(
                "minute buckets cover at most 59 minutes: their key names repeat every hour",
            ));
        }
        policy_over(d, minutes * 60_000)
    }

    fn slot_parts(&self) -> &'static [&'static str] {
        &["00", "59", TEMP_PART]
    }

    /// Buckets expire by Redis's `EXPIRE`: nothing to visit.
    fn sweeps_spaces(&self) -> bool {
        false
    }

    async fn tick(&self, _s: &LayoutCtx) -> Result<TickReport> {
        Ok(TickReport::default())
    }

    async fn heartbeat(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        beats: &[Heartbeat],
    ) -> Result<HeartbeatReport> {
        let now = s.clock.now_ms();
        let now_min = minute_of(now);
        let span = policy_buckets(s);
        let mut report = HeartbeatReport::default();
        // One script per (kind, bucket): nearly always one call.
        let mut groups: HashMap<(MemberKind, u64), Vec<&str>> = HashMap::new();
        for b in beats {
            // A time in the (allowed) future counts as now: its bucket must
            // not be written before its minute.
            let at_min = minute_of(b.at_ms.unwrap_or(now).min(now));
            if at_min + span <= now_min {
                report.stale += 1;
                continue;
            }
            groups
                .entry((b.member.kind, at_min))
                .or_default()
                .push(b.member.id.as_str());
        }
        for ((kind, at_min), ids) in groups {
            let t = s.template(kind)?;
            // The seed's EXPIRE, less the minutes since the bucket began.
            let ttl = (span - (now_min - at_min)) * 60;
            let mut inv = HEARTBEAT.prepare_invoke();
            inv.key(bucket(s, t, space, at_min));
            for (_, k) in buckets(s, t, space, span) {
                inv.key(k);
            }
            inv.arg(ttl).arg(&ids);
            let mut c = s.client.clone();
            let joined: u64 = s.io("heartbeat", inv.invoke_async(&mut c)).await?;
            report.accepted += ids.len() as u64;
            report.joined += joined;
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
            let t = s.template(kind)?;
            let mut inv = LEAVE.prepare_invoke();
            for (_, k) in buckets(s, t, space, 60) {
                inv.key(k);
            }
            inv.arg(policy_buckets(s)).arg(&ids);
            let mut c = s.client.clone();
            present += s.io("leave", inv.invoke_async::<u64>(&mut c)).await?;
        }
        Ok(present)
    }

    async fn status(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<MemberStatus>> {
        let now = s.clock.now_ms();
        let mut seen: Vec<Option<Millis>> = vec![None; members.len()];
        for kind in MemberKind::ALL {
            let at: Vec<usize> = (0..members.len())
                .filter(|&i| members[i].kind == kind)
                .collect();
            if at.is_empty() {
                continue;
            }
            let buckets = buckets(s, s.template(kind)?, space, policy_buckets(s));
            let mut pipe = redis::pipe();
            for (_, k) in &buckets {
                let cmd = pipe.cmd("SMISMEMBER").arg(k);
                for &i in &at {
                    cmd.arg(members[i].id.as_str());
                }
            }
            let mut c = s.client.clone();
            let found: Vec<Vec<i64>> = s.io("status", pipe.query_async(&mut c)).await?;
            if found.len() != buckets.len() || found.iter().any(|f| f.len() != at.len()) {
                return Err(bad_reply("SMISMEMBER answered a different number of flags"));
            }
            // Newest bucket first: the first hit is the last minute seen.
            for ((index, _), flags) in buckets.iter().zip(&found) {
                for (&i, &flag) in at.iter().zip(flags) {
                    if flag == 1 && seen[i].is_none() {
                        seen[i] = Some(index * MINUTE_MS);
                    }
                }
            }
        }
        Ok(s.answer(members, seen, now))
    }

    async fn list(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        query: &ListQuery,
        order: Order,
        cursor: Option<&Cursor>,
    ) -> Result<Page> {
        let now = s.clock.now_ms();
        let n = window_buckets(s, query.window_ms)?;
        let mut items = Vec::new();
        for (kind, t) in s.kinds(query.kinds)? {
            let buckets = buckets(s, t, space, n);
            let keys: Vec<String> = buckets.iter().map(|(_, k)| k.clone()).collect();
            s.check_scan(&keys).await?;
            let mut pipe = redis::pipe();
            for k in &keys {
                pipe.cmd("SMEMBERS").arg(k);
            }
            let mut c = s.client.clone();
            let sets: Vec<Value> = s.io("list", pipe.query_async(&mut c)).await?;
            if sets.len() != buckets.len() {
                return Err(bad_reply("SMEMBERS answered a different number of sets"));
            }
            // Newest bucket first: the first sighting is the last minute seen.
            let mut newest: HashMap<herenow_core::MemberId, u64> = HashMap::new();
            for ((index, _), set) in buckets.iter().zip(sets) {
                for id in members_of(set)? {
                    newest.entry(id).or_insert(*index);
                }
            }
            items.extend(newest.into_iter().map(|(id, index)| Item {
                member: MemberKey { kind, id },
                last_seen: Some(index * MINUTE_MS),
            }));
        }
        Ok(page_of(items, order, cursor, query.limit, |t| {
            s.policy.status(t, now)
        }))
    }

    async fn count(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        window_ms: Option<Millis>,
    ) -> Result<Counts> {
        let n = window_buckets(s, window_ms)?;
        let mut counts = Counts::default();
        for (kind, t) in s.kinds(KindFilter::All)? {
            let keys: Vec<String> = buckets(s, t, space, n)
                .into_iter()
                .map(|(_, k)| k)
                .collect();
            let c = s.union_count(t.render(space, TEMP_PART), &keys).await?;
            match kind {
                MemberKind::User => counts.users = c,
                MemberKind::Guest => counts.guests = c,
            }
        }
        Ok(counts)
    }
}
