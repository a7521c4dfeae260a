//! [`RedisOptions`]: what an operator tunes on a
//! [`RedisStore`](crate::RedisStore). A module
//! of its own so that the shared context (`ctx.rs`) and the store can both
//! use it without importing each other.

use std::collections::HashMap;
use std::time::Duration;

use herenow_core::SpaceName;

use crate::observe::Observer;

/// Tuning of a [`RedisStore`](crate::RedisStore).
#[derive(Clone, Debug)]
pub struct RedisOptions {
    /// Prefix of every key (`herenow` gives `herenow:{room}:u`). Lets
    /// several deployments, or tests, share one Redis.
    pub prefix: String,
    /// Longest wait for any one command, connecting included. A call that
    /// takes longer fails with [`Error::Unavailable`](herenow_core::Error::Unavailable).
    pub timeout: Duration,
    /// Members one script call of background work may touch in one space;
    /// separately, the most expired live connections it may close.
    pub tick_budget: usize,
    /// Most members (over all spaces) whose heartbeats and leaves wait in
    /// memory while Redis is unavailable. Members already waiting keep
    /// being updated at the cap; writes of new members are dropped,
    /// counted in [`RedisStats::dropped`](crate::RedisStats::dropped) and logged.
    pub buffer_cap: usize,
    /// Most members one replayed script call writes (at most
    /// [`limits::MAX_BATCH`](herenow_core::limits::MAX_BATCH)).
    pub replay_batch: usize,
    /// First wait before pinging Redis again after a failure; doubles (with
    /// jitter) up to [`backoff_max`](Self::backoff_max).
    pub backoff_min: Duration,
    /// Longest wait between pings while Redis is unavailable.
    pub backoff_max: Duration,
    /// How long a space's sweep lease lasts (`P:{S}:lease`, `SET NX PX`):
    /// with several stores on one Redis only the holder runs background
    /// work on the space, renewing the lease at each tick. When the holder
    /// stops ticking another store takes over after at most this long, so
    /// it should be several tick intervals.
    pub lease: Duration,
    /// Most members a window may hold to be listed by id (`order=id`),
    /// whose cost grows with the window (see `store/by_id.rs`). Past this
    /// many members such a listing answers
    /// [`Error::Unsupported`](herenow_core::Error::Unsupported) naming the
    /// limit; listing most recent first has no such limit.
    pub id_order_max: usize,
    /// Shard keys per space (1 to [`MAX_SHARDS`](crate::key_names::MAX_SHARDS)),
    /// so one space can outgrow one sorted set and one node (see
    /// [`crate::key_names`]). 1, the default, is the unsharded layout. Every
    /// server on one Redis must agree: a space keeps the count it was
    /// created with.
    pub shards: u16,
    /// Per-space exceptions to [`shards`](Self::shards), e.g. one huge
    /// lobby split in 16 while every other space has one shard.
    pub space_shards: HashMap<SpaceName, u16>,
    /// The most this store's clock may differ from Redis' before the store
    /// reports itself not ready ([`RedisStore::clock_skew`]), measured at
    /// connect and every ten seconds on `tick`. Servers on one Redis stamp
    /// heartbeats with their own clocks and the newest time wins, so a
    /// server far ahead would make the others' heartbeats stale: a few
    /// seconds are harmless (statuses move at tens of seconds), minutes
    /// are not. `None` (the default, for stores on an injected clock in
    /// tests) measures nothing.
    ///
    /// [`RedisStore::clock_skew`]: crate::RedisStore::clock_skew
    pub max_clock_skew: Option<Duration>,
    /// Replicas that must have each write (heartbeats and leaves, friend
    /// sets, a space's policy and webhooks, erasure, attach and detach)
    /// before it is acknowledged (Redis `WAIT` after the writes, see
    /// `replicas.rs` for why and its bounds); 0, the default, acknowledges
    /// as soon as the master has it. Writes that did not reach that many
    /// replicas within [`wait_timeout`](Self::wait_timeout) are
    /// acknowledged all the same and counted
    /// ([`RedisStats::unreplicated`](crate::RedisStats::unreplicated)).
    pub wait_replicas: u16,
    /// Longest `WAIT` for [`wait_replicas`](Self::wait_replicas): more than
    /// zero, less than [`timeout`](Self::timeout).
    pub wait_timeout: Duration,
    /// Told of every call to Redis (what it was for, how long it took,
    /// how it ended); none by default. The server turns it into metrics.
    pub observer: Observer,
}

/// [`RedisOptions::wait_timeout`] unless told otherwise: long enough for a
/// replica on the same network under load, short enough that the one
/// wait a failover costs per slot (see `replicas.rs`) stays well within
/// the default [`RedisOptions::timeout`].
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_millis(250);

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "herenow".into(),
            timeout: Duration::from_secs(2),
            tick_budget: 2_048,
            buffer_cap: 1_000_000,
            replay_batch: 1_000,
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(5),
            lease: Duration::from_secs(10),
            id_order_max: 10_000,
            shards: 1,
            space_shards: HashMap::new(),
            max_clock_skew: None,
            wait_replicas: 0,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            observer: Observer::none(),
        }
    }
}
