//! The Lua scripts: every multi-step operation on a space runs as one
//! script, so it is atomic and costs one round trip; its keys share one
//! hash tag, so it runs on one node (see the crate's key layout).
//!
//! Each script is `PRELUDE` followed by its body. [`redis::Script`] sends
//! `EVALSHA` and falls back to `EVAL` when the server answers `NOSCRIPT`
//! (after a restart or a `SCRIPT FLUSH`), so scripts are loaded once and
//! reloaded by themselves.
//!
//! Conventions shared with the Rust side:
//!
//! - "The six defaults" are the policy of a space that has none of its
//!   own: online, away, window, retention, remember (ms) and whether
//!   guests are remembered (`0`/`1`), read by `cfg_load` from the ARGV
//!   index each script names.
//! - Numbers that reach Redis or the reply are formatted with `%d` by `S()`:
//!   Redis formats Lua numbers with its own float rules otherwise, and
//!   millisecond times must stay exact integers.
//! - Watermarks are `(score, member)` pairs; member `''` means "every member
//!   at that score". Ties at one score are compared bytewise by `blt`, never
//!   with Lua's `<` (which follows the server's locale).
//! - Event tuples, JSON-encoded in one message per script call:
//!   `[type, kind, id, last_seen, presence, reason, meta|false, seq]` where
//!   presence is 0 gone, 1 away, 2 online; events a live connection caused
//!   add a ninth element, the connection id ([`crate::conn_scripts`]).
//!   A user's `join`, `away`, `back` and `leave` also go, one message
//!   each, to the user's channel (`publish`, see `follow.rs`).
//! - The command argument of `publish` also carries the webhook outbox's
//!   switch, and every script that publishes answers `outbox` as its
//!   reply's last element ([`crate::outbox_scripts`]).
//!
//! The Lua is in `src/lua/`, one file per script (named after its
//! constant), included at build time. The scripts of live connections,
//! which add their own conventions, are [`crate::conn_scripts`]; those of
//! the store-wide keys (the space registry, users' indexes, friend sets)
//! are [`crate::user_scripts`].

use std::sync::LazyLock;

use redis::Script;

/// Helpers every script starts with (`lua/helpers.lua`), the outbox's
/// capture (`lua/capture.lua`), then `publish` (`lua/publish.lua`, see the
/// conventions above).
pub(crate) const PRELUDE: &str = concat!(
    "\n",
    include_str!("lua/helpers.lua"),
    "\n",
    include_str!("lua/capture.lua"),
    "\n",
    include_str!("lua/publish.lua"),
);

/// A script: [`PRELUDE`], then `body`.
pub(crate) fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n\n{body}"))
}

/// A script without the prelude. Its text starts with a newline, as every
/// script's did when it was a Rust string, so its SHA is unchanged.
pub(crate) fn bare(lua: &str) -> Script {
    Script::new(&format!("\n{lua}"))
}

/// Heartbeats. KEYS: zu zg meta state config ru rg unidx. ARGV: now, the
/// six defaults, publish command, channel, the number of users `nu` and of
/// guests `ng`, then the `nu` user ids and the `ng` guest ids (one entry
/// per member: the caller coalesces), then `pos at meta` for each entry
/// whose time is not `now` or that brings metadata (`pos` its 1-based
/// place among the ids, meta `''` keeps the member's). Returns `{accepted,
/// joined, stale, outcomes, new_users, outbox}`, outcomes one byte per
/// entry in the order of the ids: `0` accepted, `1` accepted and joined,
/// `2` stale (so a caller that merged several requests into one call can
/// tell each its own answer).
///
/// Remembered last seen: a member stored anew (not in its kind's sorted
/// set before) is dropped from the remembered set (presence answers
/// first); a heartbeat already past the retention is stale, but remembered
/// if the member is not stored and the time is within the horizon (never
/// moving a remembered time back). Users stored or remembered anew (not
/// remembered before: a remembered user is in its index already) are
/// added to `unidx` and returned in `new_users`, for the caller to index
/// (see the crate's "Remembered last seen").
///
/// Per member it reads the old score and writes the new one, as seed
/// 001's `ZADD` does, in bulk: for each chunk of 250 members of a kind,
/// one `ZMSCORE` and then one variadic `ZADD` (while the members are
/// still in the CPU's cache); one `HMGET` for the members that
/// bring metadata and one `HSET` for those whose metadata changed. The
/// common heartbeat (now, no metadata) is one argument, and its score the
/// one string `now`. The old score decides `join` / `back` / `update`
/// against the watermarks.
pub static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/heartbeat.lua")));

/// Explicit leave. KEYS: zu zg meta state config ru rg. ARGV: now, the six
/// defaults, publish command, channel, then `kind id upto` triples: `upto`
/// empty removes the member whatever its time; a time removes it only if
/// its last heartbeat is at or before it (a leave replayed from the write
/// buffer must not remove a newer heartbeat). Returns `{present,
/// outbox}`, `present` how many were present.
///
/// A member that was present is remembered as last seen at the leave's
/// own time (`upto` for a replayed leave, else `now`; never before its last
/// heartbeat); one stored but no longer present (timed out, not yet
/// expired) at its last heartbeat.
pub static LEAVE: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/leave.lua")));

