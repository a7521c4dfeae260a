//! [`Backend`]: the store the server runs on, with the duties its kind
//! brings. The only module that names the concrete stores: everything
//! above talks to `Arc<dyn PresenceStore>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herenow_core::{Capability, PresenceStore, SystemClock};
use herenow_memory::MemoryStore;
#[cfg(feature = "redis")]
use herenow_redis::{
    LayoutOptions, Observer, RedisOptions, RedisStats, RedisStore, SeedLayoutStore,
};

use crate::config::{Config, ConfigError, MEMORY_TICK, StoreSpec};
#[cfg(feature = "redis")]
use crate::config::{REDIS_TICK, RedisLayout, RedisTarget};
use crate::error::ServerError;
use crate::journal::{self, DiskLog};
use crate::metrics::Metrics;
use crate::persist;

/// Where the memory store keeps its data (the snapshot and the journal)
/// and how often it folds them; see [`Backend::memory_on_disk`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshots {
    /// The data directory holding `herenow.snapshot` and the journal
    /// files.
    pub dir: PathBuf,
    /// Time between folds of the journal into the snapshot while running:
    /// it bounds start time (replay) and the journal's size on disk, not
    /// what a crash loses (the journal does that).
    pub interval: Duration,
}

/// A memory store on disk: its directory and the journal its changes go
/// to.
struct OnDisk {
    snapshots: Snapshots,
    log: Arc<DiskLog>,
}

/// The store the server runs on, as one value: the `PresenceStore` every
/// handler uses, and what its kind needs besides (snapshots, readiness,
/// buffer gauges, a last flush). [`AppState`](crate::AppState) holds one.
pub struct Backend {
    store: Arc<dyn PresenceStore>,
    kind: StoreKind,
    /// The capabilities the store offers, asked once when the backend is
    /// built: what [`check`](Self::check) holds the flags against.
    offers: Vec<Capability>,
    /// The metrics the store reports to already (a Redis store opened by
    /// [`Backend::open`] times its calls into them from its first
    /// connection on), which [`AppState`](crate::AppState) then serves;
    /// `None`: the state makes its own.
    metrics: Option<Metrics>,
}

/// The concrete store behind `Backend::store`, for the duties the trait
/// does not cover.
enum StoreKind {
    /// The embedded engine, journaled and snapshotted to disk when it has
    /// a data directory.
    Memory(Arc<MemoryStore>, Option<OnDisk>),
    /// herenow's own Redis layout, with its write buffer.
    #[cfg(feature = "redis")]
    Redis(Arc<RedisStore>),
    /// A seed's Redis layout: nothing beyond the trait.
    #[cfg(feature = "redis")]
    Seed,
    /// A store the caller built (a test's stand-in): nothing beyond the
    /// trait.
    Custom,
}

impl Backend {
    /// The memory store, never written to disk: for tests and embedders
    /// that build it with their own clock.
    pub fn memory(store: Arc<MemoryStore>) -> Self {
        Self::over(store.clone(), StoreKind::Memory(store, None))
    }

    /// The memory store on disk in `snapshots.dir`: the snapshot there is
    /// restored into `store` and the journal replayed on top, then every
    /// change `store` acknowledges is journaled first (see `journal`). The
    /// journal is folded into a new snapshot every `snapshots.interval` and
    /// at shutdown.
    ///
    /// `store` must be fresh (nothing written yet): it is the caller's so
    /// that it can carry its own clock. Fails, naming the file, when the
    /// snapshot or a journal file is corrupt: the server refuses to start
    /// empty over data it cannot read.
    pub async fn memory_on_disk(
        store: Arc<MemoryStore>,
        snapshots: Snapshots,
    ) -> Result<Self, ServerError> {
        let mark = restore(&store, snapshots.dir.clone()).await?;
        let (memory, dir) = (store.clone(), snapshots.dir.clone());
        let (log, report) = tokio::task::spawn_blocking(move || journal::open(&memory, &dir, mark))
            .await
            .map_err(|e| ServerError::Store(herenow_core::Error::Internal(e.to_string())))?
            .map_err(|source| ServerError::Journal {
                dir: snapshots.dir.clone(),
                source,
            })?;
        tracing::info!(
            files = report.files,
            records = report.records,
            "replayed the journal"
        );
        if let Some(torn) = &report.torn {
            tracing::warn!(
                file = %torn.path.display(),
                offset = torn.offset,
                bytes = torn.cut,
                "cut a half-written record off the journal's end (a crash during its write; \
                 it was never acknowledged)"
            );
        }
        Ok(Self::over(
            store.clone(),
            StoreKind::Memory(store, Some(OnDisk { snapshots, log })),
        ))
    }

