//! [`RedisStore`]: the [`PresenceStore`](herenow_core::PresenceStore) over
//! Redis or Redis Cluster. This file is the type, its construction and
//! what the server asks of it besides the trait (readiness, counters,
//! shutdown); `presence.rs` is the trait, and each of its jobs has a file
//! named after it (`seen_anywhere.rs`: "last seen anywhere" and erasure;
//! `outbox_lease.rs`: the outbox's capture switch; `migrate.rs`: one-time
//! migrations run by `connect`).

mod by_id;
mod clock;
mod connections;
mod follow;
mod friends;
mod hooks;
mod instances;
mod list;
mod migrate;
mod outbox;
mod outbox_lease;
mod presence;
mod read;
mod relay;
mod seen_anywhere;
mod subscribe;
mod sweep;
mod write;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt, stream};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use herenow_core::{Clock, InvalidInput, MemberId, Result, SpaceConfig, SpaceName, limits};

use crate::client::{RedisClient, RedisNodes};
use crate::ctx::{Ctx, RedisStats};
use crate::events::Router;
use crate::flush::Flusher;
use crate::follow::Follows;
use crate::key_names::{Keys, SpaceKeys};
use crate::options::RedisOptions;
use crate::relay::Relays;
use crate::replay::{self, ReplayTuning};
use crate::reply::timed;
use crate::writer::Writer;

/// A presence store on Redis or Redis Cluster. See the crate documentation
/// for the key layout. Cheap to share as `Arc<dyn PresenceStore>`; any
/// number of stores (in any number of processes) may use the same Redis.
///
/// When Redis is down, slow, restarting or failing over, heartbeats and
/// leaves are still accepted: they wait in a bounded buffer, coalesced per
/// member, and a background task started by [`connect`](Self::connect)
/// writes them back when Redis answers (see [`RedisOptions::buffer_cap`],
/// [`stats`](Self::stats), [`is_ready`](Self::is_ready)). Reads answer
/// [`Error::Unavailable`](herenow_core::Error::Unavailable) within the timeout. The task stops on
/// [`shutdown`](Self::shutdown) or when the store is dropped.
pub struct RedisStore {
    /// What this store shares with its write path.
    ctx: Arc<Ctx>,
    router: Arc<Router>,
    /// The users this store follows, and their feeds.
    follows: Arc<Follows>,
    /// Messages relayed between servers, and their feeds.
    relays: Arc<Relays>,
    /// Serializes (un)subscribing so a channel being dropped is never
    /// dropped after a new subscriber has asked for it.
    sub_lock: tokio::sync::Mutex<()>,
    /// The write path, shared with the flusher and the replayer.
    writer: Arc<Writer>,
    /// Per-space queues that merge concurrent heartbeats.
    flusher: Arc<Flusher>,
    /// This store's name on sweep leases, and on the beats of live stores.
    owner: String,
    /// Each other store's beat as last read, and when this store saw it
    /// move (see `instances.rs`).
    beats_seen: Mutex<std::collections::HashMap<String, (f64, Instant)>>,
    /// The connections this store recorded in its set in Redis (see
    /// `instances.rs`), so each is recorded once, before its first attach.
    recorded: Mutex<std::collections::HashSet<(SpaceName, herenow_core::ConnId)>>,
    /// Where this store's outbox claims are in the index of streams; the
    /// lock `store/outbox.rs` runs claims and acknowledgements under.
    outbox: tokio::sync::Mutex<outbox::Consumer>,
    /// How this store's own server opened the outbox (it then renews the
    /// switch on every tick; see `outbox_lease.rs`), `None` while it follows.
    opened: Mutex<Option<herenow_core::outbox::OutboxOptions>>,
    /// Opened for spaces' endpoints alone: whether some space names any,
    /// as last looked up (`outbox_lease.rs`).
    hooks_seen: Mutex<outbox_lease::HooksSeen>,
    /// Tells the replayer to stop.
    stop: watch::Sender<bool>,
    replayer: Mutex<Option<JoinHandle<()>>>,
}

