//! Which stores (servers) on this Redis are alive, so that the live
//! connections of one that died (SIGKILL, a machine lost, a partition) are
//! handed to the grace within seconds, not when each connection's TTL runs
//! out (see [`herenow_core::conn`]).
//!
//! - Each store beats every [`BEAT_EVERY`] on its own task, independent of
//!   the sweep: its name's score in [`Keys::instances`](crate::key_names)
//!   is the store clock's time.
//! - Each store records the connections it attached, and forgets those it
//!   detached or lingered, in a set of its own
//!   ([`Keys::instance_conns`](crate::key_names)): one more command when a
//!   connection opens and one when it ends, none per ping.
//! - Every tick, a store looks for names whose beat has not moved for
//!   [`DEAD_AFTER_MS`] of its own monotonic time; the first to claim one (a claim key, `SET NX`)
//!   lingers each of its connections, popping them as it goes so that a
//!   reaper that dies half way leaves the rest to the next, then drops
//!   the name. A store that stops cleanly hands its own connections over
//!   the same way ([`RedisStore::shutdown`]).
//!
//! A store that was only slow (its beats late by more than
//! [`DEAD_AFTER_MS`]) and comes back finds its name gone; its sockets
//! attach again at their next refresh, as a new connection would.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use tokio::sync::watch;

use herenow_core::{ConnId, MemberId, MemberKey, MemberKind, Millis, Result, SpaceName};

use super::RedisStore;
use crate::client::RedisClient;
use crate::ctx::Ctx;
use crate::reply::timed;

/// How often a store beats.
pub const BEAT_EVERY: Duration = Duration::from_millis(500);

/// How long a store may go without a beat before its connections are
/// handed to the grace, as ended at its last beat: five missed beats, so a
/// store only briefly slow keeps them. BENCHMARKS.md ("A server going
/// away") has how soon a dead store's members are gone.
pub const DEAD_AFTER_MS: Millis = 2_500;

/// How long a reaper's claim on a dead store lasts.
const REAP_CLAIM_MS: u64 = 60_000;

/// Most connections one pop takes from a dead store's set.
const REAP_BATCH: usize = 256;

/// Most dead stores one tick reaps.
const REAP_STORES: usize = 8;

/// Beats for `owner` every [`BEAT_EVERY`] until `stopped`, on `client`:
/// a connection of its own, so that a beat never waits behind the
/// server's other commands (a burst of attaches would otherwise make a
/// busy server look dead).
pub(super) async fn beat(
    ctx: std::sync::Arc<Ctx>,
    client: RedisClient,
    owner: String,
    mut stopped: watch::Receiver<bool>,
) {
    let key = ctx.keys.instances();
    let mut every = tokio::time::interval(BEAT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = true;
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stopped.changed() => return,
        }
        let now = ctx.clock.now_ms();
        let mut c = client.clone();
        let added = timed(
            &ctx.opts.observer,
            ctx.opts.timeout,
            "beat",
            c.zadd::<_, _, _, i64>(&key, &owner, now),
        )
        .await;
        if let Ok(1) = added
            && !first
        {
            tracing::warn!(
                "this server missed its beats on Redis for {} ms or more; the others handed its \
                 connections to the grace, and its sockets attach again at their next refresh",
                DEAD_AFTER_MS
            );
        }
        first = false;
    }
}

/// One entry of a store's set of connections.
fn entry(space: &SpaceName, member: &MemberKey, conn: &ConnId) -> String {
    format!(
        "{space}\n{}:{}\n{conn}",
        member.kind.letter(),
        member.id.as_str()
    )
}

/// The connection an entry names; `None` for one that does not parse
/// (written by something else).
fn parse_entry(e: &str) -> Option<(SpaceName, MemberKey, ConnId)> {
    let mut parts = e.splitn(3, '\n');
    let space = SpaceName::new(parts.next()?).ok()?;
    let (kind, id) = parts.next()?.split_once(':')?;
    let member = MemberKey {
        kind: MemberKind::from_letter(kind)?,
        id: MemberId::new(id).ok()?,
    };
    let conn = ConnId::new(parts.next()?).ok()?;
    Some((space, member, conn))
}

