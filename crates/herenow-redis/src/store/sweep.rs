//! Background work ([`PresenceStore::tick`](herenow_core::PresenceStore::tick)):
//! each registered space, shard by shard, under a per-shard lease so that
//! of many stores on one Redis one sweeps a shard at a time. The sweep
//! script closes expired connections first (its own budget), then moves
//! the watermarks, expires members (remembering them) and forgets
//! remembered times past the horizon, in bounded steps; an empty space
//! leaves the registry.
//!
//! A space that holds nothing but remembered times leaves the registry of
//! names too (it is not listed, and not walked every tick), for the
//! registry of remembered times ([`Keys::due`](crate::key_names)): space → when
//! its first remembered time passes the horizon. Each tick also visits the
//! spaces due by then, and reschedules them or, once they remember nothing,
//! drops them. A due time is a hint: one made stale by a shorter horizon
//! or a backfilled sighting only delays freeing the memory, since every
//! read applies the horizon itself.
//!
//! The sweep also keeps users' indexes of spaces (see
//! [`Keys::seen`](crate::key_names)): it indexes the users a writer left in a
//! shard's `unidx` (a writer that failed or died between its script and
//! the index), and drops the space from the index of each user whose
//! remembered time it forgot, if that user's mark there is older than
//! [`INDEX_GRACE_MS`] (a writer that stored the user again since marked it
//! later, or will mark it: it keeps it).

use std::time::Instant;

use redis::Value;

use herenow_core::{Millis, Result, SpaceName, TickReport};

use super::RedisStore;
use crate::conn_scripts;
use crate::key_names::SpaceKeys;
use crate::outbox::{self, Captured};
use crate::reply::{array, bad_reply, int, opt_string};
use crate::user_scripts;
use crate::writer::TOUCH_EVERY_MS;

/// How old a user's mark for a space must be before the sweep (or a
/// read) may drop the space from the user's index after finding nothing of
/// the user there. Longer than any write takes between its script and its
/// index write, and than clocks of servers sharing a Redis disagree.
pub(crate) const INDEX_GRACE_MS: Millis = 10 * 60_000;

/// Most users one tick takes off a shard's `unidx` into their indexes.
const INDEX_DRAIN: usize = 1_024;

/// Most pages (of 256 spaces) of the registry of remembered times one tick
/// visits; the rest wait for the next tick.
const DUE_PAGES: usize = 16;

/// What sweeping one shard did and found.
struct Swept {
    report: TickReport,
    /// Members, connections and users waiting to be indexed, still stored.
    stored: i64,
    /// Members of the remembered sets.
    remembered: i64,
    /// When the first remembered time passes the horizon (-1: none).
    due: i64,
}

impl RedisStore {
    /// [`PresenceStore::tick`](herenow_core::PresenceStore::tick): first
    /// drops event channels nobody listens to, then walks the registry in
    /// pages of 256 names and sweeps each space, then the spaces whose
    /// remembered times are due.
    pub(super) async fn sweep(&self) -> Result<TickReport> {
        {
            let _guard = self.sub_lock.lock().await;
            self.prune_channels().await;
        }
        let mut report = TickReport::default();
        // First: a dead server's connections start their grace now.
        self.reap_dead().await?;
        let (names, _) = self.ctx.keys.registry();
        let mut start = "-".to_owned();
        loop {
            let page = redis::Cmd::zrangebylex_limit(&names, &start, "+", 0, 256);
            let batch: Vec<String> = self.ctx.query("tick", &page).await?;
            for name in &batch {
                if let Ok(space) = SpaceName::new(name) {
                    self.sweep_space(&space, None, &mut report).await?;
                }
            }
            match batch.last() {
                Some(last) if batch.len() == 256 => start = format!("({last}"),
                _ => break,
            }
        }
        self.sweep_due(&mut report).await?;
        Ok(report)
    }

