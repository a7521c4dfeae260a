//! What the store and its write path share: one [`Ctx`] per store, behind
//! an `Arc`, held by [`RedisStore`](crate::RedisStore), the writer
//! (`writer.rs`), the heartbeat flusher and the replayer. A leaf: it
//! imports none of them. It owns the client, the clock, the policy defaults, the
//! options, the key names and the write buffer's [`Health`], so no two of
//! them keep copies that could disagree.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use redis::{FromRedisValue, RedisResult, ScriptInvocation, Value};
use tokio::sync::Notify;

use herenow_core::{Clock, Error, Millis, Result, SpaceConfig, SpaceName};

use crate::buffer::WriteBuffer;
use crate::client::RedisClient;
use crate::key_names::Keys;
use crate::options::RedisOptions;
use crate::replicas::Replication;
use crate::reply::timed;

/// Counters of a [`RedisStore`](crate::RedisStore)'s write buffer, for
/// metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Members whose writes wait for Redis now.
    pub buffered: u64,
    /// Writes dropped since the start: refused by
    /// [`RedisOptions::buffer_cap`], or refused by Redis on replay.
    pub dropped: u64,
    /// Members written back from the buffer since the start.
    pub replayed: u64,
    /// Whether Redis answered the last ping.
    pub redis_up: bool,
    /// Write calls acknowledged without the replicas
    /// [`RedisOptions::wait_replicas`] asks for, since the start (counted
    /// once per slot a call wrote; always 0 when it asks for none).
    pub unreplicated: u64,
}

/// Whether Redis answers, and the writes waiting for it: what every call
/// checks before it writes and what readiness and metrics report.
pub(crate) struct Health {
    /// Writes waiting for Redis.
    pub buffer: WriteBuffer,
    /// Whether Redis answered the replayer's last ping (or nothing failed
    /// yet).
    pub up: AtomicBool,
    /// Wakes the replayer: a write was buffered or a call failed.
    pub wake: Notify,
    /// Cuts the replayer's backoff short: a call to Redis succeeded while
    /// its last ping had failed, so Redis is likely back (see
    /// `replay.rs`).
    pub answered: Notify,
    /// Members written back from the buffer since the start.
    pub replayed: AtomicU64,
    /// A ping asked for by [`RedisStore::probe`](crate::RedisStore::probe)
    /// is in flight.
    pub probing: AtomicBool,
}

impl Health {
    fn new(buffer_cap: usize) -> Self {
        Health {
            buffer: WriteBuffer::new(buffer_cap),
            up: AtomicBool::new(true),
            wake: Notify::new(),
            answered: Notify::new(),
            replayed: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// A call could not reach Redis: hold writes until the replayer has
    /// seen Redis answer and drained the buffer.
    pub fn failed(&self) {
        self.buffer.start_holding();
        self.wake.notify_one();
    }

    /// The counters, read now (`unreplicated` is the caller's to fill).
    pub fn stats(&self) -> RedisStats {
        let counts = self.buffer.counts();
        RedisStats {
            buffered: counts.buffered,
            dropped: counts.dropped,
            replayed: self.replayed.load(Ordering::Relaxed),
            redis_up: self.up.load(Ordering::SeqCst),
            unreplicated: 0,
        }
    }

    /// Redis answers and nothing waits for it.
    pub fn is_ready(&self) -> bool {
        self.up.load(Ordering::SeqCst) && self.buffer.is_drained()
    }
}

/// See the module documentation.
pub(crate) struct Ctx {
    /// The one multiplexed client every call clones.
    pub client: RedisClient,
    /// Events go out with `SPUBLISH` on a cluster, `PUBLISH` otherwise.
    cluster: bool,
    /// "Now", for every script: never Redis `TIME`.
    pub clock: Arc<dyn Clock>,
    /// The policy of spaces that have none of their own: read through
    /// [`defaults`](Self::defaults), changed by
    /// [`RedisStore::set_defaults`](crate::RedisStore::set_defaults).
    defaults: parking_lot::RwLock<SpaceConfig>,
    /// As given to [`RedisStore::connect`](crate::RedisStore::connect).
    pub opts: RedisOptions,
    /// Every key name, and each space's shards.
    pub keys: Keys,
    /// Whether Redis answers, and the buffered writes.
    pub health: Health,
    /// Waiting for replicas after writes ([`RedisOptions::wait_replicas`]).
    replication: Replication,
    /// The most events the webhook outbox keeps per space, 0 while it is
    /// closed (see [`publish_arg`](Self::publish_arg)).
    pub outbox_cap: AtomicU64,
    /// How long (ms) each outbox stream lives after its newest event, 0
    /// for ever (see [`OutboxOptions::keep_ms`](herenow_core::outbox::OutboxOptions::keep_ms)).
    pub outbox_keep: AtomicU64,
    /// Redis' clock minus this store's, in ms, as last measured
    /// ([`NO_SKEW`] before the first measure); see
    /// [`RedisOptions::max_clock_skew`].
    pub clock_skew: AtomicI64,
    /// When (by this store's clock) the skew was last measured.
    pub skew_measured: AtomicU64,
}

/// [`Ctx::clock_skew`] before anything was measured.
pub const NO_SKEW: i64 = i64::MIN;

impl Ctx {
    /// The context of a store connected with `client`, whose options and
    /// key names the caller has checked.
    pub fn new(
        client: RedisClient,
        cluster: bool,
        clock: Arc<dyn Clock>,
        defaults: SpaceConfig,
        keys: Keys,
        opts: RedisOptions,
    ) -> Self {
        Ctx {
            client,
            cluster,
            clock,
            defaults: parking_lot::RwLock::new(defaults),
            keys,
            health: Health::new(opts.buffer_cap),
            replication: Replication::new(
                opts.wait_replicas,
                opts.wait_timeout,
                opts.observer.clone(),
            ),
            outbox_cap: AtomicU64::new(0),
            outbox_keep: AtomicU64::new(0),
            clock_skew: AtomicI64::new(NO_SKEW),
            skew_measured: AtomicU64::new(0),
            opts,
        }
    }

    /// The policy of spaces that have none of their own.
    pub fn defaults(&self) -> SpaceConfig {
        *self.defaults.read()
    }

    /// Replaces [`defaults`](Self::defaults).
    pub fn set_defaults(&self, defaults: SpaceConfig) {
        *self.defaults.write() = defaults;
    }

    /// Whether Redis is a cluster.
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// Groups `ids` for one script (or pipeline) per group over users'
    /// keys: per bucket on a cluster (a bucket is one slot, see
    /// [`crate::key_names::user_bucket`]), in chunks of 1,000 on one server
    /// (where any keys may share a call).
    pub fn user_groups<S: AsRef<str>>(&self, ids: &[S]) -> Vec<Vec<usize>> {
        if self.cluster {
            return Keys::by_bucket(ids);
        }
        (0..ids.len())
            .collect::<Vec<_>>()
            .chunks(1_000)
            .map(<[usize]>::to_vec)
            .collect()
    }

    /// The publish command the scripts run, an argument of each: sharded
    /// pub/sub on a cluster keeps an event in its space's slot.
    pub fn publish_cmd(&self) -> &'static str {
        if self.cluster { "SPUBLISH" } else { "PUBLISH" }
    }

    /// The command argument of the scripts that publish on `space`'s
    /// channels: [`publish_cmd`](Self::publish_cmd) while the webhook
    /// outbox is closed (so capture costs nothing), else `CMD CAP MODE
    /// KEEP` with the space's cap split over its shards, at least one each
    /// (see [`crate::outbox_scripts`]).
    pub fn publish_arg(&self, space: &SpaceName) -> Cow<'static, str> {
        let cap = self.outbox_cap.load(Ordering::Acquire);
        if cap == 0 {
            return Cow::Borrowed(self.publish_cmd());
        }
        let n = self.keys.shards(space);
        let per = (cap / u64::from(n)).max(1);
        let mode = if n > 1 { 2 } else { 1 };
        let keep = self.outbox_keep.load(Ordering::Relaxed);
        Cow::Owned(format!("{} {per} {mode} {keep}", self.publish_cmd()))
    }

