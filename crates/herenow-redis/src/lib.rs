//! herenow-redis: the [`PresenceStore`](herenow_core::PresenceStore) on Redis
//! and Redis Cluster — the scale-out path, where herenow servers hold no
//! presence state of their own and any number of them share one Redis.
//!
//! Build it with [`RedisStore::connect`] from a spec (one server, or a
//! cluster's seed nodes). Every command runs under a timeout
//! ([`RedisOptions::timeout`]) and every failure to reach Redis is
//! [`Error::Unavailable`](herenow_core::Error): the store never hangs and never falls back to memory. "Now" comes from
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
//! | `P:{S}:cinfo` | hash | connection id → `F K ID \n META`: visible (`0`), invisible (`1`) or lingering (`2`), the member's kind and id, the connection's metadata |
//! | `P:{S}:mconn` | hash | `u:ID` / `g:ID` → that member's connections, space-separated, each `F` then the id (at most 64) |
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
//! | `P:{~outbox}:open`, `P:{~outbox}:keep` | string, string | the outbox's switch: the cap every store captures with, and the keep time (ms); a lease that each server with webhooks renews every tick (`store/outbox_lease.rs`) |
//! | `P:{~outbox}:hooksv` | string | the version of every space's endpoints, counted up by each change |
//! | `P:{~outbox}:hooked` | set | the spaces that may name endpoints (a superset: listed by each set, taken off when found cleared) |
//! | `P:migrations` | hash | one-time migrations that have run on this prefix's data → when each finished (ms): `followers` (friend sets written before the reverse index, indexed), `hooked` (spaces that named endpoints before their list, listed) |
//!
//! Each member is stored once, in its kind's sorted set: there is no index
//! by id (listing by id: `store/by_id.rs`, bounded by
//! [`RedisOptions::id_order_max`]). Keys `P:{S}:iu` / `P:{S}:ig` of earlier versions are not read
//! or written; once every server runs this version they can be `UNLINK`ed.
//!
//! A big space may be split over shards, each a copy of the layout above
//! under its own tag: see [`key_names`].
//!
//! # Remembered last seen
//!
//! When presence ends, the member moves (in the same script) from its
//! kind's sorted set to the remembered set of its shard, if the space's
//! policy remembers its kind ([`SpaceConfig::remembers`](herenow_core::SpaceConfig::remembers));
//! each script's documentation says at which time. Status answers a
//! remembered time only while `last_seen + remember_ms` is ahead by the
//! policy read at that moment, so a shortened horizon applies at once; the
//! sweep forgets what is past it in bounded steps. A space that holds
//! nothing else leaves the registry of names for `P:{spaces}:due`, visited
//! when its first horizon comes.
//!
//! "Last seen anywhere" and erasure need the spaces a user is in, which
//! live in other slots than the user's keys, so no script keeps them
//! together: the index `P:{~B}:seen:ID` is kept a superset through each
//! shard's `unidx` (scripts list the users they store or remember anew,
//! the writer indexes them and takes them off, the sweep finishes what a
//! writer left). See `store/seen_anywhere.rs` for the index's rules and
//! erasure, and `store/migrate.rs` for the one-time migrations recorded in
//! `P:migrations`. Guests are not users: they are not indexed.
//!
//! # Where the rest is
//!
//! ARCHITECTURE.md maps the modules. Scripts and their conventions:
//! [`scripts`], [`conn_scripts`] (live connections), [`user_scripts`],
//! [`outbox_scripts`] (the webhook outbox); events in sequence: [`events`];
//! users' channels: `follow.rs`; coalesced heartbeats: `flush.rs`; the
//! outage buffer: [`buffer`] and `replay.rs`; waiting for replicas:
//! `replicas.rs`; the client and its calls: `client.rs`, `reply.rs` (the
//! timeout, failures classified) and `observe.rs` (each call told to the
//! embedder); `options.rs` ([`RedisOptions`]) and `ctx.rs` (what a store
//! shares with its write path); relayed messages: `relay.rs`; the seeds'
//! key layouts: [`layouts`]; the store itself: `store/` (the trait's
//! operations, one file per concern), `writer.rs` (heartbeats and leaves per
//! shard) and `outbox.rs` (what a store does after a script captured
//! webhook events). Each space is swept
//! by one store at a time, under a lease
//! ([`RedisOptions::lease`]). Live connections are not buffered while
//! Redis fails (`store/connections.rs` says why).
//!
//! In this crate a "connection" is always a live connection of a member
//! (a WebSocket, [`herenow_core::ConnId`]); the socket to Redis is the
//! *client*.

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