impl RedisStore {
    /// Connects to `spec`: `redis://HOST:PORT[/DB]` (one server, reconnecting
    /// by itself) or `redis+cluster://H1:P1,H2:P2,…` (seed nodes of a
    /// cluster). Fails with [`Error::Unavailable`](herenow_core::Error::Unavailable) if Redis cannot be reached
    /// within the timeout, and with [`Error::Invalid`](herenow_core::Error::Invalid) for a bad spec; it
    /// never falls back to anything else. Before it answers it runs the
    /// one-time migrations an earlier version's data needs (recorded in
    /// `P:migrations`; see the crate documentation), and fails if one
    /// does.
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
        if options.wait_replicas > 0
            && (options.wait_timeout.is_zero() || options.wait_timeout >= options.timeout)
        {
            return Err(InvalidInput::BadConfig {
                why: "the redis wait for replicas must be more than zero and less than the redis timeout",
            }
            .into());
        }
        let target = RedisNodes::parse(spec)?;
        let router = Arc::new(Router::default());
        let push_router = router.clone();
        let follows = Arc::new(Follows::new(keys.user_channels()));
        let push_follows = follows.clone();
        let relays = Arc::new(Relays::new(keys.relay_channel()));
        let push_relays = relays.clone();
        let push = move |info| {
            if let Some(info) = push_follows.push(info)
                && let Some(info) = push_relays.push(info)
            {
                push_router.push(info);
            }
        };
        let client = timed(
            &options.observer,
            options.timeout,
            "connect",
            RedisClient::open(&target, options.timeout, push),
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
        tokio::spawn(follow::restore(
            ctx.clone(),
            follows.clone(),
            relays.clone(),
            stopped.clone(),
        ));
        let owner = lease_owner();
        let beat_client = timed(
            &ctx.opts.observer,
            ctx.opts.timeout,
            "connect",
            RedisClient::open(&target, ctx.opts.timeout, |_| {}),
        )
        .await?;
        tokio::spawn(instances::beat(
            ctx.clone(),
            beat_client,
            owner.clone(),
            stopped.clone(),
        ));
        let replayer = tokio::spawn(replay::run(writer.clone(), tuning, stopped));
        let store = RedisStore {
            ctx,
            router,
            follows,
            relays,
            sub_lock: tokio::sync::Mutex::new(()),
            flusher: Flusher::new(writer.clone()),
            writer,
            owner,
            beats_seen: Mutex::new(std::collections::HashMap::new()),
            recorded: Mutex::new(std::collections::HashSet::new()),
            outbox: tokio::sync::Mutex::new(outbox::Consumer::default()),
            opened: Mutex::new(None),
            hooks_seen: Mutex::new(outbox_lease::HooksSeen::default()),
            stop,
            replayer: Mutex::new(Some(replayer)),
        };
        store.migrate().await?;
        store.follow_outbox_switch().await?;
        store.measure_clock_skew().await?;
        Ok(store)
    }

    /// This store's name on the sweep leases it holds (unique per store:
    /// the process id and a random part).
    pub fn lease_owner(&self) -> &str {
        &self.owner
    }

    /// The write buffer's counters, for metrics.
    pub fn stats(&self) -> RedisStats {
        self.ctx.stats()
    }

    /// Whether Redis answers and every buffered write has been written back:
    /// what a readiness probe wants. It turns false at the first failed call
    /// (or failed background ping, at most a second after Redis went away)
    /// and true again once the buffer is drained.
    pub fn is_ready(&self) -> bool {
        self.ctx.health.is_ready()
    }