    /// The defaults as the scripts take them (online, away, window,
    /// retention, remember, remember guests as 0/1), for spaces without a
    /// policy of their own.
    pub fn defaults_args(&self) -> [Millis; 6] {
        let d = self.defaults();
        [
            d.online_ms,
            d.away_ms,
            d.window_ms,
            d.retention_ms,
            d.remember_ms,
            Millis::from(d.remember_guests),
        ]
    }

    /// Runs one Redis call with the timeout, mapping failures. A failure to
    /// reach Redis also holds writes in the buffer until Redis answers, so
    /// a member's writes never overtake each other.
    pub async fn io<T>(
        &self,
        what: &'static str,
        f: impl Future<Output = RedisResult<T>>,
    ) -> Result<T> {
        let r = timed(&self.opts.observer, self.opts.timeout, what, f).await;
        match &r {
            Err(Error::Unavailable { .. }) => self.health.failed(),
            // Redis answered a read (writes wait in the buffer meanwhile)
            // while the replayer backs off: it need not sleep on.
            Ok(_) if !self.health.up.load(Ordering::Relaxed) => self.health.answered.notify_one(),
            _ => {}
        }
        r
    }

    /// Runs `inv` through [`io`](Self::io) on a clone of the client.
    pub async fn invoke<T: FromRedisValue>(
        &self,
        what: &'static str,
        inv: &ScriptInvocation<'_>,
    ) -> Result<T> {
        let mut c = self.client.clone();
        self.io(what, inv.invoke_async(&mut c)).await
    }

    /// Runs `cmd` through [`io`](Self::io) on a clone of the client.
    pub async fn query<T: FromRedisValue>(
        &self,
        what: &'static str,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        let mut c = self.client.clone();
        self.io(what, cmd.query_async(&mut c)).await
    }

    /// Whether writes wait for replicas ([`RedisOptions::wait_replicas`]).
    pub fn waits_for_replicas(&self) -> bool {
        self.replication.is_on()
    }

    /// Returns once the writes this caller made to the slots of `keys`
    /// (all answered) are on the replicas [`RedisOptions::wait_replicas`]
    /// asks for, or counted as not; at once when it asks for none. A
    /// failure to ask holds writes in the buffer, as [`io`](Self::io) does.
    pub async fn replicated<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> Result<()> {
        let r = self
            .replication
            .wait_for(&self.client, self.opts.timeout, keys)
            .await;
        if let Err(Error::Unavailable { .. }) = &r {
            self.health.failed();
        }
        r
    }

    /// The counters of the write buffer and of replication, read now.
    pub fn stats(&self) -> RedisStats {
        RedisStats {
            unreplicated: self.replication.unreplicated(),
            ..self.health.stats()
        }
    }

    /// One `PING`, under the timeout: how the replayer and `connect` learn
    /// that Redis answers.
    pub async fn ping(&self) -> Result<()> {
        self.query::<Value>("ping", &redis::cmd("PING"))
            .await
            .map(drop)
    }
}