    /// A Redis store connected by the caller (with its own clock, say):
    /// `/readyz` follows its readiness, the metrics its write buffer, and
    /// shutdown flushes that buffer one last time.
    #[cfg(feature = "redis")]
    pub fn redis(store: Arc<RedisStore>) -> Self {
        Self::over(store.clone(), StoreKind::Redis(store))
    }

    /// A store on a seed's Redis key layout, connected by the caller.
    #[cfg(feature = "redis")]
    pub fn seed(store: Arc<SeedLayoutStore>) -> Self {
        Self::over(store, StoreKind::Seed)
    }

    /// Any other store, served through the trait alone (no readiness
    /// beyond answering, no snapshots, nothing to flush): a test's
    /// stand-in that fails on purpose, say.
    pub fn custom(store: Arc<dyn PresenceStore>) -> Self {
        Self::over(store, StoreKind::Custom)
    }

    /// `store` as `kind`, its capabilities asked once.
    fn over(store: Arc<dyn PresenceStore>, kind: StoreKind) -> Self {
        let offers = Capability::offered_by(&*store);
        Self {
            store,
            kind,
            offers,
            metrics: None,
        }
    }

    /// Whether the store offers `capability`.
    pub fn offers(&self, capability: Capability) -> bool {
        self.offers.contains(&capability)
    }

    /// Refuses a configuration with a flag that needs a capability this
    /// store does not offer ([`ConfigError::StoreLacks`]). [`Backend::open`]
    /// checks this; a caller that builds its backend otherwise calls it
    /// before serving.
    pub fn check(&self, config: &Config) -> Result<(), ConfigError> {
        let hooks = &config.webhooks;
        if !hooks.endpoints.is_empty() {
            self.require("--webhook", Capability::WebhookOutbox)?;
        } else if hooks.default_secret.is_some() {
            // It then signs only spaces' endpoints.
            self.require("--webhook-secret", Capability::SpaceWebhooks)?;
        }
        // A presence channel's members are the live connections of its
        // sockets; events reach every server's sockets through the relay.
        if config.pusher.is_enabled() {
            self.require("--pusher-app", Capability::LiveConnections)?;
            self.require("--pusher-app", Capability::Relay)?;
        }
        if !config.pusher.webhooks.is_empty() {
            self.require("--pusher-webhook", Capability::WebhookOutbox)?;
        }
        Ok(())
    }

    /// Refuses `flag`, which needs `capability`, unless the store offers
    /// it: for a flag the caller knows was given.
    pub fn require(&self, flag: &'static str, capability: Capability) -> Result<(), ConfigError> {
        if self.offers(capability) {
            return Ok(());
        }
        Err(ConfigError::StoreLacks {
            store: self.store.label(),
            flag,
            needs: capability,
        })
    }

    /// Starts the store `config.store` names, not yet serving: the memory
    /// store restored from its data directory when it has one, or a Redis
    /// store (herenow's layout or a seed's) connected and answering a
    /// `PING`. The binary opens it before it prints its "listening" line,
    /// so that line means "serving".
    ///
    /// Fails when Redis cannot be reached ([`ServerError::StoreConnect`];
    /// never a fallback to memory), when this build has no Redis support
    /// ([`ConfigError::NoRedisSupport`]), when the data directory holds a
    /// snapshot that cannot be read, or when a flag needs a capability the
    /// store does not offer ([`check`](Self::check)).
    pub async fn open(config: &Config) -> Result<Self, ServerError> {
        let backend = Self::open_store(config).await?;
        backend.check(config)?;
        Ok(backend)
    }

