//! `sorted-set`: seeds 001 and 004. One sorted set per template (per space
//! with `{space}`), member = the raw id, score = last seen in whole UNIX
//! seconds, exactly as `conn.zadd("whos_online:users", ts, "sally")` and
//! `ZAdd(ctx, "presence:"+ns, &redis.Z{Score: float64(t.Unix()), …})`
//! write it.
//!
//! - heartbeat: `ZADD key GT <seconds> <id>` (newest wins, so a late or
//!   replayed heartbeat never moves a member back), in a short script that
//!   also reads the old score to report joins and stale beats;
//! - last seen: `ZMSCORE`; answered in ms as seconds × 1000 (a fractional
//!   score written by other code keeps its milliseconds);
//! - who's online: `ZRANGE key +inf <cutoff> BYSCORE REV LIMIT` read in
//!   chunks for "most recent first" (seed 004's paging), a bounded
//!   `ZRANGEBYSCORE` for "by id"; count: `ZCOUNT`;
//! - leave: `ZREM`;
//! - expiry (`tick`): what seed 001 does with one `ZREMRANGEBYSCORE 0
//!   cutoff`, in bounded batches instead (`ZRANGEBYSCORE … LIMIT 0 N` then
//!   `ZREM`, one short script per batch), so a large backlog never blocks
//!   Redis. Members past the retention are never answered, swept or not.

use std::sync::LazyLock;
use std::time::Instant;

use async_trait::async_trait;
use redis::{AsyncCommands, Script, Value};

use herenow_core::cursor::Cursor;
use herenow_core::{
    Counts, Heartbeat, HeartbeatReport, ListQuery, MemberKey, MemberKind, MemberStatus, Millis,
    Order, Page, Result, SpaceConfig, SpaceName, TickReport,
};

use super::common::{Item, LayoutCtx, LayoutOps, ids_of, member_id, page_of, precedes};
use super::layout_options::LayoutOptions;
use crate::reply::{array, bad_reply, bytes_of};
use crate::scripts::bare;

/// Seeds 001 and 004's layout: see the module documentation.
pub(super) struct SortedSet;

/// ARGV: now ms, away ms, then (seconds, id) pairs. Returns accepted,
/// joined, stale. A member joins when it was offline (absent, or last seen
/// `away` or longer ago) and the heartbeat makes it not offline.
static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/layouts/sorted_set_heartbeat.lua")));

/// ARGV: now ms, retention ms, then ids. Removes them; returns how many
/// were still within the retention.
static LEAVE: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/layouts/sorted_set_leave.lua")));

/// ARGV: the highest score to forget, the batch size. One bounded batch of
/// seed 001's `ZREMRANGEBYSCORE`: read at most N stale members and remove
/// exactly those, atomically, so a member that heartbeats meanwhile is
/// never removed. Returns removed, and whether the key still exists.
static EXPIRE_BATCH: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("../lua/layouts/sorted_set_expire_batch.lua")));

/// A score in ms, as the seeds' whole seconds (or another writer's
/// fractional ones) give it.
fn score_ms(score: f64) -> Millis {
    (score * 1000.0).floor().max(0.0) as Millis
}

/// Milliseconds as a score bound with the same precision.
fn ms_score(ms: Millis) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

fn score_of(v: &Value) -> Result<f64> {
    match v {
        Value::Double(d) => Ok(*d),
        Value::Int(i) => Ok(*i as f64),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad_reply("a score")),
        Value::SimpleString(s) => s.parse().map_err(|_| bad_reply("a score")),
        other => Err(bad_reply(&format!("{other:?} as a score"))),
    }
}

