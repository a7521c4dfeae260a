//! [`RedisStore`]: the [`PresenceStore`] over Redis or Redis Cluster.

mod by_id;
mod connections;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use parking_lot::Mutex;
use redis::{AsyncCommands, Value};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use herenow_core::cursor::RecentCursor;
use herenow_core::store::{check_batch, sort_most_recent_first};
use herenow_core::{
    Attach, AttachReport, Clock, ConnId, Connection, Counts, DetachReport, Error, EventReceiver,
    Heartbeat, HeartbeatReport, InvalidInput, KindFilter, ListQuery, MemberId, MemberKey,
    MemberKind, MemberStatus, Metadata, Millis, Order, Page, PresenceStore, Result, SpaceConfig,
    SpaceName, SpaceSummary, Status, Subscription, TickReport, limits,
};

use crate::buffer::Pending;
use crate::client::{RedisClient, Target};
use crate::ctx::{Ctx, RedisStats};
use crate::events::Router;
use crate::flush::Flusher;
use crate::keys::{Keys, SpaceKeys};
use crate::options::RedisOptions;
use crate::replay::{self, ReplayTuning};
use crate::reply::{array, bad_reply, config_of, int, meta_of, opt_string, timed, window_error};
use crate::writer::{self, BeatArg, TOUCH_EVERY_MS, Writer};
use crate::{conn_scripts, scripts};

/// A presence store on Redis or Redis Cluster. See the crate documentation
/// for the key layout. Cheap to share as `Arc<dyn PresenceStore>`; any
/// number of stores (in any number of processes) may use the same Redis.
///
/// When Redis is down, slow, restarting or failing over, heartbeats and
/// leaves are still accepted: they wait in a bounded buffer, coalesced per
/// member, and a background task started by [`connect`](Self::connect)
/// writes them back when Redis answers (see [`RedisOptions::buffer_cap`],
/// [`stats`](Self::stats), [`is_ready`](Self::is_ready)). Reads answer
/// [`Error::Unavailable`] within the timeout. The task stops on
/// [`shutdown`](Self::shutdown) or when the store is dropped.
pub struct RedisStore {
    /// What this store shares with its write path.
    ctx: Arc<Ctx>,
    router: Arc<Router>,
    /// Serializes (un)subscribing so a channel being dropped is never
    /// dropped after a new subscriber has asked for it.
    sub_lock: tokio::sync::Mutex<()>,
    /// The write path, shared with the flusher and the replayer.
    writer: Arc<Writer>,
    /// Per-space queues that merge concurrent heartbeats.
    flusher: Arc<Flusher>,
    /// This store's name on sweep leases.
    owner: String,
    /// Tells the replayer to stop.
    stop: watch::Sender<bool>,
    replayer: Mutex<Option<JoinHandle<()>>>,
}

impl RedisStore {
    /// Connects to `spec`: `redis://HOST:PORT[/DB]` (one server, reconnecting
    /// by itself) or `redis+cluster://H1:P1,H2:P2,…` (seed nodes of a
    /// cluster). Fails with [`Error::Unavailable`] if Redis cannot be reached
    /// within the timeout, and with [`Error::Invalid`] for a bad spec; it
    /// never falls back to anything else.
    pub async fn connect(
        spec: &str,
        clock: Arc<dyn Clock>,
        defaults: SpaceConfig,
        options: RedisOptions,
    ) -> Result<RedisStore> {
        defaults.validate()?;
        let keys = Keys::new(
            &options.prefix,
            options.shards,
            options.space_shards.clone(),
        )
        .ok_or(InvalidInput::BadConfig {
            why: "redis shards must be between 1 and 1024",
        })?;
        let target = Target::parse(spec)?;
        let router = Arc::new(Router::default());
        let push_router = router.clone();
        let client = timed(
            options.timeout,
            "connect",
            RedisClient::open(&target, options.timeout, move |info| push_router.push(info)),
        )
        .await?;
        let tuning = ReplayTuning {
            batch: options.replay_batch.clamp(1, limits::MAX_BATCH),
            backoff_min: options.backoff_min,
            backoff_max: options.backoff_max.max(options.backoff_min),
        };
        let ctx = Arc::new(Ctx::new(
            client,
            target.is_cluster(),
            clock,
            defaults,
            keys,
            options,
        ));
        // Fail now, loudly, rather than at the first heartbeat.
        ctx.ping().await?;
        let writer = Arc::new(Writer::new(ctx.clone()));
        let (stop, stopped) = watch::channel(false);
        let replayer = tokio::spawn(replay::run(writer.clone(), tuning, stopped));
        Ok(RedisStore {
            ctx,
            router,
            sub_lock: tokio::sync::Mutex::new(()),
            flusher: Flusher::new(writer.clone()),
            writer,
            owner: lease_owner(),
            stop,
            replayer: Mutex::new(Some(replayer)),
        })
    }

