//! Waiting for replicas before a write is acknowledged
//! ([`RedisOptions::wait_replicas`](crate::RedisOptions::wait_replicas)).
//!
//! Redis replicates asynchronously: a master answers a write before any
//! replica has it, so a heartbeat acknowledged in a master's last moments
//! can be missing on the replica promoted in its place. With
//! `wait_replicas` N > 0, after the scripts of a write (from the writer
//! or the store) it sends `WAIT N timeout` to the master of each slot it wrote,
//! on the connection that carried the writes (the multiplexed client has
//! one per node), and acknowledges once it answers.
//!
//! `WAIT` blocks its connection: Redis answers nothing else on it until
//! the replicas acknowledge or the wait ends, and the store's reads share
//! that connection. Three things keep this affordable:
//!
//! - **Group commit per slot.** At most one `WAIT` per slot is in flight,
//!   and it covers every write of that slot whose reply had arrived when it
//!   was sent (`WAIT` waits for everything the connection wrote before
//!   it). Calls that finish meanwhile queue, and the next `WAIT` covers
//!   them all.
//! - **No waiting on a master without replicas.** Before a slot's first
//!   `WAIT`, and again once a [`RECHECK`] has passed, the writer asks its
//!   master `ROLE` (which never blocks). With fewer than N replicas
//!   connected (a replica promoted by a failover has none until another
//!   joins) the slot is not waited on until the next check: its writes are
//!   acknowledged at once, counted in
//!   [`RedisStats::unreplicated`](crate::RedisStats::unreplicated) and
//!   logged at most every ten seconds. A failover thus costs one `ROLE`
//!   per slot per second, never a blocked connection.
//! - **A bounded wait.** `WAIT` returns after `wait_timeout` with the
//!   replicas that did acknowledge. Fewer than N is not an error (the write
//!   is on the master, and failing it would turn a slow replica into an
//!   outage): the write is acknowledged and counted, and the slot is not
//!   waited on until the next check, so a replica that stopped answering
//!   blocks each slot's connection for at most one wait per [`RECHECK`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::Value;
use redis::cluster_routing::Slot;

use herenow_core::{Error, Result};

use crate::client::RedisClient;
use crate::observe::Observer;
use crate::reply::{bad_reply, int, timed};

/// How long what `ROLE` said of a slot's master holds: a slot whose master
/// had too few replicas (or whose replicas missed a wait) is not waited on
/// for this long, and one that had enough is asked again after it.
pub const RECHECK: Duration = Duration::from_secs(1);

/// How often, at most, writes acknowledged without their replicas are
/// logged (with a count).
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The group commit of one slot.
#[derive(Default)]
struct SlotWait {
    /// Writes whose reply has arrived, numbered in that order.
    done: AtomicU64,
    /// Held by the caller whose `WAIT` is in flight; the others queue.
    turn: tokio::sync::Mutex<Covered>,
}

/// What the `WAIT`s of a slot have covered so far.
#[derive(Default)]
struct Covered {
    /// Every write numbered up to this is on the replicas asked for (or
    /// was acknowledged without them, and counted).
    upto: u64,
    /// When `ROLE` last found enough replicas for the slot's master.
    checked: Option<Instant>,
    /// Until when the slot is not waited on: its master had too few
    /// replicas, or they missed a wait.
    skip_until: Option<Instant>,
}

/// See the module documentation. One per store.
pub(crate) struct Replication {
    /// Replicas each write must reach; 0: none (no `WAIT` at all).
    want: u16,
    /// `WAIT`'s own timeout.
    wait: Duration,
    slots: Mutex<HashMap<Slot, Arc<SlotWait>>>,
    /// Writes acknowledged without the replicas asked for.
    unreplicated: AtomicU64,
    last_log: Mutex<Option<Instant>>,
    /// Told of each `WAIT` and `ROLE`.
    observer: Observer,
}

impl Replication {
    /// Waits for `want` replicas, at most `wait` each time.
    pub fn new(want: u16, wait: Duration, observer: Observer) -> Self {
        Replication {
            observer,
            want,
            wait,
            slots: Mutex::new(HashMap::new()),
            unreplicated: AtomicU64::new(0),
            last_log: Mutex::new(None),
        }
    }

    /// Whether writes wait for replicas at all.
    pub fn is_on(&self) -> bool {
        self.want > 0
    }

    /// Writes acknowledged without the replicas asked for, since the
    /// start.
    pub fn unreplicated(&self) -> u64 {
        self.unreplicated.load(Ordering::Relaxed)
    }

