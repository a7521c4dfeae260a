//! The write path shared by the store and its background replayer:
//! heartbeat and leave scripts, the space registry, the timeout on every
//! call, and the loop that writes the [`WriteBuffer`] back when Redis
//! answers again.
//!
//! The replayer is one task per store. While writes are held it pings Redis
//! with a jittered, doubling backoff; once Redis answers it takes bounded
//! batches of one space from the buffer and writes several of them at once
//! (the multiplexed client pipelines them), with the same scripts a
//! direct call uses. Heartbeats carry their buffered times, so a newer
//! heartbeat that reached Redis first still wins; leaves carry their time
//! too, so a replayed leave never removes a newer heartbeat. While writes
//! are not held it pings once a [`PROBE_EVERY`], so readiness notices an
//! outage even when no request does.

use std::collections::HashMap;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{RedisResult, Value};
use tokio::sync::{Notify, watch};

use herenow_core::{
    Clock, Error, MemberKey, MemberKind, Metadata, Millis, Result, SpaceConfig, SpaceName,
};

use crate::RedisOptions;
use crate::buffer::{Pending, WriteBuffer};
use crate::client::RedisClient;
use crate::keys::{Keys, SpaceKeys};
use crate::reply::{array, timed};
use crate::scripts;

/// How often one store re-marks a space it writes to in the space registry.
/// The sweep drops a space from the registry only when it is empty and was
/// not marked for twice this long, so a writer's cached mark is never stale
/// when the sweep looks.
pub(crate) const TOUCH_EVERY_MS: Millis = 60_000;

/// How often a healthy store pings Redis, so that readiness turns false
/// during an outage nobody has written or read through yet.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Batches the replayer writes at once.
const REPLAY_CONCURRENCY: usize = 8;

/// Most members one heartbeat script call writes: about a millisecond of
/// Redis's time, so a big batch never blocks it for long. Bigger batches
/// are split and the calls pipelined.
pub(crate) const SCRIPT_BATCH: usize = 1_000;

/// What the heartbeat script did with one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Written; the member was present already.
    Accepted,
    /// Written, and the member joined.
    Joined,
    /// Ignored: the member had a newer time, or the time was past the
    /// retention.
    Stale,
}

/// `[accepted, joined, stale]` of a list of outcomes.
pub(crate) fn tally(outcomes: &[Outcome]) -> [u64; 3] {
    let mut t = [0u64; 3];
    for o in outcomes {
        match o {
            Outcome::Accepted => t[0] += 1,
            Outcome::Joined => {
                t[0] += 1;
                t[1] += 1;
            }
            Outcome::Stale => t[2] += 1,
        }
    }
    t
}

/// Reads the heartbeat script's reply: one outcome byte per entry.
fn outcomes_of(v: Value, entries: usize) -> Result<Vec<Outcome>> {
    let v = array(v)?;
    let bytes = match v.into_iter().nth(3) {
        Some(Value::BulkString(b)) => b,
        Some(Value::SimpleString(s)) => s.into_bytes(),
        // An empty Lua string may come back as an empty bulk string; no
        // entries means nothing to read.
        _ if entries == 0 => Vec::new(),
        _ => return Err(Error::Internal("heartbeat script: no outcomes".into())),
    };
    if bytes.len() != entries {
        return Err(Error::Internal(format!(
            "heartbeat script: {} outcomes for {entries} heartbeats",
            bytes.len()
        )));
    }
    bytes
        .into_iter()
        .map(|b| match b {
            b'0' => Ok(Outcome::Accepted),
            b'1' => Ok(Outcome::Joined),
            b'2' => Ok(Outcome::Stale),
            _ => Err(Error::Internal("heartbeat script: a bad outcome".into())),
        })
        .collect()
}

/// State shared by a store and its replayer.
pub(crate) struct Shared {
    /// Writes waiting for Redis.
    pub buffer: WriteBuffer,
    /// Whether Redis answered the replayer's last ping (or nothing failed
    /// yet).
    pub up: AtomicBool,
    /// Wakes the replayer: a write was buffered or a call failed.
    pub wake: Notify,
    /// Members written back from the buffer since the start.
    pub replayed: AtomicU64,
}

impl Shared {
    /// A call could not reach Redis: hold writes until the replayer has
    /// seen Redis answer and drained the buffer.
    fn failed(&self) {
        self.buffer.start_holding();
        self.wake.notify_one();
    }
}