/// One bounded step of background work on a space: advance the away and
/// gone watermarks (emitting `away` and timeout `leave`), then forget
/// members past their retention (remembering them as last seen at their
/// last heartbeat), then forget remembered times past the horizon (or of a
/// kind the policy no longer remembers). KEYS: those of every connection
/// script (see [`crate::conn_scripts`]; it reads `zu zg meta state config
/// lease ru rg unidx`). ARGV: now, the six defaults, publish command,
/// channel, budget (members), lease owner, lease duration (ms).
///
/// It also walks, one `ZSCAN` step per call, the users a shard stored
/// before users' spaces were indexed (the sorted set, then the remembered
/// set) into `unidx`, once: the state hash's `ix` field says where it is
/// (`done` for a shard first written by an indexing version).
///
/// Only the holder of the space's sweep lease works: the script takes the
/// lease if it is free (`SET NX PX`), renews it if the caller holds it, and
/// otherwise returns `{0, 0, 0, -1}` without touching anything. The lease
/// expires by itself when its holder stops sweeping.
/// Returns `{expired, transitions, more, left, 0, forgotten, remembered,
/// due, unindexed, trimmed, outbox}`: `left` the members stored plus the users
/// waiting in `unidx`, `forgotten` how many remembered times (users' and
/// guests') this call forgot (`TickReport::forgotten`), `remembered` the
/// members of the remembered sets, `due` when the first of them passes
/// the horizon (-1: none), `unindexed` the size of `unidx`, `trimmed` the
/// users whose remembered time this call forgot (so the caller can drop
/// the space from their index).
pub static TICK: LazyLock<Script> = LazyLock::new(|| script(TICK_BODY));

/// The body of [`TICK`], also run by [`SWEEP`](crate::conn_scripts::SWEEP)
/// (which the store uses) after it has closed expired connections.
pub(crate) const TICK_BODY: &str = include_str!("lua/tick.lua");

/// A subscriber's snapshot: the event sequence number and the members
/// present by the watermarks. KEYS: zu zg meta state config. ARGV: now, the
/// six defaults, the most members per kind. Returns `{seq, present_u,
/// present_g, items_u, items_g}`, items oldest first as flat
/// `id, score, presence, meta` groups.
pub static SNAPSHOT: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/snapshot.lua")));

/// Last seen and metadata of members, and the remembered time of those
/// not stored. KEYS: zu zg meta config ru rg. ARGV: the six defaults, then
/// `kind id` pairs. Returns `{online, away, window, retention, remember,
/// remember_guests (0/1), score|false, meta|false, remembered|false,
/// ...}`. The horizon is checked by the caller (it has the policy and the
/// time), so the raw remembered time also tells it whether the space
/// holds anything of the member.
pub static STATUS: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/status.lua")));

/// Window counts. KEYS: zu zg config. ARGV: the six defaults, now, window
/// (0: the space's). Returns `{users, guests}` or `{-1, retention}` for a
/// window out of range.
pub static COUNT: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/count.lua")));

/// One page, most recent first, per kind. KEYS: zu zg meta config. ARGV:
/// the six defaults, now, window (0: the space's), limit, kinds (`u`, `g`
/// or `a`), then the cursor `score kind id` or three `''`. The merged order
/// is (score, kind, id) descending with users above guests at equal
/// scores. Returns `{0, online, away, window, retention, items_u,
/// items_g}` with up to limit+1 items per kind after the cursor, newest
/// first, as flat `id, score, meta` groups; `{-1, retention}` for a bad
/// window.
pub static LIST_RECENT: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/list_recent.lua")));

/// One slice of a kind's members in the window, for listing by id
/// (`RedisStore::list` with `order=id`; there is no index by id, see the crate
/// documentation). KEYS: z config. ARGV: the six defaults, now, window (0:
/// the space's), then the scan cursor `score member` (two `''` for the
/// first slice: start at the window's edge), and the most members to
/// return. Members come in ascending (score, member) order strictly after
/// the cursor, so a scan that resumes from the last member it read misses
/// nobody whose time only grows (heartbeats never lower a score). Only
/// ids: formatting every score costs more than reading the members.
/// Returns `{0, in_window, last_score, ids}` with `in_window` the members
/// in the window (first slice only, else -1) and `last_score` the score of
/// the last id (`''` if none); `{-1, retention}` for a bad window.
pub static ID_SLICE: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/id_slice.lua")));

/// Sets a space's policy and moves its watermarks to the new thresholds
/// without events (as the memory store does). KEYS: state config. ARGV:
/// now, online, away, window, retention, remember, remember guests (0/1),
/// grace.
/// Remembered times are not touched: reads apply the new horizon at once,
/// and the sweep trims by it.
pub static SET_CONFIG: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/set_config.lua")));