    /// Returns once the writes this caller made to the slots of `keys`
    /// (whose replies have all arrived) are on the replicas asked for, or
    /// were counted as not. `timeout` bounds each command, as every call
    /// to Redis is bounded. An error only when Redis could not be asked.
    pub async fn wait_for<'k>(
        &self,
        client: &RedisClient,
        timeout: Duration,
        keys: impl IntoIterator<Item = &'k str>,
    ) -> Result<()> {
        if !self.is_on() {
            return Ok(());
        }
        let cluster = matches!(client, RedisClient::Cluster(_));
        let mut by_slot: HashMap<Slot, &str> = HashMap::new();
        for key in keys {
            // One server: one connection, one WAIT, whatever the keys.
            let slot = Slot::for_key(if cluster { key } else { "" });
            by_slot.entry(slot).or_insert(key);
        }
        // Claim a number in each slot first: every write of this call has
        // had its reply, so any WAIT sent from now on covers it.
        let tickets: Vec<(Arc<SlotWait>, u64, &str)> = {
            let mut slots = self.slots.lock();
            by_slot
                .into_iter()
                .map(|(slot, key)| {
                    let s = slots.entry(slot).or_default().clone();
                    let n = s.done.fetch_add(1, Ordering::SeqCst) + 1;
                    (s, n, key)
                })
                .collect()
        };
        let waits = tickets
            .into_iter()
            .map(|(s, n, key)| self.cover(client.clone(), timeout, s, n, key));
        futures::future::try_join_all(waits).await?;
        Ok(())
    }

    /// Waits until write number `n` of slot `s` is covered: by a `WAIT`
    /// another caller sent after it, or by one this caller sends.
    async fn cover(
        &self,
        mut client: RedisClient,
        timeout: Duration,
        s: Arc<SlotWait>,
        n: u64,
        key: &str,
    ) -> Result<()> {
        let mut covered = s.turn.lock().await;
        if covered.upto >= n {
            return Ok(());
        }
        // Everything numbered so far has had its reply: this WAIT covers it.
        let upto = s.done.load(Ordering::SeqCst);
        let newly = upto - covered.upto;
        let now = Instant::now();
        if covered.skip_until.is_some_and(|until| now < until) {
            self.count_short(newly, 0);
            covered.upto = upto;
            return Ok(());
        }
        if covered
            .checked
            .is_none_or(|at| now.duration_since(at) >= RECHECK)
        {
            let replicas = self.replicas(&mut client, timeout, key).await?;
            if replicas < self.want {
                covered.skip_until = Some(now + RECHECK);
                covered.checked = None;
                self.count_short(newly, i64::from(replicas));
                covered.upto = upto;
                return Ok(());
            }
            covered.checked = Some(now);
        }
        let wait = redis::cmd("WAIT")
            .arg(self.want)
            .arg(self.wait.as_millis() as u64)
            .clone();
        let acked = timed(
            &self.observer,
            timeout,
            "wait",
            client.query_for_key(key, wait),
        )
        .await?;
        // Anything but a count (seen once in a Cluster failover): whether
        // the replicas have the writes is unknown, so they are not
        // acknowledged; the caller may retry.
        let acked = int(Some(&acked)).map_err(|_| Error::Unavailable {
            reason: format!("WAIT answered {acked:?} during a topology change"),
            source: None,
        })?;
        if acked < i64::from(self.want) {
            covered.skip_until = Some(Instant::now() + RECHECK);
            covered.checked = None;
            self.count_short(newly, acked);
        }
        covered.upto = upto;
        Ok(())
    }

    /// How many replicas the master of `key`'s slot has connected
    /// (`ROLE`). A node that is no longer a master is an error: the
    /// topology moved under the write, which is then retried.
    async fn replicas(
        &self,
        client: &mut RedisClient,
        timeout: Duration,
        key: &str,
    ) -> Result<u16> {
        let role = timed(
            &self.observer,
            timeout,
            "role",
            client.query_for_key(key, redis::cmd("ROLE")),
        )
        .await?;
        let Value::Array(parts) = role else {
            return Err(bad_reply("ROLE: an array"));
        };
        let is_master = match parts.first() {
            Some(Value::BulkString(b)) => b == b"master",
            Some(Value::SimpleString(s)) => s == "master",
            _ => false,
        };
        if !is_master {
            return Err(Error::Unavailable {
                reason: "a write's node is no longer a master (failover in progress)".into(),
                source: None,
            });
        }
        match parts.get(2) {
            Some(Value::Array(r)) => Ok(u16::try_from(r.len()).unwrap_or(u16::MAX)),
            _ => Err(bad_reply("ROLE: a master's replicas")),
        }
    }

    /// Counts `calls` write calls (one per slot a call wrote) acknowledged with `acked` replicas where
    /// more were asked for, and logs it now and then.
    fn count_short(&self, calls: u64, acked: i64) {
        let total = self.unreplicated.fetch_add(calls, Ordering::Relaxed) + calls;
        let mut last = self.last_log.lock();
        if last.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!(
                wanted = self.want,
                acked,
                unreplicated_total = total,
                "redis: writes acknowledged without the replicas asked for \
                 (a master without enough replicas, or a replica slower than the wait)"
            );
        }
    }
}