/// A heartbeat as the script takes it: member, time, metadata (`None`
/// keeps what the member had).
pub(crate) type BeatArg<'a> = (&'a MemberKey, Millis, Option<&'a Metadata>);

/// How the replayer backs off and how much it writes at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplayTuning {
    pub batch: usize,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

/// Everything a write needs. Cheap to clone: the replayer has its own.
#[derive(Clone)]
pub(crate) struct Writer {
    pub client: RedisClient,
    pub cluster: bool,
    pub clock: Arc<dyn Clock>,
    pub defaults: SpaceConfig,
    pub timeout: Duration,
    /// When this store last marked each space in the registry.
    touched: Arc<Mutex<HashMap<SpaceName, Millis>>>,
    /// Every key name, and each space's shards.
    pub keys: Arc<Keys>,
    pub shared: Arc<Shared>,
}

impl Writer {
    /// The write path for a store connected with `opts`.
    pub fn new(
        client: RedisClient,
        cluster: bool,
        clock: Arc<dyn Clock>,
        defaults: SpaceConfig,
        keys: Arc<Keys>,
        opts: &RedisOptions,
    ) -> Self {
        Writer {
            keys,
            client,
            cluster,
            clock,
            defaults,
            timeout: opts.timeout,
            touched: Arc::new(Mutex::new(HashMap::new())),
            shared: Arc::new(Shared {
                buffer: WriteBuffer::new(opts.buffer_cap),
                up: AtomicBool::new(true),
                wake: Notify::new(),
                replayed: AtomicU64::new(0),
            }),
        }
    }

