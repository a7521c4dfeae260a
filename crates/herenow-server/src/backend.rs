//! [`Backend`]: the store the server runs on, with the duties its kind
//! brings.
//!
//! Everything above the store talks to `Arc<dyn PresenceStore>`. The few
//! things one kind of store needs besides the trait are answered here and
//! nowhere else: the memory store's snapshots (restored at open, written
//! periodically and at shutdown), and a Redis store's readiness, its
//! write-buffer gauges and its last flush. Building the store `--store`
//! names ([`Backend::open`]) is here too, and fails loudly: a Redis that
//! cannot be reached is an error, never a fallback to memory. Without the
//! `redis` feature only the memory store can be built, and a Redis spec is
//! refused.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herenow_core::{MemoryStore, PresenceStore, SystemClock};
#[cfg(feature = "redis")]
use herenow_redis::{LayoutOptions, RedisOptions, RedisStats, RedisStore, SeedLayoutStore};

use crate::config::{Config, MEMORY_TICK, StoreSpec};
#[cfg(feature = "redis")]
use crate::config::{REDIS_TICK, RedisLayout};
use crate::error::ServerError;
use crate::persist;

/// Where the memory store's snapshot lives and how often it is written
/// while running (it is also restored at open and written at shutdown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshots {
    /// The data directory holding `herenow.snapshot`.
    pub dir: PathBuf,
    /// Time between writes while running.
    pub interval: Duration,
}

/// The store the server runs on, as one value: the `PresenceStore` every
/// handler uses, and what its kind needs besides (snapshots, readiness,
/// buffer gauges, a last flush). [`AppState`](crate::AppState) holds one.
pub struct Backend {
    store: Arc<dyn PresenceStore>,
    kind: Kind,
}