/// A `WITHSCORES` reply: pairs under RESP3, a flat list under RESP2.
/// Ids herenow cannot accept are left out (see `member_id`).
fn scored(v: Value, kind: MemberKind) -> Result<Vec<Item>> {
    let items = array(v)?;
    let mut pairs = Vec::with_capacity(items.len());
    let mut flat = Vec::new();
    for item in items {
        match item {
            Value::Array(pair) if pair.len() == 2 => {
                let mut it = pair.into_iter();
                let (m, s) = (it.next(), it.next());
                pairs.push((m.unwrap_or(Value::Nil), s.unwrap_or(Value::Nil)));
            }
            other => flat.push(other),
        }
    }
    if flat.len() % 2 != 0 {
        return Err(bad_reply("an odd WITHSCORES reply"));
    }
    let mut it = flat.into_iter();
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        pairs.push((m, s));
    }
    let mut out = Vec::with_capacity(pairs.len());
    for (m, s) in pairs {
        let Some(raw) = bytes_of(&m) else {
            return Err(bad_reply(&format!("{m:?} as a member")));
        };
        let score = score_of(&s)?;
        if let Some(id) = member_id(raw) {
            out.push(Item {
                member: MemberKey { kind, id },
                last_seen: Some(score_ms(score)),
            });
        }
    }
    Ok(out)
}

/// The first `limit + 1` members of `key` after the cursor, most recent
/// first, read with seed 004's `ZRANGE … BYSCORE REV LIMIT` in chunks.
/// Redis orders equal scores by id descending and herenow by id ascending,
/// so reading goes on until the score of the boundary member is read whole.
async fn recent(
    s: &LayoutCtx,
    key: &str,
    kind: MemberKind,
    min: &str,
    cursor: Option<&Cursor>,
    limit: usize,
) -> Result<Vec<Item>> {
    let max = match cursor {
        // The cursor's second and everything below; the same second is
        // filtered by id below.
        Some(Cursor::Recent(c)) => ms_score(c.at_ms.saturating_add(1000)),
        _ => "+inf".to_owned(),
    };
    let chunk = s.opts.expire_batch.max(limit + 1);
    let mut kept: Vec<Item> = Vec::new();
    let mut offset = 0;
    loop {
        let mut c = s.client.clone();
        let v: Value = s
            .io(
                "list",
                redis::cmd("ZRANGE")
                    .arg(key)
                    .arg(&max)
                    .arg(min)
                    .arg("BYSCORE")
                    .arg("REV")
                    .arg("LIMIT")
                    .arg(offset)
                    .arg(chunk)
                    .arg("WITHSCORES")
                    .query_async(&mut c),
            )
            .await?;
        let read = scored(v, kind)?;
        let got = read.len();
        let last_read = read.last().and_then(|i| i.last_seen);
        kept.extend(
            read.into_iter()
                .filter(|i| cursor.is_none_or(|c| precedes(c, i))),
        );
        offset += got;
        let boundary_done = kept.len() > limit && last_read < kept[limit].last_seen;
        if got < chunk || boundary_done {
            return Ok(kept);
        }
        if offset > s.opts.max_scan {
            // Only a crowd of members sharing one second gets here: a
            // page cut inside it could be in the wrong order.
            return Err(
                s.unsupported("a page inside more than max_scan members seen in the same second")
            );
        }
    }
}

#[async_trait]
impl LayoutOps for SortedSet {
    /// The defaults as given: the sorted set keeps every member's time.
    fn policy(&self, defaults: SpaceConfig, _opts: &LayoutOptions) -> Result<SpaceConfig> {
        Ok(defaults)
    }