    /// The store `config.store` names, opened ([`open`](Self::open)
    /// without the check of flags against it).
    async fn open_store(config: &Config) -> Result<Self, ServerError> {
        match &config.store {
            StoreSpec::Memory {
                data_dir,
                snapshot_interval,
                space_stripes,
            } => {
                // Stripes pay off only with enough threads writing at
                // once: here, this runtime's workers (fewer than the cores
                // with TOKIO_WORKER_THREADS).
                let writers = tokio::runtime::Handle::try_current().map_or_else(
                    |_| std::thread::available_parallelism().map_or(1, |n| n.get()),
                    |rt| rt.metrics().num_workers(),
                );
                let stripes =
                    space_stripes.unwrap_or_else(|| herenow_memory::default_space_stripes(writers));
                tracing::info!(stripes, writers, "memory store: stripes per space");
                let memory = Arc::new(
                    MemoryStore::new(Arc::new(SystemClock), config.space_defaults)
                        .with_space_stripes(stripes),
                );
                let Some(dir) = data_dir else {
                    return Ok(Self::memory(memory));
                };
                Self::memory_on_disk(
                    memory,
                    Snapshots {
                        dir: dir.clone(),
                        interval: *snapshot_interval,
                    },
                )
                .await
            }
            #[cfg(not(feature = "redis"))]
            StoreSpec::Redis { target, .. } => Err(ServerError::Config(
                ConfigError::NoRedisSupport(target.redacted()),
            )),
            #[cfg(feature = "redis")]
            StoreSpec::Redis { target, layout } => Self::open_redis(target, layout, config).await,
        }
    }

    /// Redis at `target`, in `layout`, connected and answering `PING`,
    /// with metrics of its own that it reports to.
    #[cfg(feature = "redis")]
    async fn open_redis(
        target: &RedisTarget,
        layout: &RedisLayout,
        config: &Config,
    ) -> Result<Self, ServerError> {
        let metrics = Metrics::for_store("redis");
        let observer = Observer::new(Arc::new(metrics.clone()));
        let address = target.redacted();
        let backend = match layout {
            RedisLayout::Seed {
                layout,
                key,
                guest_key,
            } => SeedLayoutStore::connect(
                target.url(),
                *layout,
                key,
                guest_key.as_deref(),
                Arc::new(SystemClock),
                config.space_defaults,
                LayoutOptions {
                    observer,
                    ..LayoutOptions::default()
                },
            )
            .await
            .inspect(|_| {
                tracing::info!(
                    store = %address,
                    %layout,
                    key,
                    "connected to Redis with a seed's key layout"
                );
            })
            .map(|seed| Self::seed(Arc::new(seed))),
            RedisLayout::Herenow {
                shards,
                space_shards,
                wait_replicas,
                wait_timeout,
            } => RedisStore::connect(
                target.url(),
                Arc::new(SystemClock),
                config.space_defaults,
                RedisOptions {
                    shards: *shards,
                    space_shards: space_shards.clone(),
                    max_clock_skew: Some(MAX_CLOCK_SKEW),
                    wait_replicas: *wait_replicas,
                    wait_timeout: *wait_timeout,
                    observer,
                    ..RedisOptions::default()
                },
            )
            .await
            .inspect(|_| tracing::info!(store = %address, wait_replicas, "connected to Redis"))
            .map(|redis| Self::redis(Arc::new(redis))),
        };
        let backend = backend.map_err(|source| ServerError::StoreConnect {
            kind: target.name(),
            address,
            source,
        })?;
        Ok(backend.with_metrics(metrics))
    }

    /// Serves `metrics`, which the store reports to already (a store
    /// connected with an [`Observer`](herenow_redis::Observer) of them),
    /// rather than metrics of the state's own.
    pub fn with_metrics(self, metrics: Metrics) -> Self {
        Self {
            metrics: Some(metrics),
            ..self
        }
    }

    /// The metrics given to [`with_metrics`](Self::with_metrics), if any.
    pub(crate) fn metrics(&self) -> Option<&Metrics> {
        self.metrics.as_ref()
    }

    /// The store every handler talks to.
    pub fn store(&self) -> &Arc<dyn PresenceStore> {
        &self.store
    }

    /// Time between rounds of background maintenance (see `MEMORY_TICK`
    /// and `REDIS_TICK`).
    pub fn tick_interval(&self) -> Duration {
        match self.kind {
            StoreKind::Memory(..) | StoreKind::Custom => MEMORY_TICK,
            #[cfg(feature = "redis")]
            StoreKind::Redis(_) | StoreKind::Seed => REDIS_TICK,
        }
    }

    /// Whether other servers may share this store's state (Redis), so
    /// they must share the token secret too.
    pub fn is_shared(&self) -> bool {
        match self.kind {
            StoreKind::Memory(..) | StoreKind::Custom => false,
            #[cfg(feature = "redis")]
            StoreKind::Redis(_) | StoreKind::Seed => true,
        }
    }