    /// This store's name on the sweep leases it holds (unique per store:
    /// the process id and a random part).
    pub fn lease_owner(&self) -> &str {
        &self.owner
    }

    /// The write buffer's counters, for metrics.
    pub fn stats(&self) -> RedisStats {
        self.ctx.health.stats()
    }

    /// Whether Redis answers and every buffered write has been written back:
    /// what a readiness probe wants. It turns false at the first failed call
    /// (or failed background ping, at most a second after Redis went away)
    /// and true again once the buffer is drained.
    pub fn is_ready(&self) -> bool {
        self.ctx.health.is_ready()
    }

    /// Stops the background replayer after one last attempt, bounded by the
    /// timeout, to write what is buffered. Call it when the server shuts
    /// down: writes that fail after it are still accepted into the buffer
    /// but nothing writes them back any more.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let handle = self.replayer.lock().take();
        if let Some(h) = handle {
            let _ = h.await;
        }
    }

    /// The options this store runs with.
    pub fn options(&self) -> &RedisOptions {
        &self.ctx.opts
    }

    /// The names of `space`'s keys (for operators and tests): every one of
    /// them hashes to the same cluster slot. For a space split over several
    /// shards, the keys of shard 0 (see [`shard_keys`](Self::shard_keys)).
    pub fn space_keys(&self, space: &SpaceName) -> Vec<String> {
        self.ctx.keys.space(space).names()
    }

    /// The names of the keys of every shard of `space`, shard 0 first (one
    /// list for an unsharded space): the keys of one shard share a slot,
    /// and each shard has its own (see [`crate::keys`]).
    pub fn shard_keys(&self, space: &SpaceName) -> Vec<Vec<String>> {
        self.ctx
            .keys
            .all(space)
            .into_iter()
            .map(SpaceKeys::names)
            .collect()
    }

    /// How many shard keys `space` is split over.
    pub fn shards_of(&self, space: &SpaceName) -> u16 {
        self.ctx.keys.shards(space)
    }

    /// The retention of a space, for the error of a zero window.
    async fn zero_window(&self, space: &SpaceName) -> Error {
        match self.config(space).await {
            Ok(c) => InvalidInput::WindowOutOfRange {
                window_ms: 0,
                max_ms: c.retention_ms,
            }
            .into(),
            Err(e) => e,
        }
    }

    /// Puts coalesced heartbeats into the write buffer if writes are held
    /// (or `force`: a direct write just failed). `None`: write directly.
    /// A call of which the cap kept nothing answers
    /// [`Error::Unavailable`], so the client retries rather than believe it
    /// was recorded.
    fn buffer_beats(
        &self,
        space: &SpaceName,
        merged: &[BeatArg<'_>],
        mut report: HeartbeatReport,
        force: bool,
    ) -> Option<Result<HeartbeatReport>> {
        let kept = {
            let mut held = self.ctx.health.buffer.hold(force)?;
            merged
                .iter()
                .filter(|(m, at, meta)| {
                    held.put(space, (*m).clone(), Pending::beat(*at, meta.cloned()))
                })
                .count() as u64
        };
        self.ctx.health.wake.notify_one();
        if kept == 0 {
            return Some(Err(buffer_full()));
        }
        // The buffered ones are accepted; whether they are joins is only
        // known when they reach Redis.
        report.accepted += kept;
        Some(Ok(report))
    }

    /// Puts leaves into the write buffer, like
    /// [`buffer_beats`](Self::buffer_beats).
    fn buffer_leaves(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        now: Millis,
        force: bool,
    ) -> Option<Result<u64>> {
        let kept = {
            let mut held = self.ctx.health.buffer.hold(force)?;
            members
                .iter()
                .filter(|m| held.put(space, (*m).clone(), Pending::leave(now)))
                .count()
        };
        self.ctx.health.wake.notify_one();
        if kept == 0 {
            return Some(Err(buffer_full()));
        }
        Some(Ok(0))
    }

    /// Last seen, status and metadata of `members`, and the space's policy:
    /// one status script per shard that has some of them, at once.
    async fn status_with_config(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        now: Millis,
    ) -> Result<(SpaceConfig, Vec<MemberStatus>)> {
        let groups = self
            .ctx
            .keys
            .by_shard(space, members.len(), |i| &members[i]);
        let calls = groups.iter().map(|(shard, idx)| {
            let k = self.ctx.keys.shard(space, *shard);
            let mut inv = scripts::STATUS.prepare_invoke();
            inv.key(&k.zu)
                .key(&k.zg)
                .key(&k.meta)
                .key(&k.config)
                .arg(&self.ctx.defaults_args()[..]);
            for &i in idx {
                inv.arg(members[i].kind.letter())
                    .arg(members[i].id.as_str());
            }
            let mut c = self.ctx.client.clone();
            async move {
                let v: Value = self
                    .ctx
                    .io("status", async { inv.invoke_async(&mut c).await })
                    .await?;
                array(v)
            }
        });
        let replies = futures::future::try_join_all(calls).await?;
        let mut config = None;
        let mut found: Vec<Option<(Option<Millis>, Option<Metadata>)>> = vec![None; members.len()];
        for ((_, idx), v) in groups.iter().zip(replies) {
            // Every shard holds a copy of the policy.
            let c = config_of(&v)?;
            config.get_or_insert(c);
            let mut it = v.into_iter().skip(4);
            for &i in idx {
                let score = match it.next() {
                    None | Some(Value::Nil) | Some(Value::Boolean(false)) => None,
                    Some(s) => Some(int(Some(&s))? as Millis),
                };
                found[i] = Some((score, meta_of(it.next())?));
            }
        }
        let config = match config {
            Some(c) => c,
            None => self.config(space).await?,
        };
        let out = members
            .iter()
            .zip(found)
            .map(|(m, f)| {
                let (score, meta) = f.unwrap_or((None, None));
                MemberStatus {
                    member: m.clone(),
                    status: config.status(score, now),
                    last_seen_ms: score,
                    meta,
                }
            })
            .collect();
        Ok((config, out))
    }

    /// Unsubscribes from channels nobody listens to any more.
    async fn prune_channels(&self) {
        for channel in self.router.take_idle() {
            let mut c = self.ctx.client.clone();
            // A failure only leaves a subscription whose messages are
            // ignored; the next prune does not retry it, which is harmless.
            let _ = self
                .ctx
                .io("unsubscribe", async move { c.unsubscribe(&channel).await })
                .await;
        }
    }

    /// Background work on every shard of `space` (at once), then drops the
    /// space from the registry if nothing is stored in any shard.
    async fn tick_space(&self, space: &SpaceName, report: &mut TickReport) -> Result<()> {
        let shards = self.ctx.keys.all(space);
        let done = futures::future::try_join_all(shards.iter().map(|k| self.tick_shard(k))).await?;
        let mut left = 0;
        for (r, stored) in done {
            report.expired += r.expired;
            report.transitions += r.transitions;
            report.connections_expired += r.connections_expired;
            report.max_hold_us = report.max_hold_us.max(r.max_hold_us);
            left += stored;
        }
        if left == 0 {
            let now = self.ctx.clock.now_ms();
            let (names, touched) = self.ctx.keys.registry();
            let cutoff = now.saturating_sub(2 * TOUCH_EVERY_MS);
            let mut c = self.ctx.client.clone();
            let dropped: i64 = self
                .ctx
                .io("unregister", async {
                    scripts::UNREGISTER
                        .key(names)
                        .key(touched)
                        .key(self.ctx.keys.registry_shards())
                        .arg(space.as_str())
                        .arg(cutoff)
                        .invoke_async(&mut c)
                        .await
                })
                .await?;
            report.spaces_dropped += dropped as u64;
        }
        Ok(())
    }

    /// Bounded steps of background work on one shard until nothing is left
    /// to do, or nothing at all if another store holds its sweep lease.
    /// Returns what it did and how many members and connections the shard
    /// still stores.
    async fn tick_shard(&self, k: &SpaceKeys) -> Result<(TickReport, i64)> {
        let d = self.ctx.defaults_args();
        let lease_ms = self.ctx.opts.lease.as_millis().max(1) as u64;
        let mut report = TickReport::default();
        loop {
            let now = self.ctx.clock.now_ms();
            let started = Instant::now();
            // Connections first (their own budget), then the watermarks
            // and expiry of members: one script call.
            let mut inv = conn_scripts::SWEEP.prepare_invoke();
            k.add_to(&mut inv);
            inv.arg(now)
                .arg(&d[..])
                .arg(self.ctx.publish_cmd())
                .arg(&k.channel)
                .arg(self.ctx.opts.tick_budget)
                .arg(&self.owner)
                .arg(lease_ms)
                .arg(self.ctx.opts.tick_budget);
            let mut c = self.ctx.client.clone();
            let v: Value = self
                .ctx
                .io("tick", async { inv.invoke_async(&mut c).await })
                .await?;
            report.max_hold_us = report.max_hold_us.max(started.elapsed().as_micros() as u64);
            let v = array(v)?;
            report.expired += int(v.first())? as u64;
            report.transitions += int(v.get(1))? as u64;
            report.connections_expired += int(v.get(4))? as u64;
            let more = int(v.get(2))? != 0;
            let left = int(v.get(3))?;
            if left < 0 {
                // Another store holds the sweep lease: it does this shard.
                return Ok((report, int(v.get(5))?));
            }
            if !more {
                return Ok((report, left));
            }
        }
    }
}