    /// Visits the spaces of the registry of remembered times that are due
    /// (each is rescheduled past now or dropped, so the next page starts
    /// from the top again).
    async fn sweep_due(&self, report: &mut TickReport) -> Result<()> {
        let due = self.ctx.keys.due();
        for _ in 0..DUE_PAGES {
            let now = self.ctx.clock.now_ms();
            let page = redis::Cmd::zrangebyscore_limit_withscores(&due, "-inf", now, 0, 256);
            let v: Value = self.ctx.query("tick", &page).await?;
            let batch = scored(v)?;
            for (name, at) in &batch {
                if let Ok(space) = SpaceName::new(name) {
                    self.sweep_space(&space, Some(*at), report).await?;
                }
            }
            if batch.len() < 256 {
                break;
            }
        }
        Ok(())
    }

    /// Background work on every shard of `space` (at once), then drops the
    /// space from the registry if nothing is stored in any shard, and
    /// schedules (or, visited as due at `due_seen`, reschedules or drops)
    /// its remembered times.
    pub(super) async fn sweep_space(
        &self,
        space: &SpaceName,
        due_seen: Option<Millis>,
        report: &mut TickReport,
    ) -> Result<()> {
        let shards = self.ctx.keys.all(space);
        let done = futures::future::try_join_all(shards.iter().map(|k| self.sweep_shard(space, k)))
            .await?;
        let (mut left, mut remembered, mut due) = (0, 0, None::<Millis>);
        for s in done {
            let r = s.report;
            report.expired += r.expired;
            report.transitions += r.transitions;
            report.connections_expired += r.connections_expired;
            report.forgotten += r.forgotten;
            report.max_hold_us = report.max_hold_us.max(r.max_hold_us);
            left += s.stored;
            remembered += s.remembered;
            if s.due >= 0 {
                let d = s.due as Millis;
                due = Some(due.map_or(d, |x| x.min(d)));
            }
        }
        let now = self.ctx.clock.now_ms();
        if left == 0 {
            let (names, touched) = self.ctx.keys.registry();
            let cutoff = now.saturating_sub(2 * TOUCH_EVERY_MS);
            let dropped: i64 = self
                .ctx
                .invoke(
                    "unregister",
                    user_scripts::UNREGISTER
                        .key(names)
                        .key(touched)
                        .key(self.ctx.keys.registry_shards())
                        .arg(space.as_str())
                        .arg(cutoff)
                        .arg(u8::from(remembered > 0)),
                )
                .await?;
            report.spaces_dropped += dropped as u64;
        }
        if remembered > 0 && (left == 0 || due_seen.is_some()) {
            // Never at or before now: a space whose shards another store
            // sweeps (and trims) comes back a lease later, not in this tick.
            let lease_ms = self.ctx.opts.lease.as_millis().max(1) as Millis;
            let at = due.unwrap_or(now).max(now + lease_ms);
            let due_key = self.ctx.keys.due();
            self.ctx
                .query::<Value>(
                    "schedule",
                    redis::cmd("ZADD").arg(&due_key).arg(at).arg(space.as_str()),
                )
                .await?;
        } else if let (0, Some(seen)) = (remembered, due_seen) {
            let (names, _) = self.ctx.keys.registry();
            self.ctx
                .invoke::<Value>(
                    "unschedule",
                    user_scripts::DUE_DONE
                        .key(names)
                        .key(self.ctx.keys.due())
                        .key(self.ctx.keys.registry_shards())
                        .arg(space.as_str())
                        .arg(seen),
                )
                .await?;
        }
        Ok(())
    }