    fn slot_parts(&self) -> &'static [&'static str] {
        &[]
    }

    fn sweeps_spaces(&self) -> bool {
        true
    }

    async fn heartbeat(
        &self,
        s: &LayoutCtx,
        space: &SpaceName,
        beats: &[Heartbeat],
    ) -> Result<HeartbeatReport> {
        let now = s.clock.now_ms();
        let mut report = HeartbeatReport::default();
        for kind in MemberKind::ALL {
            let mut inv = HEARTBEAT.prepare_invoke();
            let mut any = false;
            for b in beats.iter().filter(|b| b.member.kind == kind) {
                let at = b.at_ms.unwrap_or(now);
                if now.saturating_sub(at) >= s.policy.retention_ms {
                    report.stale += 1;
                    continue;
                }
                if !any {
                    inv.key(s.template(kind)?.render(space, ""))
                        .arg(now)
                        .arg(s.policy.away_ms);
                    any = true;
                }
                // Whole seconds, as the seeds write them.
                inv.arg(at / 1000).arg(b.member.id.as_str());
            }
            if !any {
                continue;
            }
            let mut c = s.client.clone();
            let (accepted, joined, stale): (u64, u64, u64) =
                s.io("heartbeat", inv.invoke_async(&mut c)).await?;
            report.accepted += accepted;
            report.joined += joined;
            report.stale += stale;
        }
        Ok(report)
    }

    async fn leave(&self, s: &LayoutCtx, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        let now = s.clock.now_ms();
        let mut present = 0;
        for kind in MemberKind::ALL {
            let ids = ids_of(members, kind);
            if ids.is_empty() {
                continue;
            }
            let mut inv = LEAVE.prepare_invoke();
            inv.key(s.template(kind)?.render(space, ""))
                .arg(now)
                .arg(s.policy.retention_ms)
                .arg(&ids);
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
            let mut cmd = redis::cmd("ZMSCORE");
            cmd.arg(s.template(kind)?.render(space, ""));
            for &i in &at {
                cmd.arg(members[i].id.as_str());
            }
            let mut c = s.client.clone();
            let scores: Vec<Option<f64>> = s.io("status", cmd.query_async(&mut c)).await?;
            if scores.len() != at.len() {
                return Err(bad_reply("ZMSCORE answered a different number of scores"));
            }
            for (i, score) in at.into_iter().zip(scores) {
                // Past the retention is forgotten, whether swept yet or not.
                seen[i] = score
                    .map(score_ms)
                    .filter(|&t| t.saturating_add(s.policy.retention_ms) > now);
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
        let window = s.window(query.window_ms)?;
        let min = ms_score(now.saturating_sub(window));
        let mut items = Vec::new();
        for (kind, t) in s.kinds(query.kinds)? {
            let key = t.render(space, "");
            let read = match order {
                Order::Recent => recent(s, &key, kind, &min, cursor, query.limit).await?,
                Order::Id => {
                    let mut c = s.client.clone();
                    let n: u64 = s.io("count", c.zcount(&key, &min, "+inf")).await?;
                    if n > s.opts.max_scan as u64 {
                        return Err(s.unsupported(
                            "listing by id more members than max_scan (list most recent first)",
                        ));
                    }
                    let v: Value = s
                        .io("list", c.zrangebyscore_withscores(&key, &min, "+inf"))
                        .await?;
                    scored(v, kind)?
                }
            };
            items.extend(read);
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
        let now = s.clock.now_ms();
        let window = s.window(window_ms)?;
        let min = ms_score(now.saturating_sub(window));
        let mut counts = Counts::default();
        for (kind, t) in s.kinds(herenow_core::KindFilter::All)? {
            let mut c = s.client.clone();
            let n: u64 = s
                .io("count", c.zcount(t.render(space, ""), &min, "+inf"))
                .await?;
            match kind {
                MemberKind::User => counts.users = n,
                MemberKind::Guest => counts.guests = n,
            }
        }
        Ok(counts)
    }

    async fn tick(&self, s: &LayoutCtx) -> Result<TickReport> {
        let now = s.clock.now_ms();
        let mut report = TickReport::default();
        let Some(horizon) = now.checked_sub(s.policy.retention_ms) else {
            return Ok(report);
        };
        let max = ms_score(horizon);
        for space in s.sweep_spaces() {
            let mut exists = false;
            for (_, t) in s.kinds(herenow_core::KindFilter::All)? {
                let key = t.render(&space, "");
                let mut key_exists = true;
                for _ in 0..s.opts.tick_batches {
                    let mut inv = EXPIRE_BATCH.prepare_invoke();
                    inv.key(&key).arg(&max).arg(s.opts.expire_batch);
                    let mut c = s.client.clone();
                    let started = Instant::now();
                    let (removed, still): (u64, u64) =
                        s.io("expire", inv.invoke_async(&mut c)).await?;
                    report.max_hold_us =
                        report.max_hold_us.max(started.elapsed().as_micros() as u64);
                    report.expired += removed;
                    key_exists = still == 1;
                    if removed < s.opts.expire_batch as u64 {
                        break;
                    }
                }
                exists |= key_exists;
            }
            if !exists && s.forget(&space) {
                report.spaces_dropped += 1;
            }
        }
        Ok(report)
    }
}