    /// Why the store is not ready though it may answer: a Redis store
    /// whose last ping failed, or whose buffered heartbeats still wait to
    /// be written, shows a partial view a load balancer should route
    /// around. `None` when nothing but the store's answers decides.
    pub fn not_ready(&self) -> Option<String> {
        #[cfg(feature = "redis")]
        if let StoreKind::Redis(redis) = &self.kind {
            return redis_not_ready(redis);
        }
        None
    }

    /// Gives spaces without a policy of their own `defaults` from now on
    /// (a reload of the server's settings). A seed's layout derives its
    /// policy from its keys at start, and a store the caller built is not
    /// known here: `Err` with the reason, nothing changed.
    pub fn set_space_defaults(
        &self,
        defaults: herenow_core::SpaceConfig,
    ) -> Result<(), &'static str> {
        let invalid = "the defaults do not fit together";
        match &self.kind {
            StoreKind::Memory(memory, _) => {
                memory.set_defaults(defaults).map(drop).map_err(|_| invalid)
            }
            #[cfg(feature = "redis")]
            StoreKind::Redis(redis) => redis.set_defaults(defaults).map_err(|_| invalid),
            #[cfg(feature = "redis")]
            StoreKind::Seed => Err("a seed's key layout sets its policy at start"),
            StoreKind::Custom => Err("the store was built by the program that embeds the server"),
        }
    }

    /// A Redis store's write-buffer counters, for the metrics; `None` for
    /// any other store.
    #[cfg(feature = "redis")]
    pub fn redis_stats(&self) -> Option<RedisStats> {
        match &self.kind {
            StoreKind::Redis(redis) => Some(redis.stats()),
            _ => None,
        }
    }

    /// The period of [`Backend::periodic_duty`], or `None` when this store
    /// has none.
    pub(crate) fn duty_period(&self) -> Option<Duration> {
        match &self.kind {
            StoreKind::Memory(_, Some(disk)) => Some(disk.snapshots.interval),
            _ => None,
        }
    }

    /// What this store needs done every [`Backend::duty_period`]: the
    /// memory store's journal folded into a new snapshot, off the async
    /// threads. Failures are logged; the journal keeps everything until a
    /// fold succeeds, so only start time grows.
    pub(crate) async fn periodic_duty(&self) {
        let StoreKind::Memory(memory, Some(disk)) = &self.kind else {
            return;
        };
        match fold(memory, disk).await {
            Ok(bytes) => tracing::debug!(bytes, "folded the journal into a snapshot"),
            Err(e) => tracing::error!(error = %e, "folding the journal into a snapshot failed"),
        }
    }

    /// What this store needs done once serving has stopped and every
    /// socket has detached: the memory store's final fold (an error if it
    /// cannot be written; the journal still holds everything), or one
    /// last bounded attempt to write what a Redis store buffered during an
    /// outage (what still cannot be written is counted and logged).
    pub(crate) async fn shutdown(&self) -> Result<(), ServerError> {
        match &self.kind {
            StoreKind::Memory(memory, Some(disk)) => {
                let bytes = fold(memory, disk).await?;
                tracing::info!(bytes, "wrote final snapshot");
            }
            #[cfg(feature = "redis")]
            StoreKind::Redis(redis) => {
                redis.shutdown().await;
                let stats = redis.stats();
                if stats.buffered > 0 {
                    tracing::warn!(
                        buffered = stats.buffered,
                        "Redis still unavailable at shutdown; buffered heartbeats are lost"
                    );
                }
            }
            #[cfg(feature = "redis")]
            StoreKind::Seed => {}
            StoreKind::Memory(_, None) | StoreKind::Custom => {}
        }
        Ok(())
    }

    /// The memory store's journal counters, when it has a data directory.
    pub fn journal_stats(&self) -> Option<herenow_journal::JournalStats> {
        match &self.kind {
            StoreKind::Memory(_, Some(disk)) => Some(disk.log.stats()),
            _ => None,
        }
    }
}