/// The concrete store behind `Backend::store`, for the duties the trait
/// does not cover.
enum Kind {
    /// The embedded engine, snapshotted to disk when `Snapshots` are given.
    Memory(Arc<MemoryStore>, Option<Snapshots>),
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
        Self {
            store: store.clone(),
            kind: Kind::Memory(store, None),
        }
    }

    /// The memory store, snapshotted into `snapshots.dir` while running
    /// and at shutdown. It is not restored from there: a store built by
    /// the caller is taken as it is ([`Backend::open`] restores).
    pub fn memory_with_snapshots(store: Arc<MemoryStore>, snapshots: Snapshots) -> Self {
        Self {
            store: store.clone(),
            kind: Kind::Memory(store, Some(snapshots)),
        }
    }

    /// A Redis store connected by the caller (with its own clock, say):
    /// `/readyz` follows its readiness, the metrics its write buffer, and
    /// shutdown flushes that buffer one last time.
    #[cfg(feature = "redis")]
    pub fn redis(store: Arc<RedisStore>) -> Self {
        Self {
            store: store.clone(),
            kind: Kind::Redis(store),
        }
    }

    /// A store on a seed's Redis key layout, connected by the caller.
    #[cfg(feature = "redis")]
    pub fn seed(store: Arc<SeedLayoutStore>) -> Self {
        Self {
            store,
            kind: Kind::Seed,
        }
    }

    /// Any other store, served through the trait alone (no readiness
    /// beyond answering, no snapshots, nothing to flush): a test's
    /// stand-in that fails on purpose, say.
    pub fn custom(store: Arc<dyn PresenceStore>) -> Self {
        Self {
            store,
            kind: Kind::Custom,
        }
    }

    /// Starts the store `config.store` names, not yet serving: the memory
    /// store restored from its data directory when it has one, or a Redis
    /// store (herenow's layout or a seed's) connected and answering a
    /// `PING`. The binary opens it before it prints its "listening" line,
    /// so that line means "serving".
    ///
    /// Fails when Redis cannot be reached ([`ServerError::StoreConnect`],
    /// naming the address; never a fallback to memory), when this build
    /// has no Redis support ([`ConfigError::NoRedisSupport`]), or when the
    /// data directory holds a snapshot that cannot be read.
    ///
    /// [`ConfigError::NoRedisSupport`]: crate::ConfigError::NoRedisSupport
    pub async fn open(config: &Config) -> Result<Self, ServerError> {
        match &config.store {
            StoreSpec::Memory {
                data_dir,
                snapshot_interval,
            } => {
                let memory = Arc::new(MemoryStore::new(
                    Arc::new(SystemClock),
                    config.space_defaults,
                ));
                let Some(dir) = data_dir else {
                    return Ok(Self::memory(memory));
                };
                restore(&memory, dir.clone()).await?;
                Ok(Self::memory_with_snapshots(
                    memory,
                    Snapshots {
                        dir: dir.clone(),
                        interval: *snapshot_interval,
                    },
                ))
            }
            #[cfg(not(feature = "redis"))]
            StoreSpec::Redis { target, .. } => Err(ServerError::Config(
                crate::ConfigError::NoRedisSupport(target.redacted()),
            )),
            #[cfg(feature = "redis")]
            StoreSpec::Redis {
                target,
                layout:
                    RedisLayout::Seed {
                        layout,
                        key,
                        guest_key,
                    },
            } => {
                let seed = SeedLayoutStore::connect(
                    target.url(),
                    *layout,
                    key,
                    guest_key.as_deref(),
                    Arc::new(SystemClock),
                    config.space_defaults,
                    LayoutOptions::default(),
                )
                .await
                .map_err(|source| ServerError::StoreConnect {
                    kind: target.name(),
                    address: target.redacted(),
                    source,
                })?;
                tracing::info!(
                    store = %target.redacted(),
                    %layout,
                    key,
                    "connected to Redis with a seed's key layout"
                );
                Ok(Self::seed(Arc::new(seed)))
            }
            #[cfg(feature = "redis")]
            StoreSpec::Redis {
                target,
                layout:
                    RedisLayout::Herenow {
                        shards,
                        space_shards,
                    },
            } => {
                let redis = RedisStore::connect(
                    target.url(),
                    Arc::new(SystemClock),
                    config.space_defaults,
                    RedisOptions {
                        shards: *shards,
                        space_shards: space_shards.clone(),
                        ..RedisOptions::default()
                    },
                )
                .await
                .map_err(|source| ServerError::StoreConnect {
                    kind: target.name(),
                    address: target.redacted(),
                    source,
                })?;
                tracing::info!(store = %target.redacted(), "connected to Redis");
                Ok(Self::redis(Arc::new(redis)))
            }
        }
    }

    /// The store every handler talks to.
    pub fn store(&self) -> &Arc<dyn PresenceStore> {
        &self.store
    }

    /// Time between rounds of background maintenance: a quarter second for
    /// an in-process store, a second for Redis, whose rounds cost a script
    /// call per space and are shared by every server.
    pub fn tick_interval(&self) -> Duration {
        match self.kind {
            Kind::Memory(..) | Kind::Custom => MEMORY_TICK,
            #[cfg(feature = "redis")]
            Kind::Redis(_) | Kind::Seed => REDIS_TICK,
        }
    }

    /// Whether other servers may share this store's state (Redis), so
    /// they must share the token secret too.
    pub fn is_shared(&self) -> bool {
        match self.kind {
            Kind::Memory(..) | Kind::Custom => false,
            #[cfg(feature = "redis")]
            Kind::Redis(_) | Kind::Seed => true,
        }
    }

    /// Why the store is not ready though it may answer: a Redis store
    /// whose last ping failed, or whose buffered heartbeats still wait to
    /// be written, shows a partial view a load balancer should route
    /// around. `None` when nothing but the store's answers decides.
    pub fn not_ready(&self) -> Option<String> {
        #[cfg(feature = "redis")]
        if let Kind::Redis(redis) = &self.kind {
            return redis_not_ready(redis);
        }
        None
    }

    /// A Redis store's write-buffer counters, for the metrics; `None` for
    /// any other store.
    #[cfg(feature = "redis")]
    pub fn redis_stats(&self) -> Option<RedisStats> {
        match &self.kind {
            Kind::Redis(redis) => Some(redis.stats()),
            _ => None,
        }
    }

    /// The period of [`Backend::periodic_duty`], or `None` when this store
    /// has none.
    pub(crate) fn duty_period(&self) -> Option<Duration> {
        match &self.kind {
            Kind::Memory(_, Some(snapshots)) => Some(snapshots.interval),
            _ => None,
        }
    }

    /// What this store needs done every [`Backend::duty_period`]: the
    /// memory store's snapshot, written off the async threads. Failures
    /// are logged; the next round tries again.
    pub(crate) async fn periodic_duty(&self) {
        let Kind::Memory(memory, Some(snapshots)) = &self.kind else {
            return;
        };
        let (memory, dir) = (memory.clone(), snapshots.dir.clone());
        match tokio::task::spawn_blocking(move || persist::write(&memory, &dir)).await {
            Ok(Ok(bytes)) => tracing::debug!(bytes, "wrote snapshot"),
            Ok(Err(e)) => tracing::error!(error = %e, "writing snapshot failed"),
            Err(e) => tracing::error!(error = %e, "snapshot task failed"),
        }
    }

    /// What this store needs done once serving has stopped and every
    /// socket has detached: the memory store's final snapshot (an error if
    /// it cannot be written), or one last bounded attempt to write what a
    /// Redis store buffered during an outage (what still cannot be written
    /// is counted and logged).
    pub(crate) async fn shutdown(&self) -> Result<(), ServerError> {
        match &self.kind {
            Kind::Memory(memory, Some(snapshots)) => {
                let (memory, dir) = (memory.clone(), snapshots.dir.clone());
                let bytes = tokio::task::spawn_blocking(move || persist::write(&memory, &dir))
                    .await
                    .map_err(|e| {
                        ServerError::Store(herenow_core::Error::Internal(e.to_string()))
                    })??;
                tracing::info!(bytes, "wrote final snapshot");
            }
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => {
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
            Kind::Seed => {}
            Kind::Memory(_, None) | Kind::Custom => {}
        }
        Ok(())
    }
}

/// Why a Redis store is not ready though it may answer; `None` when it is.
#[cfg(feature = "redis")]
fn redis_not_ready(redis: &RedisStore) -> Option<String> {
    if redis.is_ready() {
        return None;
    }
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

/// Loads the snapshot in `dir` into `memory`, off the async threads.
async fn restore(memory: &Arc<MemoryStore>, dir: PathBuf) -> Result<(), ServerError> {
    let store = memory.clone();
    let restored = tokio::task::spawn_blocking(move || persist::restore(&store, &dir))
        .await
        .map_err(|e| ServerError::Store(herenow_core::Error::Internal(e.to_string())))??;
    match restored {
        Some(r) => tracing::info!(
            spaces = r.spaces,
            members = r.members,
            friend_sets = r.friend_sets,
            taken_ms = r.taken_ms,
            "restored snapshot"
        ),
        None => tracing::info!("no snapshot yet; starting empty"),
    }
    Ok(())
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
        let snapshotted = Backend::memory_with_snapshots(
            Arc::new(MemoryStore::default()),
            Snapshots {
                dir: "/nowhere".into(),
                interval: Duration::from_secs(7),
            },
        );
        assert_eq!(snapshotted.duty_period(), Some(Duration::from_secs(7)));
    }
}