    /// While Redis failed the replayer's last ping, pings it now, in the
    /// background (one ping at a time, under the timeout): an answer cuts
    /// the replayer's backoff short, so buffered writes go back and the
    /// store is ready again at once rather than at the end of a backoff of
    /// up to [`RedisOptions::backoff_max`]. For readiness probes, which
    /// are asked often exactly while the store is not ready; a server that
    /// only writes sends Redis nothing else meanwhile.
    pub fn probe(&self) {
        let health = &self.ctx.health;
        if health.up.load(Ordering::SeqCst) || health.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            // `io` tells the replayer when Redis answers.
            let _ = ctx.ping().await;
            ctx.health.probing.store(false, Ordering::Release);
        });
    }

    /// Stops the background replayer after one last attempt, bounded by the
    /// timeout, to write what is buffered. Call it when the server shuts
    /// down: writes that fail after it are still accepted into the buffer
    /// but nothing writes them back any more.
    pub async fn shutdown(&self) {
        // Connections this store's sockets did not end (a failed call)
        // go to the grace now rather than when their TTL runs out.
        if let Err(e) = self.reap(&self.owner.clone(), None).await {
            tracing::warn!(error = %e, "handing this server's last connections to the grace failed; they expire by their TTL");
        }
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

    /// The policy of spaces without one of their own.
    pub fn defaults(&self) -> SpaceConfig {
        self.ctx.defaults()
    }

    /// Gives spaces without a policy of their own `defaults` from now on
    /// (a server's settings reloaded). Such spaces keep no policy in
    /// Redis: every call passes this store's defaults to its script, so
    /// they follow at once. Servers sharing Redis each use their own
    /// defaults: give them all the same.
    pub fn set_defaults(&self, defaults: SpaceConfig) -> Result<()> {
        defaults.validate()?;
        self.ctx.set_defaults(defaults);
        Ok(())
    }

    /// The names of `space`'s keys (for operators and tests): every one of
    /// them hashes to the same cluster slot. For a space split over several
    /// shards, the keys of shard 0 (see [`shard_keys`](Self::shard_keys)).
    pub fn space_keys(&self, space: &SpaceName) -> Vec<String> {
        self.ctx.keys.space(space).names()
    }

    /// The names of the keys of every shard of `space`, shard 0 first (one
    /// list for an unsharded space): the keys of one shard share a slot,
    /// and each shard has its own (see [`crate::key_names`]).
    pub fn shard_keys(&self, space: &SpaceName) -> Vec<Vec<String>> {
        self.ctx
            .keys
            .all(space)
            .iter()
            .map(SpaceKeys::names)
            .collect()
    }

    /// The names of a user's keys outside every space (for operators and
    /// tests): its index of spaces, its followers (the reverse index of
    /// friend sets) and its friend set. The first two share the slot of the
    /// user's bucket ([`crate::key_names::user_bucket`]); the friend set has its
    /// own.
    pub fn user_keys(&self, user: &MemberId) -> [String; 3] {
        let (k, user) = (&self.ctx.keys, user.as_str());
        [k.seen(user), k.followers(user), k.friends(user)]
    }

    /// The registry's keys (for operators and tests): the names of the
    /// spaces, when each was last marked, each one's shard count, and when
    /// each space that holds only remembered times is next due for the
    /// sweep.
    pub fn registry_keys(&self) -> [String; 4] {
        let k = &self.ctx.keys;
        let (names, touched) = k.registry();
        [names, touched, k.registry_shards(), k.due()]
    }

    /// How many shard keys `space` is split over.
    pub fn shards_of(&self, space: &SpaceName) -> u16 {
        self.ctx.keys.shards(space)
    }
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

/// Runs `calls`, at most `n` at once (a cluster client queues what it
/// cannot send); their results in the order they finish, or the first
/// error.
async fn at_most<T, F>(n: usize, calls: impl IntoIterator<Item = F>) -> Result<Vec<T>>
where
    F: Future<Output = Result<T>>,
{
    stream::iter(calls).buffer_unordered(n).try_collect().await
}

/// A name for this store on sweep leases: the process id and a random
/// part, so two stores in one process differ too.
fn lease_owner() -> String {
    use std::hash::BuildHasher;
    // A fresh RandomState is randomly keyed.
    let r = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    format!("{}-{r:016x}", std::process::id())
}
