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
pub static REGISTER: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local rec = redis.call('HGET', KEYS[3], ARGV[1])
if rec and rec ~= ARGV[3] then return -tonumber(rec) end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
if not rec then redis.call('HSET', KEYS[3], ARGV[1], ARGV[3]) end
return 1
"#,
    )
});

/// Drops a space from the registry (and its shard count, unless `keep`)
/// unless it was touched since `cutoff` (or is not registered). KEYS: names touched shards. ARGV:
/// space, cutoff, keep (`1` while the space still remembers members: their
/// shard must not change). Returns 1 if dropped.
pub static UNREGISTER: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local t = redis.call('ZSCORE', KEYS[2], ARGV[1])
if t and tonumber(t) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[3] ~= '1' then redis.call('HDEL', KEYS[3], ARGV[1]) end
return 1
"#,
    )
});

/// Drops a space from the registry of remembered times (`due`) once
/// nothing is remembered in it, unless another sweep rescheduled it since
/// it was read; then its shard count too, unless the space is registered
/// again. KEYS: names due shards. ARGV: space, the `due` score read.
/// Returns 1 if dropped.
pub static DUE_DONE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local d = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not d or tonumber(d) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then redis.call('HDEL', KEYS[3], ARGV[1]) end
return 1
"#,
    )
});

/// Marks a space in users' indexes of spaces. KEYS: the indexes (of one
/// bucket, see [`crate::key_names::user_bucket`]). ARGV: mark (ms), space.
pub static INDEX: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
for i = 1, #KEYS do redis.call('ZADD', KEYS[i], ARGV[1], ARGV[2]) end
return #KEYS
"#,
    )
});

/// Drops a space from users' indexes of spaces where its mark is at or
/// before `upto` (a writer that stored the user there since marked it
/// later, and keeps it). KEYS: the indexes (of one bucket). ARGV: space,
/// upto (ms). Returns how many dropped it.
pub static UNINDEX: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local n = 0
for i = 1, #KEYS do
  local s = redis.call('ZSCORE', KEYS[i], ARGV[1])
  if s and tonumber(s) <= tonumber(ARGV[2]) then n = n + redis.call('ZREM', KEYS[i], ARGV[1]) end
end
return n
"#,
    )
});

/// Reads users' indexes of spaces. KEYS: the indexes (of one bucket).
/// Returns one flat `space, mark` array per key.
pub static READ_INDEXES: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local out = {}
for i = 1, #KEYS do out[i] = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES') end
return out
"#,
    )
});

/// Adds a user to (`SADD`) or removes it from (`SREM`) the followers of
/// several users. KEYS: their followers sets (of one bucket). ARGV:
/// command, user.
pub static FOLLOW: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
for i = 1, #KEYS do redis.call(ARGV[1], KEYS[i], ARGV[2]) end
return #KEYS
"#,
    )
});

/// Replaces a friend set. KEYS: the set. ARGV: friends. Returns `{size,
/// removed, added}`: the friends the set no longer has and those it did
/// not have, so the caller can keep the reverse index (`followers`) right.
pub static SET_FRIENDS: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local new = {}
for i = 1, #ARGV do new[ARGV[i]] = true end
local old = {}
local removed, added = {}, {}
for _, f in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  old[f] = true
  if not new[f] then removed[#removed + 1] = f end
end
for i = 1, #ARGV do
  if not old[ARGV[i]] then added[#added + 1] = ARGV[i] end
end
redis.call('DEL', KEYS[1])
for i = 1, #ARGV, 500 do
  local j = i + 499
  if j > #ARGV then j = #ARGV end
  redis.call('SADD', KEYS[1], unpack(ARGV, i, j))
end
return {redis.call('SCARD', KEYS[1]), removed, added}
"#,
    )
});

/// Adds to a friend set unless it would pass the limit. KEYS: the set.
/// ARGV: limit, friends (distinct). Returns the new size, or `-(size it
/// would have had)` when refused.
pub static ADD_FRIENDS: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local limit = tonumber(ARGV[1])
local n = redis.call('SCARD', KEYS[1])
for i = 2, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 0 then n = n + 1 end
end
if n > limit then return -n end
for i = 2, #ARGV, 500 do
  local j = i + 499
  if j > #ARGV then j = #ARGV end
  redis.call('SADD', KEYS[1], unpack(ARGV, i, j))
end
return redis.call('SCARD', KEYS[1])
"#,
    )
});

/// Removes from a friend set. KEYS: the set. ARGV: friends. Returns the new
/// size.
pub static REMOVE_FRIENDS: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
for i = 1, #ARGV, 500 do
  local j = i + 499
  if j > #ARGV then j = #ARGV end
  redis.call('SREM', KEYS[1], unpack(ARGV, i, j))
end
return redis.call('SCARD', KEYS[1])
"#,
    )
});