impl RedisStore {
    /// Records `conn` in this store's set unless it did already; whether
    /// it was new. Called before every attach, so one `SADD` per
    /// connection, before the connection exists in the store.
    pub(super) async fn record_conn(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<bool> {
        let key = (space.clone(), conn.clone());
        if !self.recorded.lock().insert(key.clone()) {
            return Ok(false);
        }
        if let Err(e) = self.own_conn(space, member, conn, true).await {
            self.recorded.lock().remove(&key);
            return Err(e);
        }
        Ok(true)
    }

    /// Takes `conn` out of this store's set: detached or lingered.
    pub(super) async fn forget_conn(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<()> {
        self.recorded.lock().remove(&(space.clone(), conn.clone()));
        self.own_conn(space, member, conn, false).await
    }

    /// Records `conn` as this store's, or forgets it (`own` false: after
    /// it was detached or lingered).
    pub(super) async fn own_conn(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
        own: bool,
    ) -> Result<()> {
        let key = self.ctx.keys.instance_conns(&self.owner);
        let e = entry(space, member, conn);
        let (what, cmd) = if own {
            ("attach", "SADD")
        } else {
            ("detach", "SREM")
        };
        self.ctx
            .query::<i64>(what, redis::cmd(cmd).arg(&key).arg(e))
            .await?;
        Ok(())
    }

    /// Hands the connections of every store that stopped beating to the
    /// grace; how many connections it lingered. Run by each tick.
    ///
    /// "Stopped" is judged by this store's own monotonic clock: a name
    /// whose beat has not moved for [`DEAD_AFTER_MS`] since this store
    /// last saw it move. So stores whose clocks disagree, or a test's
    /// manual clock jumping ahead, never make a live store look dead.
    pub(super) async fn reap_dead(&self) -> Result<u64> {
        let key = self.ctx.keys.instances();
        let mut c = self.ctx.client.clone();
        let beats: Vec<(String, f64)> = self
            .ctx
            .io("reap", async { c.zrange_withscores(&key, 0, -1).await })
            .await?;
        let dead: Vec<(String, f64)> = {
            let now = Instant::now();
            let mut seen = self.beats_seen.lock();
            seen.retain(|owner, _| beats.iter().any(|(o, _)| o == owner));
            beats
                .into_iter()
                .filter(|(owner, _)| *owner != self.owner)
                .filter_map(|(owner, score)| {
                    let last = seen.entry(owner.clone()).or_insert((score, now));
                    if last.0 != score {
                        *last = (score, now);
                    }
                    (now.duration_since(last.1) >= Duration::from_millis(DEAD_AFTER_MS))
                        .then_some((owner, score))
                })
                .take(REAP_STORES)
                .collect()
        };
        let mut reaped = 0;
        for (owner, last_beat) in &dead {
            let claim = self.ctx.keys.instance_reaper(owner);
            let mut c = self.ctx.client.clone();
            let opts = redis::SetOptions::default()
                .conditional_set(redis::ExistenceCheck::NX)
                .with_expiration(redis::SetExpiry::PX(REAP_CLAIM_MS));
            let got: Option<String> = self
                .ctx
                .io("reap", async {
                    c.set_options(&claim, &self.owner, opts).await
                })
                .await?;
            if got.is_none() {
                continue; // another store reaps it
            }
            // Its connections ended when it was last heard of.
            let n = self.reap(owner, Some(*last_beat as Millis)).await?;
            self.beats_seen.lock().remove(owner);
            tracing::warn!(
                server = %owner,
                connections = n,
                "a server sharing this Redis stopped beating; its connections are in their grace"
            );
            reaped += n;
        }
        Ok(reaped)
    }

    /// Lingers every connection `owner` recorded, as ended at `ended_at`
    /// (`None`: now), and gives up the sweep leases it held on their
    /// spaces (a dead store's lease would keep everyone else from closing
    /// them when their grace ends, until it expired); then drops its name.
    pub(super) async fn reap(&self, owner: &str, ended_at: Option<Millis>) -> Result<u64> {
        let set = self.ctx.keys.instance_conns(owner);
        let mut n = 0;
        let mut spaces = std::collections::HashSet::new();
        loop {
            let batch: Vec<String> = self
                .ctx
                .query("reap", redis::cmd("SPOP").arg(&set).arg(REAP_BATCH))
                .await?;
            if batch.is_empty() {
                break;
            }
            let entries: Vec<_> = batch.iter().filter_map(|e| parse_entry(e)).collect();
            spaces.extend(entries.iter().map(|(space, _, _)| space.clone()));
            let lingered = entries.iter().map(|(space, member, conn)| async move {
                self.linger_conn(space, member, conn, ended_at).await
            });
            for r in futures::future::join_all(lingered).await {
                // A connection that cannot be handed over now expires by
                // its TTL, as before.
                if let Err(e) = r {
                    tracing::debug!(error = %e, "lingering a dead server's connection failed");
                }
                n += 1;
            }
        }
        if owner != self.owner {
            let leases: Vec<String> = spaces
                .iter()
                .flat_map(|space| self.ctx.keys.all(space))
                .map(|k| k.lease)
                .collect();
            let released = leases.iter().map(|lease| async move {
                self.ctx
                    .invoke::<i64>("reap", crate::conn_scripts::RELEASE.key(lease).arg(owner))
                    .await
            });
            futures::future::try_join_all(released).await?;
        }
        let key = self.ctx.keys.instances();
        let mut c = self.ctx.client.clone();
        self.ctx
            .io("reap", async { c.zrem::<_, _, i64>(&key, owner).await })
            .await?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back() {
        let space = SpaceName::new("room:1").unwrap();
        let member = MemberKey::guest(MemberId::new("10.0.0.7").unwrap());
        let conn = ConnId::new("ab12-3").unwrap();
        let e = entry(&space, &member, &conn);
        assert_eq!(parse_entry(&e), Some((space, member, conn)));
        assert_eq!(parse_entry("room\nx:ann\nc1"), None);
        assert_eq!(parse_entry("room\nu:ann"), None);
    }
}