    /// Bounded steps of background work on one shard until nothing is left
    /// to do, or nothing at all if another store holds its sweep lease.
    /// Returns what it did, how many members and connections the shard
    /// still stores, and what it remembers.
    async fn sweep_shard(&self, space: &SpaceName, k: &SpaceKeys) -> Result<Swept> {
        let d = self.ctx.defaults_args();
        let lease_ms = self.ctx.opts.lease.as_millis().max(1) as u64;
        let mut report = TickReport::default();
        loop {
            let now = self.ctx.clock.now_ms();
            let started = Instant::now();
            let mut inv = conn_scripts::SWEEP.prepare_invoke();
            k.add_to(&mut inv);
            inv.arg(now)
                .arg(&d[..])
                .arg(self.ctx.publish_arg(space).as_ref())
                .arg(&k.channel)
                .arg(self.ctx.opts.tick_budget)
                .arg(&self.owner)
                .arg(lease_ms)
                .arg(self.ctx.opts.tick_budget);
            let v: Value = self.ctx.invoke("tick", &inv).await?;
            report.max_hold_us = report.max_hold_us.max(started.elapsed().as_micros() as u64);
            let mut v = array(v)?;
            outbox::after(&self.ctx, space, k, Captured::of(v.get(10))).await;
            report.expired += int(v.first())? as u64;
            report.transitions += int(v.get(1))? as u64;
            report.connections_expired += int(v.get(4))? as u64;
            let more = int(v.get(2))? != 0;
            let left = int(v.get(3))?;
            if left < 0 {
                // Another store holds the sweep lease: it does this shard.
                return Ok(Swept {
                    report,
                    stored: int(v.get(5))?,
                    remembered: int(v.get(6))?,
                    due: int(v.get(7))?,
                });
            }
            // Only the lease holder's reply counts what it forgot (another
            // store's answers `stored` in that place).
            report.forgotten += int(v.get(5))? as u64;
            let trimmed = ids_of(v.get_mut(9).map(std::mem::take))?;
            self.unindex(space, &trimmed, now.saturating_sub(INDEX_GRACE_MS))
                .await?;
            if !more {
                if int(v.get(8))? > 0 {
                    self.drain_unindexed(space, k, now).await?;
                }
                return Ok(Swept {
                    report,
                    stored: left,
                    remembered: int(v.get(6))?,
                    due: int(v.get(7))?,
                });
            }
        }
    }

    /// Indexes (a bounded number of) the users waiting in a shard's
    /// `unidx`: those whose writer did not.
    async fn drain_unindexed(&self, space: &SpaceName, k: &SpaceKeys, now: Millis) -> Result<()> {
        let v: Value = self
            .ctx
            .query(
                "tick",
                redis::cmd("SRANDMEMBER").arg(&k.unidx).arg(INDEX_DRAIN),
            )
            .await?;
        let users = ids_of(Some(v))?;
        if users.is_empty() {
            return Ok(());
        }
        self.writer.index_users(space, k, &users, now).await
    }

    /// Drops `space` from the index of each of `users` if their mark there
    /// is at or before `upto` (see [`user_scripts::UNINDEX`]): one script per
    /// group of indexes (see `Ctx::user_groups`).
    pub(super) async fn unindex(
        &self,
        space: &SpaceName,
        users: &[String],
        upto: Millis,
    ) -> Result<()> {
        futures::future::try_join_all(self.ctx.user_groups(users).into_iter().map(|group| {
            let mut inv = user_scripts::UNINDEX.prepare_invoke();
            for i in group {
                inv.key(self.ctx.keys.seen(&users[i]));
            }
            inv.arg(space.as_str()).arg(upto);
            async move { self.ctx.invoke::<Value>("unindex", &inv).await }
        }))
        .await?;
        Ok(())
    }
}

/// Ids in a reply (an array of strings; nil or absent: none).
pub(super) fn ids_of(v: Option<Value>) -> Result<Vec<String>> {
    match v {
        None => Ok(Vec::new()),
        Some(v) => array(v)?
            .into_iter()
            .map(|id| opt_string(Some(id))?.ok_or_else(|| bad_reply("an id")))
            .collect(),
    }
}

/// A `WITHSCORES` reply: flat `member, score` under RESP2, pairs under
/// RESP3; scores as whole milliseconds.
pub(super) fn scored(v: Value) -> Result<Vec<(String, Millis)>> {
    let mut flat = Vec::new();
    for x in array(v)? {
        match x {
            Value::Array(pair) => flat.extend(pair),
            other => flat.push(other),
        }
    }
    if flat.len() % 2 != 0 {
        return Err(bad_reply("member and score pairs"));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        let m = opt_string(Some(m))?.ok_or_else(|| bad_reply("a member"))?;
        out.push((m, int(Some(&s))? as Millis));
    }
    Ok(out)
}