/// Reads the snapshot scripts' replies, one per shard: the members present
/// (all of them, counted), each shard's sequence number, and the members
/// sent (at most [`limits::MAX_SNAPSHOT`] per kind and shard).
fn read_snapshots(snaps: Vec<Vec<Value>>) -> Result<(u64, Vec<u64>, Vec<MemberStatus>)> {
    let mut present = 0u64;
    let mut seqs = Vec::with_capacity(snaps.len());
    let mut snapshot = Vec::new();
    for v in snaps {
        seqs.push(int(v.first())? as u64);
        present += int(v.get(1))? as u64 + int(v.get(2))? as u64;
        for (part, kind) in v.into_iter().skip(3).zip(MemberKind::ALL) {
            let flat = array(part)?;
            let mut it = flat.into_iter();
            while let Some(id) = it.next() {
                let id = opt_string(Some(id))?.ok_or_else(|| bad_reply("a member id"))?;
                let score = int(it.next().as_ref())? as Millis;
                let status = match int(it.next().as_ref())? {
                    1 => Status::Away,
                    _ => Status::Online,
                };
                let meta = meta_of(it.next())?;
                snapshot.push(MemberStatus {
                    member: MemberKey {
                        kind,
                        id: MemberId::new(&id).map_err(|_| bad_reply("a stored member id"))?,
                    },
                    status,
                    last_seen_ms: Some(score),
                    meta,
                });
            }
        }
    }
    Ok((present, seqs, snapshot))
}

