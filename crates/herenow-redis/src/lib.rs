//! herenow-redis: the [`PresenceStore`](herenow_core::PresenceStore) on Redis
//! and Redis Cluster — the scale-out path, where herenow servers hold no
//! presence state of their own and any number of them share one Redis.
//!
//! Build it with [`RedisStore::connect`] from a spec:
//! `redis://HOST:PORT[/DB]` (one server, through redis-rs' reconnecting
//! `ConnectionManager`) or `redis+cluster://H1:P1,H2:P2,…` (seed nodes of
//! a cluster).
//! Every command runs under a timeout ([`RedisOptions::timeout`]) and every
//! failure to reach Redis is [`Error::Unavailable`](herenow_core::Error):
//! the store never hangs and never falls back to memory. "Now" comes from
//! the injected [`Clock`](herenow_core::Clock), never from Redis `TIME`, so
//! all servers and the tests agree on one clock.
//!
//! It is not a cache in front of the memory store: Redis is the only copy.
//!
//! # Key layout
//!
//! `P` is [`RedisOptions::prefix`] (`herenow`), `S` the space. Every key of
//! a space carries the hash tag `{S}`, so all of them live in one cluster
//! slot and every multi-key script runs on one node (a space split over
//! several shards has one such set of keys per shard, see below):
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `P:{S}:u`, `P:{S}:g` | sorted set | users / guests: member = id, score = last seen in ms (seeds 001/004's set, split by kind so counts are two `ZCOUNT`s) |
//! | `P:{S}:meta` | hash | `u:ID` / `g:ID` → metadata JSON |
//! | `P:{S}:state` | hash | `seq` (event sequence), the away / gone watermarks per kind, and `ix` / `ixc` (the one-time walk of users stored before indexing, see below) |
//! | `P:{S}:config` | hash | the space's policy (`online`, `away`, `window`, `retention`, `remember`, `rguests`), absent for the defaults; one written before remembering existed has no `remember` / `rguests` and remembers by the defaults |
//! | `P:{S}:ru`, `P:{S}:rg` | sorted sets | remembered users / guests: member = id, score = remembered last seen in ms; a member is in these or in `u` / `g`, never both |
//! | `P:{S}:unidx` | set | users stored or remembered anew whose index (`seen`, below) may not list the space yet |
//! | `P:{S}:conns` | sorted set | live connections: member = connection id, score = expiry in ms |
//! | `P:{S}:cinfo` | hash | connection id → `F K ID \n META`: visible (`0`) or invisible (`1`), the member's kind and id, the connection's metadata |
//! | `P:{S}:mconn` | hash | `u:ID` / `g:ID` → that member's connections, space-separated, each `0`/`1` then the id (at most 64) |
//! | `P:{S}:lease` | string | the sweep lease: the id of the store that runs background work on the space, `SET NX PX`, renewed by each tick of its holder |
//! | `P:{S}:events` | channel | events: `PUBLISH` on a server, `SPUBLISH` (sharded, same slot) on a cluster |
//! | `P:u:ID` | channel | a user's status changes in every space (`[space, tuple]`, no metadata) and `friends` after its friend set changed, for the servers that follow the user (see below): classic `PUBLISH` on a server and on a cluster alike |
//! | `P:{spaces}:names`, `P:{spaces}:touched` | sorted sets | the registry of spaces: names (score 0, for listing) and when a writer last marked each (for dropping empty ones) |
//! | `P:{spaces}:shards` | hash | space → the number of shards it was created with (a store configured otherwise refuses to write to it); kept while the space remembers anyone |
//! | `P:{spaces}:due` | sorted set | spaces holding only remembered times → when the sweep should next visit them (the first horizon) |
//! | `P:friends:ID` | set | a user's friends (global, one slot of its own) |
//! | `P:{~B}:followers:ID` | set | the users whose friend set holds ID (a superset: the reverse index erasure uses); `B` is the id's bucket, [`key_names::user_bucket`] |
//! | `P:{~B}:seen:ID` | sorted set | a user's index of spaces: member = a space the user is stored or remembered in (a superset), score = when a writer last marked it (ms) |
//! | `P:{S}:wh` | stream | the webhook outbox of the shard (`{S#k}` for shard k): entries `t` (ms) and `e` (the event's tuple, or `["occupied"]` / `["vacated"]`), consumer group `herenow`; only while the outbox's switch is on, deleted once drained, expiring the keep time after its newest event (see "Webhooks" below) |
//! | `P:{S}:whs` | hash | the stream's `trimmed` count and its consumer's place: `upto` (the last entry handed out), `at` (when, by the store's clock); expires with its stream |
//! | `P:{S}:whown` | hash | the consumer the space's events go to (`owner`) and when it last took some (`at`, ms): in shard 0's slot, one per space, expiring a day after its last write |
//! | `P:{S}:whocc` | hash | a space split over shards: shard → the number of its last occupancy transition (negative: emptied), `n` → shards occupied |
//! | `P:{~outbox}:streams`, `P:{~outbox}:trimmed` | sorted set, string | the tags (`S`, `S#k`) of streams that may hold events (score 0), expiring the keep time after the last capture; and the trimmed count of streams since deleted |
//! | `P:{~outbox}:open`, `P:{~outbox}:keep` | string, string | the outbox's switch: the cap every store captures with, and the keep time (ms); a lease that each server with webhooks renews every tick (`store/switch.rs`) |
//! | `P:{~outbox}:hooksv` | string | the version of every space's endpoints, counted up by each change |
//! | `P:{~outbox}:hooked` | set | the spaces that may name endpoints (a superset: listed by each set, taken off when found cleared) |
//! | `P:migrations` | hash | one-time migrations that have run on this prefix's data → when each finished (ms): `followers` (friend sets written before the reverse index, indexed), `hooked` (spaces that named endpoints before their list, listed) |
//!
//! Each member is stored once, in its kind's sorted set: there is no
//! second index by id (there was one, `P:{S}:iu` / `P:{S}:ig`, which
//! doubled a space's memory). Listing by id (`order=id`) reads the ids of
//! the window's members in bounded slices and sorts them per page: exact,
//! but O(members in the window) per page, so a window holding more than
//! [`RedisOptions::id_order_max`] members (10,000 by default) answers
//! `Error::Unsupported` naming the limit, and `order=recent` (O(page), no
//! limit) is the listing for big spaces. Keys `P:{S}:iu` / `P:{S}:ig` left
//! by earlier versions are no longer read or written; once every server
//! runs this version they can be deleted (`UNLINK`).
//!
//! # Big spaces: shards
//!
//! A space may be split over N shard keys ([`RedisOptions::shards`], or per
//! space [`RedisOptions::space_shards`]; see [`key_names`]): shard 0 is the
//! layout above, `P:{S}:…`, so N = 1 is exactly the unsharded layout;
//! shard k ≥ 1 is the same set of keys under the tag `{S#k}`, in a slot of
//! its own. A member always lives in shard [`key_names::shard_of`] (FNV-1a of
//! kind and id, modulo N) with its metadata and connections; each shard
//! has its own event channel and sequence, watermarks, sweep lease and a
//! copy of the space's policy. Heartbeats and leaves are split per shard
//! and sent together; counts sum the shards; status looks each member up
//! in its shard; most-recent-first pages merge every shard's first
//! `limit + 1` after the cursor in the one total order (score, kind, id),
//! so they stay exact; a subscriber listens to every shard's channel and
//! merges their snapshots. With N > 1, connection ids are kept unique per
//! space by a claim key `P:{S#j}:claim:CONN` (string, the owner `u:ID`,
//! expiring 10 s after the connection's TTL) in the shard the id hashes to.
//!
//! # Remembered last seen
//!
//! When presence ends, the member moves (in the same script, so atomically)
//! from its kind's sorted set to the remembered set of its shard, if the
//! space's policy remembers its kind ([`SpaceConfig::remembers`](herenow_core::SpaceConfig::remembers)):
//! an explicit leave (or the close of its last visible connection, or that
//! connection turning invisible) remembers the leave's own time; expiry at
//! the retention (or a connection that stopped pinging) the last heartbeat.
//! A heartbeat already past the retention is not presence but is
//! remembered if the member is not stored and the time is newer than what
//! is remembered (`ZADD GT`). A member stored again (it comes back) leaves
//! the remembered set: presence answers first. Status reads the remembered
//! time of a member not stored and answers it, `offline`, only while
//! `last_seen + remember_ms` is ahead by the policy read at that moment, so
//! a horizon is kept before any sweep ran and a shortened one applies at
//! once. The sweep forgets remembered times past the horizon in bounded
//! steps (the same budget as expiry). A space that holds nothing else
//! leaves the registry of names (it is not listed and not walked every
//! tick) for `P:{spaces}:due`, visited when its first horizon comes.
//!
//! "Last seen anywhere" and erasure need the spaces a user is in, and the
//! user's keys are in other slots than the spaces', so no script can keep
//! them together. The index `P:{~B}:seen:ID` is kept a superset: the
//! heartbeat (and attach) script adds every user it stores or remembers
//! that was neither stored nor remembered there (a remembered user is
//! indexed already, so a returning user costs nothing more) to the shard's
//! `unidx`, the writer then marks the space in the user's index (one
//! script per bucket on a cluster, a pipeline on one server) and takes the
//! user off `unidx`, and the sweep indexes whatever a writer left in
//! `unidx` (it failed or died in between). An entry is dropped only once
//! nothing of the user is left in the space and its mark is older than ten
//! minutes (a writer that stored the user again since marks it later, and
//! keeps it): by the sweep when it forgets a remembered time, and by a
//! read that finds nothing of the user in a listed space; erasure drops
//! the entries whose mark has not changed since it read them. Users
//! stored by a version before the index are walked into `unidx` once per
//! shard by the sweep (`ZSCAN`, a step per tick: the sorted set, then the
//! remembered set). Guests are not users: they are not indexed.
//!
//! Erasing a user is atomic per slot, not across them: one script per
//! space (the user's shard: presence with a `leave`, metadata,
//! connections, the remembered time, `unidx`), then the index; the user's
//! own friend set and the reverse index; one `SREM` per friend set that
//! lists the user. A call that fails part-way answers the error; calling
//! again finishes the job (each step is idempotent, and the index and the
//! reverse index are emptied last so a retry still finds what is left).
//! It is refused while writes wait in the outage buffer, which could bring
//! the user back. Friend sets written before the reverse index existed are
//! put in it once, by the first store of this version to open
//! ([`RedisStore::connect`] `SCAN`s every master for `P:friends:*`, then
//! records `followers` in `P:migrations`; see `store/migrate.rs`), so
//! erasure finds every set. Sets written after that by a server of an
//! earlier version are not: once none runs, `HDEL P:migrations followers`
//! and the next start indexes them.
//!
//! Online friends read the friend set first and then look the friends up in
//! the space's slot (the friend set and the space live in different slots
//! of a cluster, so no single script can see both); the default
//! `online_friends` / `online_among` methods of the trait do exactly that.
//!
//! # Scripts and events
//!
//! Heartbeats, leaves, listings, snapshots and background work are Lua
//! scripts ([`scripts`]) run with `EVALSHA` and reloaded by themselves after
//! `NOSCRIPT`. Status transitions follow the memory store's watermark
//! design: `tick` advances per-space `away` / `gone` marks in bounded steps
//! and publishes `away` and timeout `leave` events; heartbeats compare a
//! member's old and new score with the marks to choose `join`, `back` or
//! `update`. Events are numbered per space; a subscriber subscribes, then
//! reads its snapshot with the number it reflects, then drops older events
//! ([`events`]). With several stores on one Redis, each space is swept by
//! one of them at a time: the tick script takes or renews the space's lease
//! and does nothing when another store holds it
//! ([`RedisOptions::lease`]).
//!
//! Watchers of a contact list ([`herenow_core::follow`]) hear of the users
//! they watch through each user's channel `P:u:ID` (`follow.rs`): the
//! scripts' shared `publish` also sends each `join`, `away`, `back` and
//! `leave` of a user there, in the same call that made it (so no server can
//! die between the change and its announcement), and friend-set writes and
//! erasure say `friends` there once they are written (a call cut short in
//! between failed, and its retry says it). A store subscribes to the
//! channels of the users it follows, counted (the first follow subscribes,
//! the last unfollow unsubscribes, at most 256 channels a command), so a
//! server receives only what its watchers need. On a cluster these are
//! classic channels, not sharded ones: a script may not `SPUBLISH` outside
//! its slot, while a cluster carries a `PUBLISH` to every node. The price:
//! each status change of a user is one more message, and on a cluster it
//! crosses the cluster bus to every node, followed or not. Heartbeats that
//! change no status publish nothing, so the cost grows with joins, aways,
//! backs and leaves, not with heartbeats, and most on a cluster, where
//! every such message reaches every node.
//! When the link to Redis drops, messages may be lost: the store subscribes
//! again and then every feed lags, so its reader reads the followed users
//! again.
//!
//! Live connections ([`conn_scripts`]) follow the memory engine's rules
//! ([`herenow_core::conn`]): attach and detach are one script each, the
//! visible attach being the member's heartbeat with `join` / `back` /
//! `connect` / `update` chosen as a heartbeat chooses them, and the sweep
//! closes connections past their expiry (its own budget, before the
//! watermarks move) with `disconnect` or a timeout `leave`. A space that
//! holds only connections stays in the registry until they expire. Events
//! a connection caused name it, so every server's subscribers see the
//! connections of every other server.
//!
//! # Webhooks
//!
//! The outbox ([`herenow_core::outbox`]) is the shards' streams,
//! written by the scripts that change presence (their shared `publish`,
//! when the store's outbox is open: a store with it closed runs them
//! unchanged, at no cost), so an event is in Redis if and only if its
//! change is, whichever server made it. Each server claims through one
//! consumer group per stream; a space goes to one consumer at a time,
//! recorded with the injected clock, and a consumer silent for the idle
//! time is taken over: its pending entries are moved (`XAUTOCLAIM`) and
//! handed out again, in order, with the same ids (`TAG/ENTRY-ID`). A
//! server killed mid-delivery loses nothing; what it had delivered but
//! not acknowledged is delivered again (at least once). Each stream keeps
//! at most its share of [`OutboxOptions::max_events`](herenow_core::outbox::OutboxOptions)
//! (the cap over the space's shards, at least one each) and counts what
//! it trims. The servers that deliver keep the outbox's switch on, a
//! lease they renew every tick, and every other store captures while it
//! lasts; once none has renewed it for the keep time (their maximum age
//! of an event, a day by default) capture stops and the streams expire,
//! every event in them too old to deliver (`store/switch.rs`).
//! See [`outbox_scripts`] for the scripts and `store/outbox.rs` for the
//! walk of the index.
//!
//! # Throughput
//!
//! Concurrent heartbeat calls of a space share flushes (`flush.rs`): each
//! call joins the space's queue, and one task per space writes what waits in
//! rounds (up to four in flight at once), merged to one entry per member (newest
//! time, latest metadata), in script calls of at most 1,000 members sent
//! together on the multiplexed client. Each call still learns its own
//! accepted / joined / stale counts: the script reports every entry's
//! outcome, and exactly one call counts a member's `join`. A heartbeat without
//! an explicit time is stamped with its round's time (milliseconds after the
//! call's), so the script takes it as one argument; inside, old scores are
//! read with one `ZMSCORE` and new ones written with one variadic `ZADD` per
//! 250 members, rather than a command per member. A call of more than
//! 1,000 members is several script calls sent together, so a reader may
//! see part of it before the rest.
//!
//! # When Redis fails
//!
//! Heartbeats and leaves that cannot be written (Redis down, slow,
//! restarting, failing over) are accepted into a bounded buffer coalesced
//! per member ([`buffer`]); from the first failure until the buffer is
//! written back, every write goes through it, so each member's writes reach
//! Redis in order. A background task per store pings Redis with a jittered
//! backoff and, once it answers, replays the buffer in bounded batches with
//! the same scripts and the buffered times (newest time still wins).
//! Reads fail with `Unavailable` within the timeout; nothing is ever
//! answered from memory. [`RedisStore::is_ready`] and
//! [`RedisStore::stats`] are for readiness probes and metrics.
//!
//! Redis replicates asynchronously, so a write acknowledged in a master's
//! last moments may be missing on the replica a failover promotes.
//! [`RedisOptions::wait_replicas`] closes that window: heartbeats, leaves
//! and every other write (friend sets, a space's policy and webhooks,
//! erasure, attach and detach) are acknowledged once that many replicas
//! have them (`WAIT`, bounded by
//! [`RedisOptions::wait_timeout`]; see `replicas.rs` for how it stays
//! cheap and never blocks on a master without replicas).
//!
//! Live connections are not buffered: while Redis fails (and until the
//! buffer is written back) `attach` and `detach` answer `Unavailable` at
//! once (the server tells the client, which retries), and a connection
//! whose detach never reached Redis expires at the end of its TTL. A
//! socket's state replayed after an outage would describe sockets that may
//! be long gone.
//!
//! # Where things are
//!
//! In this crate a "connection" is always a live connection of a member
//! (a WebSocket, [`herenow_core::ConnId`]); the socket to Redis is the
//! *client*.
//!
//! - [`client`]: `--store` specs ([`client::RedisNodes`]) and the one
//!   multiplexed [`client::RedisClient`], standalone or cluster.
//! - `reply.rs`: the timeout on every call, how a Redis failure becomes
//!   `Unavailable` (retryable) or `Internal` (a bug), and how script
//!   replies are read; every other module uses it.
//! - [`key_names`]: every key name and the sharding of big spaces.
//! - `options.rs` ([`RedisOptions`]) and `ctx.rs`: the context one store
//!   shares with its write path (client, clock, defaults, options, key
//!   names, and the write buffer's health, [`RedisStats`]).
//! - [`scripts`] (members), [`conn_scripts`] (live connections) and
//!   [`user_scripts`] (store-wide keys: the registry, users' indexes,
//!   friend sets): the Lua scripts, each one atomic call in one slot.
//! - `writer.rs` (heartbeat and leave scripts per shard, the registry
//!   mark), `flush.rs` (coalescing of concurrent heartbeats), [`buffer`]
//!   (the outage buffer) and `replay.rs` (writing it back,
//!   [`PROBE_EVERY`]); `replicas.rs` waits for replicas after writes
//!   ([`RedisOptions::wait_replicas`]).
//! - [`events`]: from pub/sub pushes to subscribers, in sequence.
//! - `store/`: [`RedisStore`]; `mod.rs` is the type and its construction,
//!   `presence.rs` the [`PresenceStore`](herenow_core::PresenceStore)
//!   impl, and one file per job (`write.rs`, `read.rs`, `list.rs`,
//!   `by_id.rs`, `subscribe.rs`, `sweep.rs`, `friends.rs`,
//!   `connections.rs`, `follow.rs`).
//! - [`outbox_scripts`], `outbox.rs` (what a writer does after a script
//!   captured) and `store/outbox.rs` (claims, acknowledgements,
//!   figures): the webhook outbox.
//! - `follow.rs`: users' channels, counted follows and the feeds of
//!   followed users' changes, fed by the client's pushes before the
//!   [`events`] router sees them; `relay.rs`: the channel between the
//!   servers on one Redis ([`herenow_core::Relay`]).
//! - `observe.rs`: how each call to Redis went, told to whoever embeds the
//!   store (the server's metrics).
//! - [`layouts`]: [`SeedLayoutStore`], the seeds' own key layouts, one file
//!   per layout behind one trait.
//!
//! No two modules import each other: shared helpers live in leaves
//! (`reply.rs`, [`key_names`], `ctx.rs`), and the files under `store/` and
//! `layouts/` use only their parent's store type, or none of it.

#![forbid(unsafe_code)]

pub mod buffer;
pub mod client;
pub mod conn_scripts;
mod ctx;
pub mod events;
mod flush;
mod follow;
pub mod key_names;
pub mod layouts;
mod observe;
mod options;
mod outbox;
pub mod outbox_scripts;
mod relay;
mod replay;
mod replicas;
mod reply;
pub mod scripts;
mod store;
pub mod user_scripts;
mod writer;

pub use ctx::RedisStats;
pub use layouts::{KeyTemplate, LayoutOptions, SeedLayout, SeedLayoutStore};
pub use observe::{CallObserver, CallOutcome, Observer};
pub use options::{DEFAULT_WAIT_TIMEOUT, RedisOptions};
pub use replay::PROBE_EVERY;
pub use replicas::RECHECK as REPLICAS_RECHECK;
pub use store::RedisStore;