/// Folds `disk`'s journal into a snapshot of `memory`; returns its size.
async fn fold(memory: &Arc<MemoryStore>, disk: &OnDisk) -> Result<usize, ServerError> {
    let dir = disk.snapshots.dir.clone();
    journal::fold(memory, &disk.log, move |bytes| {
        persist::write_bytes(&dir, &bytes)
    })
    .await
    .map_err(|e| match e {
        journal::FoldError::Write(e) => e,
        journal::FoldError::Journal(source) => ServerError::Journal {
            dir: disk.snapshots.dir.clone(),
            source,
        },
        journal::FoldError::Panicked(why) => ServerError::Store(herenow_core::Error::Internal(why)),
    })
}

/// How far a server's clock may be from Redis' before it reports not
/// ready: a few seconds move no status (they change at tens of seconds),
/// minutes would make other servers' heartbeats stale.
#[cfg(feature = "redis")]
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(5);

/// Why a Redis store is not ready though it may answer; `None` when it is.
#[cfg(feature = "redis")]
fn redis_not_ready(redis: &RedisStore) -> Option<String> {
    if let Some(skew) = redis.clock_skew_exceeded() {
        return Some(format!(
            "this server's clock differs from Redis' by {skew} ms (Redis minus ours; at most {} ms allowed): \
             servers on one Redis stamp heartbeats with their own clocks, so fix its time (NTP)",
            MAX_CLOCK_SKEW.as_millis()
        ));
    }
    if redis.is_ready() {
        return None;
    }
    // Probes come often while the store is not ready: each may find Redis
    // back before the replayer's backoff would.
    redis.probe();
    let stats = redis.stats();
    Some(if stats.redis_up {
        format!(
            "writing back {} members' heartbeats buffered while Redis was unavailable",
            stats.buffered
        )
    } else {
        "Redis does not answer; heartbeats are buffered until it does".to_owned()
    })
}

/// Loads the snapshot in `dir` into `memory`, off the async threads;
/// returns its mark (the first journal file it does not cover; 0 when
/// there is no snapshot yet).
async fn restore(memory: &Arc<MemoryStore>, dir: PathBuf) -> Result<u64, ServerError> {
    let store = memory.clone();
    let restored = tokio::task::spawn_blocking(move || persist::restore(&store, &dir))
        .await
        .map_err(|e| ServerError::Store(herenow_core::Error::Internal(e.to_string())))??;
    match restored {
        Some(r) => {
            tracing::info!(
                spaces = r.spaces,
                members = r.members,
                friend_sets = r.friend_sets,
                taken_ms = r.taken_ms,
                "restored snapshot"
            );
            Ok(r.mark)
        }
        None => {
            tracing::info!("no snapshot yet");
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_store_ticks_four_times_a_second_and_is_ready_alone() {
        let memory = Backend::memory(Arc::new(MemoryStore::default()));
        assert_eq!(memory.tick_interval(), Duration::from_millis(250));
        assert!(!memory.is_shared());
        assert!(memory.not_ready().is_none());
        assert!(memory.duty_period().is_none());
    }

    /// Unless told, spaces are striped by the runtime's workers: whole
    /// below 8, four stripes from 8 on; a count given is kept.
    #[test]
    fn spaces_are_striped_by_the_workers_unless_told() {
        let stripes_with = |workers: usize, told: Option<usize>| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .build()
                .unwrap();
            let config = Config {
                store: StoreSpec::Memory {
                    data_dir: None,
                    snapshot_interval: Duration::from_secs(30),
                    space_stripes: told,
                },
                ..Config::default()
            };
            match rt.block_on(Backend::open(&config)).unwrap().kind {
                StoreKind::Memory(memory, _) => memory.space_stripes(),
                _ => unreachable!("a memory spec opens a memory store"),
            }
        };
        assert_eq!(stripes_with(2, None), 1);
        assert_eq!(stripes_with(4, None), 1);
        assert_eq!(stripes_with(8, None), 4);
        assert_eq!(stripes_with(16, None), 4);
        assert_eq!(stripes_with(8, Some(1)), 1);
        assert_eq!(stripes_with(2, Some(3)), 3);
    }

    /// The server's defaults for waiting on replicas are the store's, and
    /// its longest wait stays below the store's timeout.
    #[cfg(feature = "redis")]
    #[test]
    fn redis_wait_defaults_agree_with_the_store() {
        use crate::config::{DEFAULT_REDIS_WAIT, MAX_REDIS_WAIT};
        assert_eq!(DEFAULT_REDIS_WAIT, herenow_redis::DEFAULT_WAIT_TIMEOUT);
        assert!(MAX_REDIS_WAIT < RedisOptions::default().timeout);
    }
}
