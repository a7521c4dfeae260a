//! The Lua scripts over store-wide keys rather than one space: the
//! registry of spaces and the due list of the sweep, users' indexes of the
//! spaces they were seen in ("last seen anywhere", erasure), and friend
//! sets with their reverse index. Each is [`crate::scripts`]'s `PRELUDE`
//! plus its body, like the space scripts, whose conventions they share.

use std::sync::LazyLock;

use redis::Script;

use crate::scripts::script;

/// Marks a space in the registry and records its shard count (see
/// [`crate::key_names`]). KEYS: names touched shards. ARGV: space, now, shard
/// count. Returns 1, or `-recorded` (nothing marked) when the space is
/// recorded with another shard count.
pub static REGISTER: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/register.lua")));

/// Drops a space from the registry (and its shard count, unless `keep`)
/// unless it was touched since `cutoff` (or is not registered). KEYS:
/// names touched shards. ARGV: space, cutoff, keep (`1` while the space
/// still remembers members: their shard must not change). Returns 1 if
/// dropped.
pub static UNREGISTER: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/unregister.lua")));

/// Drops a space from the registry of remembered times (`due`) once
/// nothing is remembered in it, unless another sweep rescheduled it since
/// it was read; then its shard count too, unless the space is registered
/// again. KEYS: names due shards. ARGV: space, the `due` score read.
/// Returns 1 if dropped.
pub static DUE_DONE: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/due_done.lua")));

/// Marks a space in users' indexes of spaces. KEYS: the indexes (of one
/// bucket, see [`crate::key_names::user_bucket`]). ARGV: mark (ms), space.
pub static INDEX: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/index.lua")));

/// Drops a space from users' indexes of spaces where its mark is at or
/// before `upto` (a writer that stored the user there since marked it
/// later, and keeps it). KEYS: the indexes (of one bucket). ARGV: space,
/// upto (ms). Returns how many dropped it.
pub static UNINDEX: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/unindex.lua")));

/// Reads users' indexes of spaces. KEYS: the indexes (of one bucket).
/// Returns one flat `space, mark` array per key.
pub static READ_INDEXES: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/read_indexes.lua")));

/// Adds a user to (`SADD`) or removes it from (`SREM`) the followers of
/// several users. KEYS: their followers sets (of one bucket). ARGV:
/// command, user.
pub static FOLLOW: LazyLock<Script> = LazyLock::new(|| script(include_str!("lua/follow.lua")));

/// Replaces a friend set. KEYS: the set. ARGV: friends. Returns `{size,
/// removed, added}`: the friends the set no longer has and those it did
/// not have, so the caller can keep the reverse index (`followers`) right.
pub static SET_FRIENDS: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/set_friends.lua")));

/// Adds to a friend set unless it would pass the limit. KEYS: the set.
/// ARGV: limit, friends (distinct). Returns the new size, or `-(size it
/// would have had)` when refused.
pub static ADD_FRIENDS: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/add_friends.lua")));

/// Removes from a friend set. KEYS: the set. ARGV: friends. Returns the new
/// size.
pub static REMOVE_FRIENDS: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("lua/remove_friends.lua")));