    pub fn publish_cmd(&self) -> &'static str {
        if self.cluster { "SPUBLISH" } else { "PUBLISH" }
    }

    pub fn defaults_args(&self) -> [Millis; 4] {
        let d = self.defaults;
        [d.online_ms, d.away_ms, d.window_ms, d.retention_ms]
    }

    /// Runs one Redis call with the timeout, mapping failures. A failure to
    /// reach Redis also holds writes in the buffer until Redis answers.
    pub async fn io<T>(
        &self,
        what: &'static str,
        f: impl Future<Output = RedisResult<T>>,
    ) -> Result<T> {
        let r = timed(self.timeout, what, f).await;
        if let Err(Error::Unavailable { .. }) = &r {
            self.shared.failed();
        }
        r
    }

    pub async fn ping(&self) -> Result<()> {
        let mut c = self.client.clone();
        self.io("ping", async move {
            let _: Value = redis::cmd("PING").query_async(&mut c).await?;
            Ok(())
        })
        .await
    }

    /// Marks `space` in the registry unless this store did so recently.
    pub async fn register(&self, space: &SpaceName, now: Millis) -> Result<()> {
        let fresh = self
            .touched
            .lock()
            .get(space)
            .is_some_and(|&at| at <= now && now - at < TOUCH_EVERY_MS);
        if fresh {
            return Ok(());
        }
        let (names, touched) = self.keys.registry();
        let shards = self.keys.shards(space);
        let mut c = self.client.clone();
        let r: i64 = self
            .io("register", async move {
                scripts::REGISTER
                    .key(names)
                    .key(touched)
                    .key(self.keys.registry_shards())
                    .arg(space.as_str())
                    .arg(now)
                    .arg(shards)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        if r < 0 {
            tracing::error!(
                space = space.as_str(),
                recorded = -r,
                configured = shards,
                "space has another shard count than this store is configured with; not writing"
            );
            return Err(Error::Internal(format!(
                "space {} is split over {} shards in redis but this server is configured \
                 with {shards} (RedisOptions::shards / space_shards must agree on every server)",
                space.as_str(),
                -r
            )));
        }
        let mut t = self.touched.lock();
        if t.len() > 100_000 {
            t.retain(|_, at| now.saturating_sub(*at) < TOUCH_EVERY_MS);
        }
        t.insert(space.clone(), now);
        Ok(())
    }

    /// Registers the space and runs the heartbeat script: one entry per
    /// member (the caller coalesces), split by shard, at most
    /// [`SCRIPT_BATCH`] members per script call, the calls sent at once (the
    /// multiplexed client pipelines them; on a cluster each goes to its
    /// shard's node). Returns the script's outcome for each entry, in order
    /// (see [`Outcome`]). Entries at `now` without metadata cost one
    /// argument each (the script's argument list is described at
    /// [`scripts::HEARTBEAT`]).
    pub async fn write_beats(
        &self,
        space: &SpaceName,
        now: Millis,
        beats: &[BeatArg<'_>],
    ) -> Result<Vec<Outcome>> {
        self.register(space, now).await?;
        let groups = self.keys.by_shard(space, beats.len(), |i| beats[i].0);
        let calls = groups.iter().flat_map(|(shard, idx)| {
            let k = self.keys.shard(space, *shard);
            idx.chunks(SCRIPT_BATCH)
                .map(move |chunk| self.heartbeat_call(k.clone(), now, beats, chunk))
        });
        let parts = futures::future::try_join_all(calls).await?;
        let mut out = vec![Outcome::Accepted; beats.len()];
        for (idx, got) in parts {
            for (o, i) in got.into_iter().zip(idx) {
                out[i] = o;
            }
        }
        Ok(out)
    }

    /// One heartbeat script call on one shard for `beats[i]`, `i` in
    /// `chunk`. Returns the chunk and its outcomes, in the chunk's order.
    async fn heartbeat_call(
        &self,
        k: SpaceKeys,
        now: Millis,
        beats: &[BeatArg<'_>],
        chunk: &[usize],
    ) -> Result<(Vec<usize>, Vec<Outcome>)> {
        // Users first, then guests: the order of the script's ids and of
        // its outcomes.
        let order: Vec<usize> = chunk
            .iter()
            .copied()
            .filter(|&i| beats[i].0.kind == MemberKind::User)
            .chain(
                chunk
                    .iter()
                    .copied()
                    .filter(|&i| beats[i].0.kind == MemberKind::Guest),
            )
            .collect();
        let users = chunk
            .iter()
            .filter(|&&i| beats[i].0.kind == MemberKind::User)
            .count();
        let mut inv = scripts::HEARTBEAT.prepare_invoke();
        inv.key(&k.zu)
            .key(&k.zg)
            .key(&k.meta)
            .key(&k.state)
            .key(&k.config)
            .arg(now)
            .arg(&self.defaults_args()[..])
            .arg(self.publish_cmd())
            .arg(&k.channel)
            .arg(users)
            .arg(chunk.len() - users);
        for &i in &order {
            inv.arg(beats[i].0.id.as_str());
        }
        for (pos, &i) in order.iter().enumerate() {
            let (_, at, meta) = beats[i];
            if at != now || meta.is_some() {
                inv.arg(pos + 1)
                    .arg(at)
                    .arg(meta.map_or("", |m| m.as_json()));
            }
        }
        let mut c = self.client.clone();
        let v: Value = self
            .io("heartbeat", async { inv.invoke_async(&mut c).await })
            .await?;
        let got = outcomes_of(v, order.len())?;
        Ok((order, got))
    }

    /// Runs the leave script. `upto`: remove the member only if its last
    /// heartbeat is at or before this time (`None`: whatever its time).
    /// Returns how many were present.
    pub async fn write_leaves(
        &self,
        space: &SpaceName,
        now: Millis,
        members: &[(&MemberKey, Option<Millis>)],
    ) -> Result<u64> {
        let groups = self.keys.by_shard(space, members.len(), |i| members[i].0);
        let calls = groups.iter().map(|(shard, idx)| {
            let k = self.keys.shard(space, *shard);
            let mut inv = scripts::LEAVE.prepare_invoke();
            inv.key(&k.zu)
                .key(&k.zg)
                .key(&k.meta)
                .key(&k.state)
                .key(&k.config)
                .arg(now)
                .arg(&self.defaults_args()[..])
                .arg(self.publish_cmd())
                .arg(&k.channel);
            for &i in idx {
                let (m, upto) = members[i];
                inv.arg(m.kind.letter())
                    .arg(m.id.as_str())
                    .arg(upto.map_or(String::new(), |t| t.to_string()));
            }
            let mut c = self.client.clone();
            async move {
                let n: i64 = self
                    .io("leave", async { inv.invoke_async(&mut c).await })
                    .await?;
                Ok::<_, Error>(n as u64)
            }
        });
        Ok(futures::future::try_join_all(calls)
            .await?
            .into_iter()
            .sum())
    }

    /// Writes one batch taken from the buffer: its leaves first, then the
    /// heartbeats that came after them.
    async fn replay(&self, space: &SpaceName, items: &[(MemberKey, Pending)]) -> Result<()> {
        let now = self.clock.now_ms();
        let leaves: Vec<(&MemberKey, Option<Millis>)> = items
            .iter()
            .filter_map(|(m, p)| p.leave.map(|at| (m, Some(at))))
            .collect();
        if !leaves.is_empty() {
            self.write_leaves(space, now, &leaves).await?;
        }
        let beats: Vec<BeatArg<'_>> = items
            .iter()
            .filter_map(|(m, p)| p.beat.as_ref().map(|b| (m, b.at, b.meta.as_ref())))
            .collect();
        if !beats.is_empty() {
            self.write_beats(space, now, &beats).await?;
        }
        Ok(())
    }

    /// Writes everything buffered, [`REPLAY_CONCURRENCY`] batches at a time.
    /// A batch Redis could not take goes back into the buffer and ends the
    /// drain with the error; a batch Redis refused as a bug is dropped
    /// (retrying it would fail forever) and counted.
    async fn drain(&self, batch: usize) -> Result<()> {
        let buffer = &self.shared.buffer;
        loop {
            let mut taken = Vec::new();
            while taken.len() < REPLAY_CONCURRENCY {
                match buffer.take(batch) {
                    Some(t) => taken.push(t),
                    None => break,
                }
            }
            if taken.is_empty() {
                return Ok(());
            }
            let results =
                futures::future::join_all(taken.iter().map(|(s, items)| self.replay(s, items)))
                    .await;
            let mut failed = None;
            for ((space, items), r) in taken.into_iter().zip(results) {
                match r {
                    Ok(()) => {
                        self.shared
                            .replayed
                            .fetch_add(items.len() as u64, Ordering::Relaxed);
                    }
                    Err(e @ Error::Unavailable { .. }) => {
                        buffer.restore(&space, items);
                        failed = Some(e);
                    }
                    Err(e) => {
                        tracing::error!(
                            space = space.as_str(),
                            members = items.len(),
                            error = %e,
                            "redis refused buffered writes; they are dropped"
                        );
                        buffer.add_dropped(items.len() as u64);
                    }
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
    }
}

/// The replayer: see the module documentation. Runs until `stop` changes
/// (or its sender is dropped), then makes one last attempt, bounded by the
/// timeout, to write what is buffered.
pub(crate) async fn run(w: Writer, tuning: ReplayTuning, mut stop: watch::Receiver<bool>) {
    let shared = w.shared.clone();
    let mut backoff = tuning.backoff_min;
    loop {
        if !shared.buffer.holding() {
            tokio::select! {
                _ = stop.changed() => break,
                _ = shared.wake.notified() => {}
                _ = tokio::time::sleep(PROBE_EVERY) => {}
            }
            if !shared.buffer.holding() {
                // A failed probe holds writes by itself (see `io`).
                let _ = w.ping().await;
                continue;
            }
        }
        let r = match w.ping().await {
            Ok(()) => w.drain(tuning.batch).await,
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {
                backoff = tuning.backoff_min;
                if !shared.up.swap(true, Ordering::SeqCst) {
                    tracing::info!("redis answers again; writing buffered heartbeats back");
                }
                if shared.buffer.settle() {
                    tracing::info!(
                        replayed = shared.replayed.load(Ordering::Relaxed),
                        "write buffer drained; writing to redis directly"
                    );
                }
            }
            Err(e) => {
                if shared.up.swap(false, Ordering::SeqCst) {
                    tracing::warn!(
                        error = %e,
                        "redis unavailable: heartbeats and leaves are buffered until it answers"
                    );
                }
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = tokio::time::sleep(jitter(backoff)) => {}
                }
                backoff = (backoff * 2).min(tuning.backoff_max);
            }
        }
    }
    if shared.buffer.counts().buffered > 0 {
        let last = async {
            w.ping().await?;
            w.drain(tuning.batch).await
        };
        match tokio::time::timeout(w.timeout, last).await {
            Ok(Ok(())) => {}
            _ => tracing::warn!(
                lost = shared.buffer.counts().buffered,
                "store stopped with buffered writes redis did not take"
            ),
        }
    }
}

/// Somewhere between half of `d` and `d`, so that stores restarted together
/// do not reconnect in lockstep.
fn jitter(d: Duration) -> Duration {
    // A fresh RandomState is randomly keyed: enough randomness for spreading
    // retries, without a dependency.
    let r = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    d / 2 + d.mul_f64((r % 1_000) as f64 / 2_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_half_and_whole() {
        for ms in [50, 400, 5_000] {
            let d = Duration::from_millis(ms);
            for _ in 0..100 {
                let j = jitter(d);
                assert!(j >= d / 2 && j <= d, "{j:?} for {d:?}");
            }
        }
    }
}