/// A name for this store on sweep leases: the process id and a random
/// part, so two stores in one process differ too.
fn lease_owner() -> String {
    use std::hash::BuildHasher;
    // A fresh RandomState is randomly keyed.
    let r = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    format!("{}-{r:016x}", std::process::id())
}

fn buffer_full() -> Error {
    Error::Unavailable {
        reason: "redis is unavailable and the write buffer is full".into(),
        source: None,
    }
}

fn kinds_letter(kinds: KindFilter) -> &'static str {
    match kinds {
        KindFilter::Users => "u",
        KindFilter::Guests => "g",
        KindFilter::All => "a",
    }
}

/// The cursor after the last member of a most-recent-first page. Ties of
/// score are broken by kind and id, so the tiebreak is 0.
fn recent_cursor(score: Millis, kind: MemberKind, id: &str) -> Option<String> {
    let id = MemberId::new(id).ok()?;
    Some(
        RecentCursor {
            at_ms: score,
            tiebreak: 0,
            member: MemberKey { kind, id },
        }
        .encode(),
    )
}

/// One listed member before merging: (score, kind, id, meta).
type Item = (Millis, MemberKind, String, Option<Metadata>);

fn items_of(v: Option<Value>, kind: MemberKind, skip: usize) -> Result<Vec<Item>> {
    let flat = array(v.unwrap_or(Value::Nil))?;
    let mut it = flat.into_iter().skip(skip);
    let mut out = Vec::new();
    while let Some(id) = it.next() {
        let id = opt_string(Some(id))?.ok_or_else(|| bad_reply("a member id"))?;
        let score = int(it.next().as_ref())? as Millis;
        let meta = meta_of(it.next())?;
        out.push((score, kind, id, meta));
    }
    Ok(out)
}

fn to_status(item: Item, config: &SpaceConfig, now: Millis) -> Result<MemberStatus> {
    let (score, kind, id, meta) = item;
    Ok(MemberStatus {
        member: MemberKey {
            kind,
            id: MemberId::new(&id).map_err(|_| bad_reply("a stored member id"))?,
        },
        status: config.status(Some(score), now),
        last_seen_ms: Some(score),
        meta,
    })
}

impl Drop for RedisStore {
    /// Stops the replayer at once. Writes still buffered are lost (and
    /// logged); [`RedisStore::shutdown`] gives them a last chance first.
    fn drop(&mut self) {
        if let Some(h) = self.replayer.get_mut().take() {
            h.abort();
            let left = self.ctx.health.buffer.counts().buffered;
            if left > 0 {
                tracing::warn!(lost = left, "redis store dropped with buffered writes");
            }
        }
    }
}

#[async_trait]
impl PresenceStore for RedisStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn now_ms(&self) -> Millis {
        self.ctx.clock.now_ms()
    }

    async fn heartbeat(&self, space: &SpaceName, beats: &[Heartbeat]) -> Result<HeartbeatReport> {
        check_batch(beats.len())?;
        let now = self.ctx.clock.now_ms();
        let latest = now + limits::MAX_FUTURE_SKEW_MS;
        if let Some(at_ms) = beats.iter().filter_map(|b| b.at_ms).find(|&at| at > latest) {
            return Err(InvalidInput::AtInFuture { at_ms }.into());
        }
        // One write per member: the newest time wins, and the metadata of
        // the newest heartbeat that carried some. Later duplicates are
        // counted as the memory store counts them.
        let mut report = HeartbeatReport::default();
        let mut index: HashMap<&MemberKey, usize> = HashMap::with_capacity(beats.len());
        let mut merged: Vec<BeatArg<'_>> = Vec::with_capacity(beats.len());
        for b in beats {
            let at = b.at_ms.unwrap_or(now);
            match index.get(&b.member) {
                Some(&i) => {
                    let m = &mut merged[i];
                    if at >= m.1 {
                        m.1 = at;
                        if b.meta.is_some() {
                            m.2 = b.meta.as_ref();
                        }
                        report.accepted += 1;
                    } else {
                        report.stale += 1;
                    }
                }
                None => {
                    index.insert(&b.member, merged.len());
                    merged.push((&b.member, at, b.meta.as_ref()));
                }
            }
        }
        // While writes are held (Redis failed and the buffer is not yet
        // written back), this one waits its turn behind the earlier ones.
        if let Some(r) = self.buffer_beats(space, &merged, report, false) {
            return r;
        }
        // Concurrent calls share flushes (see `flush`); past the queue's
        // bound, a call writes on its own.
        let written = match self.flusher.submit(space, now, &merged).await {
            Some(r) => r,
            None => self
                .writer
                .write_beats(space, now, &merged)
                .await
                .map(|o| writer::tally(&o)),
        };
        match written {
            Ok([accepted, joined, stale]) => {
                report.accepted += accepted;
                report.joined += joined;
                report.stale += stale;
                Ok(report)
            }
            Err(Error::Unavailable { .. }) => self
                .buffer_beats(space, &merged, report, true)
                .expect("a forced hold always buffers"),
            Err(e) => Err(e),
        }
    }

    /// While writes are held, leaves are buffered too and answer 0: whether
    /// the members were present is not known until Redis answers.
    async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        check_batch(members.len())?;
        let now = self.ctx.clock.now_ms();
        if let Some(r) = self.buffer_leaves(space, members, now, false) {
            return r;
        }
        let args: Vec<(&MemberKey, Option<Millis>)> = members.iter().map(|m| (m, None)).collect();
        match self.writer.write_leaves(space, now, &args).await {
            Ok(n) => Ok(n),
            Err(Error::Unavailable { .. }) => self
                .buffer_leaves(space, members, now, true)
                .expect("a forced hold always buffers"),
            Err(e) => Err(e),
        }
    }

    /// Not buffered while Redis is unavailable: answers
    /// [`Error::Unavailable`] (see the crate documentation).
    async fn attach(&self, space: &SpaceName, attach: &Attach) -> Result<AttachReport> {
        self.attach_conn(space, attach).await
    }

    /// Not buffered while Redis is unavailable, like
    /// [`attach`](Self::attach); a connection whose detach is lost expires
    /// after its TTL.
    async fn detach(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        self.detach_conn(space, member, conn).await
    }

    async fn connections(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>> {
        self.list_connections(space, members).await
    }

    async fn status(&self, space: &SpaceName, members: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        check_batch(members.len())?;
        let now = self.ctx.clock.now_ms();
        Ok(self.status_with_config(space, members, now).await?.1)
    }

    /// One round trip: the status script also answers the space's policy,
    /// so the window is checked against it without a second call. An empty
    /// list (a user without friends) is answered without Redis.
    async fn online_among(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
    ) -> Result<Vec<MemberStatus>> {
        if members.is_empty() {
            let config = self.config(space).await?;
            config.check_window(window_ms.unwrap_or(config.window_ms))?;
            return Ok(Vec::new());
        }
        check_batch(members.len())?;
        let now = self.ctx.clock.now_ms();
        let (config, found) = self.status_with_config(space, members, now).await?;
        let window = config.check_window(window_ms.unwrap_or(config.window_ms))?;
        let cutoff = now.saturating_sub(window);
        let mut online: Vec<MemberStatus> = found
            .into_iter()
            .filter(|m| m.last_seen_ms.is_some_and(|t| t >= cutoff))
            .collect();
        sort_most_recent_first(&mut online);
        online.dedup_by(|a, b| a.member == b.member);
        online.truncate(limit);
        Ok(online)
    }

    /// Most recent first: every shard answers its own first `limit + 1`
    /// members per kind after the cursor (at once), and the merge keeps
    /// the first `limit` in the one total order (score, kind, id)
    /// descending, so pages stay exact however many shards.
    async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page> {
        query.check_limit()?;
        if query.window_ms == Some(0) {
            return Err(self.zero_window(space).await);
        }
        let now = self.ctx.clock.now_ms();
        let limit = query.limit;
        let window = query.window_ms.unwrap_or(0);
        match query.order {
            Order::Recent => {
                let cursor = match &query.cursor {
                    None => None,
                    Some(c) => Some(RecentCursor::decode(c).ok_or(InvalidInput::BadCursor)?),
                };
                let (cs, ck, cm) = match &cursor {
                    None => (String::new(), "", ""),
                    Some(c) => (
                        c.at_ms.to_string(),
                        c.member.kind.letter(),
                        c.member.id.as_str(),
                    ),
                };
                let shards = self.ctx.keys.all(space);
                let calls = shards.iter().map(|k| {
                    let mut c = self.ctx.client.clone();
                    let (cs, ck, cm) = (&cs, ck, cm);
                    async move {
                        let v: Value = self
                            .ctx
                            .io("list", async {
                                scripts::LIST_RECENT
                                    .key(&k.zu)
                                    .key(&k.zg)
                                    .key(&k.meta)
                                    .key(&k.config)
                                    .arg(&self.ctx.defaults_args()[..])
                                    .arg(now)
                                    .arg(window)
                                    .arg(limit)
                                    .arg(kinds_letter(query.kinds))
                                    .arg(cs)
                                    .arg(ck)
                                    .arg(cm)
                                    .invoke_async(&mut c)
                                    .await
                            })
                            .await?;
                        array(v)
                    }
                });
                let replies = futures::future::try_join_all(calls).await?;
                let mut config = None;
                let mut items = Vec::new();
                for v in replies {
                    if let Some(e) = window_error(&v, query.window_ms)? {
                        return Err(e);
                    }
                    config.get_or_insert(config_of(&v[1..])?);
                    let mut it = v.into_iter().skip(5);
                    items.extend(items_of(it.next(), MemberKind::User, 0)?);
                    items.extend(items_of(it.next(), MemberKind::Guest, 0)?);
                }
                let config = config.ok_or_else(|| bad_reply("no shard answered"))?;
                // (score, kind, id) descending, users above guests: the
                // order the script's per-kind cursors assume.
                items.sort_by(|a, b| {
                    b.0.cmp(&a.0)
                        .then_with(|| a.1.cmp(&b.1))
                        .then_with(|| b.2.as_bytes().cmp(a.2.as_bytes()))
                });
                let more = items.len() > limit;
                items.truncate(limit);
                let next_cursor = if more {
                    items
                        .last()
                        .and_then(|(s, kind, id, _)| recent_cursor(*s, *kind, id))
                } else {
                    None
                };
                let members = items
                    .into_iter()
                    .map(|i| to_status(i, &config, now))
                    .collect::<Result<_>>()?;
                Ok(Page {
                    members,
                    next_cursor,
                })
            }
            Order::Id => self.list_by_id(space, query, now).await,
        }
    }

    async fn count(&self, space: &SpaceName, window_ms: Option<Millis>) -> Result<Counts> {
        if window_ms == Some(0) {
            return Err(self.zero_window(space).await);
        }
        let now = self.ctx.clock.now_ms();
        let shards = self.ctx.keys.all(space);
        let calls = shards.iter().map(|k| {
            let mut c = self.ctx.client.clone();
            async move {
                let v: Value = self
                    .ctx
                    .io("count", async {
                        scripts::COUNT
                            .key(&k.zu)
                            .key(&k.zg)
                            .key(&k.config)
                            .arg(&self.ctx.defaults_args()[..])
                            .arg(now)
                            .arg(window_ms.unwrap_or(0))
                            .invoke_async(&mut c)
                            .await
                    })
                    .await?;
                array(v)
            }
        });
        let mut counts = Counts::default();
        for v in futures::future::try_join_all(calls).await? {
            if let Some(e) = window_error(&v, window_ms)? {
                return Err(e);
            }
            counts.users += int(v.first())? as u64;
            counts.guests += int(v.get(1))? as u64;
        }
        Ok(counts)
    }

    async fn config(&self, space: &SpaceName) -> Result<SpaceConfig> {
        let k = self.ctx.keys.space(space);
        let mut c = self.ctx.client.clone();
        let v: Vec<Option<Millis>> = self
            .ctx
            .io("config", async {
                c.hmget(&k.config, &["online", "away", "window", "retention"])
                    .await
            })
            .await?;
        match v.as_slice() {
            [
                Some(online_ms),
                Some(away_ms),
                Some(window_ms),
                Some(retention_ms),
            ] => Ok(SpaceConfig {
                online_ms: *online_ms,
                away_ms: *away_ms,
                window_ms: *window_ms,
                retention_ms: *retention_ms,
            }),
            _ => Ok(self.ctx.defaults),
        }
    }

    /// Writes the policy to every shard (each script reads its own shard's
    /// copy). Not atomic across shards: a call that fails part-way leaves
    /// shards disagreeing until it is repeated.
    async fn set_config(&self, space: &SpaceName, config: SpaceConfig) -> Result<()> {
        config.validate()?;
        let now = self.ctx.clock.now_ms();
        let shards = self.ctx.keys.all(space);
        let calls = shards.iter().map(|k| {
            let mut c = self.ctx.client.clone();
            self.ctx.io("set_config", async move {
                scripts::SET_CONFIG
                    .key(&k.state)
                    .key(&k.config)
                    .arg(now)
                    .arg(config.online_ms)
                    .arg(config.away_ms)
                    .arg(config.window_ms)
                    .arg(config.retention_ms)
                    .invoke_async::<Value>(&mut c)
                    .await
            })
        });
        futures::future::try_join_all(calls).await?;
        Ok(())
    }

    async fn spaces(&self, after: Option<&SpaceName>, limit: usize) -> Result<Vec<SpaceSummary>> {
        let (names, _) = self.ctx.keys.registry();
        let start = after.map_or("-".to_owned(), |a| format!("({}", a.as_str()));
        // One call lists at most a batch; callers page with `after`.
        let limit = limit.min(limits::MAX_BATCH);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut c = self.ctx.client.clone();
        let found: Vec<String> = self
            .ctx
            .io("spaces", async {
                redis::cmd("ZRANGEBYLEX")
                    .arg(&names)
                    .arg(&start)
                    .arg("+")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let spaces: Vec<SpaceName> = found
            .iter()
            .filter_map(|n| SpaceName::new(n).ok())
            .collect();
        let counts = futures::future::try_join_all(spaces.iter().map(|s| {
            let shards = self.ctx.keys.all(s);
            let mut c = self.ctx.client.clone();
            self.ctx.io("spaces", async move {
                let mut n = Counts::default();
                for k in &shards {
                    let users: u64 = c.zcard(&k.zu).await?;
                    let guests: u64 = c.zcard(&k.zg).await?;
                    n.users += users;
                    n.guests += guests;
                }
                Ok(n)
            })
        }))
        .await?;
        Ok(spaces
            .into_iter()
            .zip(counts)
            .map(|(space, members)| SpaceSummary { space, members })
            .collect())
    }

    async fn set_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        let set: BTreeSet<&str> = friends
            .iter()
            .filter(|f| *f != user)
            .map(MemberId::as_str)
            .collect();
        if set.len() > limits::MAX_FRIENDS {
            return Err(InvalidInput::TooManyFriends { len: set.len() }.into());
        }
        let key = self.ctx.keys.friends(user);
        let mut c = self.ctx.client.clone();
        let n: i64 = self
            .ctx
            .io("set_friends", async {
                let mut inv = scripts::SET_FRIENDS.prepare_invoke();
                inv.key(&key);
                for f in &set {
                    inv.arg(*f);
                }
                inv.invoke_async(&mut c).await
            })
            .await?;
        Ok(n as u64)
    }

    async fn add_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        check_batch(friends.len())?;
        let set: BTreeSet<&str> = friends
            .iter()
            .filter(|f| *f != user)
            .map(MemberId::as_str)
            .collect();
        let key = self.ctx.keys.friends(user);
        let mut c = self.ctx.client.clone();
        let n: i64 = self
            .ctx
            .io("add_friends", async {
                let mut inv = scripts::ADD_FRIENDS.prepare_invoke();
                inv.key(&key).arg(limits::MAX_FRIENDS);
                for f in &set {
                    inv.arg(*f);
                }
                inv.invoke_async(&mut c).await
            })
            .await?;
        if n < 0 {
            return Err(InvalidInput::TooManyFriends { len: (-n) as usize }.into());
        }
        Ok(n as u64)
    }

    async fn remove_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        check_batch(friends.len())?;
        let key = self.ctx.keys.friends(user);
        let mut c = self.ctx.client.clone();
        let n: i64 = self
            .ctx
            .io("remove_friends", async {
                let mut inv = scripts::REMOVE_FRIENDS.prepare_invoke();
                inv.key(&key);
                for f in friends {
                    inv.arg(f.as_str());
                }
                inv.invoke_async(&mut c).await
            })
            .await?;
        Ok(n as u64)
    }

    async fn friends(&self, user: &MemberId) -> Result<Vec<MemberId>> {
        let key = self.ctx.keys.friends(user);
        let mut c = self.ctx.client.clone();
        let ids: Vec<String> = self
            .ctx
            .io("friends", async { c.smembers(&key).await })
            .await?;
        let mut out: Vec<MemberId> = ids.iter().filter_map(|i| MemberId::new(i).ok()).collect();
        out.sort_unstable();
        Ok(out)
    }

    /// Subscribes to the channel of every shard (one subscriber, one
    /// sender), then reads every shard's snapshot with the sequence number
    /// it reflects: each shard's events are delivered after its own
    /// snapshot, in order.
    async fn subscribe(&self, space: &SpaceName) -> Result<Subscription> {
        let shards = self.ctx.keys.all(space);
        let (tx, rx) = broadcast::channel(limits::EVENT_QUEUE);
        let id = {
            let _guard = self.sub_lock.lock().await;
            self.prune_channels().await;
            let id = self.router.new_id();
            for k in &shards {
                let new = self
                    .router
                    .add_pending_as(id, &k.channel, space, tx.clone());
                if new {
                    let mut c = self.ctx.client.clone();
                    let channel = k.channel.clone();
                    if let Err(e) = self
                        .ctx
                        .io("subscribe", async move { c.subscribe(&channel).await })
                        .await
                    {
                        self.router.remove_channel(&k.channel);
                        // Channels subscribed above and left without
                        // listeners are dropped by the next prune.
                        self.router.remove_everywhere(id);
                        return Err(e);
                    }
                }
            }
            id
        };
        drop(tx);
        // Subscribed first, snapshot second: every event the snapshot does
        // not reflect arrives on the channel, and the sequence number says
        // which ones it does.
        let now = self.ctx.clock.now_ms();
        let snaps = futures::future::try_join_all(shards.iter().map(|k| {
            let mut c = self.ctx.client.clone();
            async move {
                let v: Value = self
                    .ctx
                    .io("subscribe", async {
                        scripts::SNAPSHOT
                            .key(&k.zu)
                            .key(&k.zg)
                            .key(&k.meta)
                            .key(&k.state)
                            .key(&k.config)
                            .arg(now)
                            .arg(&self.ctx.defaults_args()[..])
                            .arg(limits::MAX_SNAPSHOT)
                            .invoke_async(&mut c)
                            .await
                    })
                    .await?;
                array(v)
            }
        }))
        .await;
        let snaps = match snaps {
            Ok(v) => v,
            Err(e) => {
                self.router.remove_everywhere(id);
                return Err(e);
            }
        };
        let (present, seqs, mut snapshot) = match read_snapshots(snaps) {
            Ok(r) => r,
            Err(e) => {
                self.router.remove_everywhere(id);
                return Err(e);
            }
        };
        sort_most_recent_first(&mut snapshot);
        snapshot.truncate(limits::MAX_SNAPSHOT);
        for (k, seq) in shards.iter().zip(seqs) {
            if !self.router.activate(&k.channel, id, seq) {
                return Err(Error::Unavailable {
                    reason: "the event stream broke while subscribing".into(),
                    source: None,
                });
            }
        }
        Ok(Subscription {
            snapshot_omitted: present.saturating_sub(snapshot.len() as u64),
            snapshot,
            events: EventReceiver::new(rx),
        })
    }

    /// Sweeps every registered space whose sweep lease this store holds or
    /// can take; spaces another store holds are skipped (that store sweeps
    /// them).
    async fn tick(&self) -> Result<TickReport> {
        {
            let _guard = self.sub_lock.lock().await;
            self.prune_channels().await;
        }
        let mut report = TickReport::default();
        let (names, _) = self.ctx.keys.registry();
        let mut start = "-".to_owned();
        loop {
            let mut c = self.ctx.client.clone();
            let batch: Vec<String> = self
                .ctx
                .io("tick", async {
                    redis::cmd("ZRANGEBYLEX")
                        .arg(&names)
                        .arg(&start)
                        .arg("+")
                        .arg("LIMIT")
                        .arg(0)
                        .arg(256)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            for name in &batch {
                if let Ok(space) = SpaceName::new(name) {
                    self.tick_space(&space, &mut report).await?;
                }
            }
            match batch.last() {
                Some(last) if batch.len() == 256 => start = format!("({last}"),
                _ => return Ok(report),
            }
        }
    }
}
