//! The Lua of the webhook outbox ([`herenow_core::outbox`]; the Rust side
//! is `outbox.rs` and `store/outbox.rs`): the capture every script that
//! changes presence runs inside its `publish`, and the scripts that claim,
//! acknowledge and count the events.
//!
//! # Capture
//!
//! Every script that changes presence ends in `publish` (see
//! [`crate::scripts`]), whose `cmd` argument is the publish command
//! (`PUBLISH` / `SPUBLISH`) while the store's outbox is closed, so a store
//! without webhooks pays one string length comparison per call that has
//! events, and nothing else. While it is open the argument is `CMD CAP MODE
//! KEEP` (`SPUBLISH 100000 1 86400000`): CAP the most events the shard's
//! stream keeps, MODE `1` for a space of one shard, `2` for a shard of a
//! space split over several, KEEP how long (ms) the stream lives after its
//! newest event (`0`: for ever). `publish` then also `XADD`s each `join`,
//! `away`, `back`, `leave` and `update` (not `connect` / `disconnect`) to
//! the shard's stream `P:{T}:wh`, in the same script as the change, so an
//! event is in the stream if and only if its change happened, whichever
//! server made it and whatever happens to that server next. An entry is `t`
//! (the script's `now`, the injected clock) and `e` (the event's tuple,
//! as published, or `["occupied"]` / `["vacated"]`; a message a server
//! keeps, [`MESSAGE`], is `["message", body]`).
//!
//! The stream is trimmed to CAP after the adds (`XTRIM MAXLEN`, exact),
//! and what was trimmed is added to the `trimmed` field of the stream's
//! state hash `P:{T}:whs`. Then the stream and its state are set to
//! expire KEEP after now (`PEXPIRE`): KEEP is the servers' maximum age
//! of an event, so a stream nothing was added to for that long holds
//! only events no server would deliver, and goes (its events uncounted:
//! no server claimed them to count them) instead of staying for ever.
//!
//! `occupied` / `vacated`: a call's events move the shard's present count
//! one way only (a heartbeat or attach only joins, a leave, detach, erase or
//! sweep only leaves), so the count after the call (members above the gone
//! watermark, both kinds) and the call's joins and leaves give the count
//! before it. With one shard (MODE 1) `occupied` is added before the
//! call's events when the count left 0, `vacated` after them when it came
//! to 0. With several (MODE 2) a shard's keys cannot see the others', so the
//! script only numbers the shard's transition (`whocc` in its state hash)
//! and reports it; the store then runs [`OCCUPY`] on shard 0, which keeps
//! which shards are occupied and adds `occupied` when the first is,
//! `vacated` when the last empties. A transition reported late (another
//! server's) loses to a later one by its number. A server that dies
//! between the two loses that one transition until the shard's next.
//!
//! Each script returns `{added, transition}` (`WH`) as its reply's last
//! element, `{0, 0}` with the outbox closed: the store adds the stream to
//! the index of streams when `added > 0` (a script cannot write outside its
//! slot), and runs [`OCCUPY`] for a transition.
//!
//! # Claims
//!
//! One consumer group, `herenow`, per stream, created by the first claim
//! (from the stream's first entry). A space's events go to one consumer at
//! a time: [`CLAIM_SPACE`] records the owner and when it last took events
//! (the injected clock, never Redis' own idle times) in `P:{S}:whown`;
//! another consumer may take the space only once that is `idle` old (or
//! after the owner acknowledged everything and let go). The owner hash
//! also expires a day (Redis' time) after its last write, so a space
//! nobody claims again leaves nothing behind; an owner silent that long
//! is long past any idle time. [`CLAIM_STREAM`]
//! then reads each of the space's streams for the owner: pending entries
//! of other consumers (a dead owner's) are moved to it with `XAUTOCLAIM …
//! 0` first and handed out again, oldest first, then new ones with
//! `XREADGROUP … >`.

use std::sync::LazyLock;

use redis::Script;

/// The capture, part of [`crate::scripts::PRELUDE`], before `publish`
/// (which calls `wh_capture` when its command says the outbox is open).
/// `WH` is what the script reports: events added, shard transition.
pub(crate) const CAPTURE: &str = r#"
local WH = {0, 0}
local WH_KINDS = {join = true, away = true, back = true, leave = true, update = true}
-- Members of the shard above the gone watermark, both kinds: `base` is
-- the shard's key prefix `P:{T}:`. A shard without watermarks yet stores
-- nobody who could be gone.
local function wh_present(base, state)
  local v = redis.call('HMGET', state, 'gsu', 'gmu', 'gsg', 'gmg')
  local n = 0
  for i, k in ipairs({'u', 'g'}) do
    local z = base .. k
    local c = redis.call('ZCARD', z)
    if c > 0 and v[2 * i - 1] then c = c - count_le(z, tonumber(v[2 * i - 1]), v[2 * i]) end
    n = n + c
  end
  return n
end
local function wh_add(stream, what)
  redis.call('XADD', stream, '*', 't', ARGV[1], 'e', what)
end
-- `spec` is `CMD CAP MODE KEEP`; `enc` the events' encoded tuples.
local function wh_capture(spec, state, chan, ev, enc)
  local cap, mode, keep = string.match(spec, ' (%d+) (%d) (%d+)$')
  local base = string.sub(chan, 1, #chan - 6)
  local stream = base .. 'wh'
  local joins, leaves = 0, 0
  for _, e in ipairs(ev) do
    if e[1] == 'join' then joins = joins + 1 elseif e[1] == 'leave' then leaves = leaves + 1 end
  end
  local shift = 0
  if joins > 0 or leaves > 0 then
    local after = wh_present(base, state)
    local before = after - joins + leaves
    if before <= 0 and after > 0 then shift = 1 elseif before > 0 and after <= 0 then shift = -1 end
  end
  local n = 0
  if shift == 1 and mode == '1' then
    wh_add(stream, '["occupied"]')
    n = n + 1
  end
  for i, e in ipairs(ev) do
    if WH_KINDS[e[1]] then
      wh_add(stream, enc[i])
      n = n + 1
    end
  end
  if shift == -1 and mode == '1' then
    wh_add(stream, '["vacated"]')
    n = n + 1
  end
  if n > 0 then
    local cut = redis.call('XTRIM', stream, 'MAXLEN', cap)
    if cut > 0 then redis.call('HINCRBY', base .. 'whs', 'trimmed', cut) end
    if keep ~= '0' then
      redis.call('PEXPIRE', stream, keep)
      redis.call('PEXPIRE', base .. 'whs', keep)
    end
    WH[1] = WH[1] + n
  end
  if shift ~= 0 and mode == '2' then
    WH[2] = shift * redis.call('HINCRBY', state, 'whocc', 1)
  end
end
"#;

/// Turns the outbox's switch on, or renews it, for `lease` ms. KEYS: the
/// switch (the cap), the keep key (ms). ARGV: cap, keep, lease, `nx`
/// (`1`: only where no switch is on; one on already keeps its values).
/// Returns 1 when it wrote.
pub static RENEW_SWITCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
"#,
    )
});

/// Reads the outbox's switch. KEYS: the switch, the keep key. ARGV: the
/// lease to give a switch that has none (one an earlier version set, which
/// would keep every store capturing for ever). Returns `{cap|false,
/// keep|false}`.
pub static READ_SWITCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local v = redis.call('MGET', KEYS[1], KEYS[2])
if v[1] and redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return v
"#,
    )
});

/// The consumer group of every outbox stream.
pub(crate) const GROUP: &str = "herenow";

/// Records a shard's transition for a space split over several shards
/// and adds `occupied` / `vacated` to shard 0's stream when the space's
/// first shard fills or its last empties. KEYS: occupancy, shard 0's
/// stream, its state hash. ARGV: now, cap, shard, the transition (its
/// number, negative when the shard emptied), keep (ms, `0` for ever: how
/// long the stream lives after its newest event, as in the capture).
/// Returns how many events it added (0 or 1).
///
/// Trimming keeps the newest events, and the space's event comes first
/// among those of its millisecond (with one shard it is added before the
/// call's joins): so when shard 0's stream is full and its oldest entry
/// is no older than the transition, the space's event is the one trimmed
/// (counted, not added) rather than a member's event of the same moment. A transition numbered at or below the shard's last one
/// is stale (reported late) and ignored.
pub static OCCUPY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local k, s = ARGV[3], tonumber(ARGV[4])
local prev = tonumber(redis.call('HGET', KEYS[1], k) or '0')
if math.abs(prev) >= math.abs(s) then return 0 end
redis.call('HSET', KEYS[1], k, ARGV[4])
local was, is = prev > 0, s > 0
if was == is then return 0 end
local d = -1
if is then d = 1 end
local n = redis.call('HINCRBY', KEYS[1], 'n', d)
local what
if is and n == 1 then what = '["occupied"]' elseif not is and n == 0 then what = '["vacated"]' end
if not what then return 0 end
if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[2]) then
  local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
  if first and tonumber(first[2][2]) >= tonumber(ARGV[1]) then
    redis.call('HINCRBY', KEYS[3], 'trimmed', 1)
    return 0
  end
end
redis.call('XADD', KEYS[2], '*', 't', ARGV[1], 'e', what)
local cut = redis.call('XTRIM', KEYS[2], 'MAXLEN', ARGV[2])
if cut > 0 then redis.call('HINCRBY', KEYS[3], 'trimmed', cut) end
if ARGV[5] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return 1
"#,
    )
});

/// Keeps a message in a shard's stream (shard 0 of its space), trimmed
/// and set to expire as the capture does. KEYS: the stream, its state
/// hash. ARGV: now, cap, keep (ms, `0` for ever), the entry
/// (`["message", body]`). Returns 1.
pub static MESSAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
redis.call('XADD', KEYS[1], '*', 't', ARGV[1], 'e', ARGV[4])
local cut = redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[2])
if cut > 0 then redis.call('HINCRBY', KEYS[2], 'trimmed', cut) end
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
"#,
    )
});

/// Whether a consumer may take a space's events now. KEYS: the space's
/// owner hash. ARGV: consumer, now, idle (ms). Returns `-1` when another
/// consumer took events less than `idle` ago (busy), `0` when the
/// consumer owns the space already, `1` when it takes it now (free, or
/// its owner idle): then it is the owner, since now.
pub static CLAIM_SPACE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local o = redis.call('HMGET', KEYS[1], 'owner', 'at')
if o[1] == ARGV[1] then return 0 end
if o[1] and tonumber(ARGV[2]) - tonumber(o[2]) < tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'at', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 86400000)
return 1
"#,
    )
});

/// The owner took events at `now` (KEYS: the owner hash; ARGV: consumer,
/// now), or gives the space back having taken none (ARGV: consumer, `''`).
/// Either only if the consumer still owns it.
pub static TOUCH_SPACE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'at', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], 86400000)
end
return 1
"#,
    )
});

/// Hands a consumer (the space's owner, by [`CLAIM_SPACE`]) up to `max`
/// events of one stream. KEYS: stream, its state hash (and, for a space
/// of one shard, its owner hash). ARGV: consumer, now, idle (ms), max,
/// group.
///
/// Pending entries of other consumers (the space changed hands) are moved
/// to this one (`XAUTOCLAIM` with min-idle 0: the owner's clock decided)
/// and handed out again from the first; its own pending entries are in
/// its hands (it is claiming, so alive) and are not handed out twice. Then
/// what it has not been handed
/// (`upto`, the last id handed), then new entries. Entries trimmed while
/// pending are acknowledged away.
///
/// A space of one shard needs no [`CLAIM_SPACE`] and [`TOUCH_SPACE`]
/// around it: its owner hash shares the stream's slot, so it comes as a
/// third key and this script does both (one round trip per space): it
/// answers `{2, 0}` while another consumer owns the space, and records the
/// consumer as owner, since now, when it hands anything out.
///
/// Returns `{0, 0, id, t, e, …}`, or `{1, trimmed}` when the stream is
/// drained: no entries, none pending. It is deleted then (with its state
/// and group; its trimmed count is the caller's to keep), so drained
/// spaces leave nothing behind.
pub static CLAIM_STREAM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local me, now, idle, max, g = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
if KEYS[3] then
  local o = redis.call('HMGET', KEYS[3], 'owner', 'at')
  if o[1] and o[1] ~= me and now - tonumber(o[2]) < idle then return {2, 0} end
  -- The owner is claiming, so it is alive: its hold is fresh, even while
  -- its events wait on a slow endpoint and it takes nothing new.
  if o[1] == me then redis.call('HSET', KEYS[3], 'at', ARGV[2]) end
end
local function drained()
  local t = redis.call('HGET', KEYS[2], 'trimmed') or '0'
  redis.call('DEL', KEYS[1], KEYS[2])
  return {1, t}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return drained() end
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], g)
if not ok then
  redis.call('XGROUP', 'CREATE', KEYS[1], g, '0')
  p = {0}
end
local pend = tonumber(p[1])
local st = redis.call('HMGET', KEYS[2], 'upto', 'at')
local upto = st[1] or '0-0'
if pend > 0 then
  local others = false
  for _, c in ipairs(p[4]) do
    if c[1] ~= me then others = true end
  end
  if others then
    local cur = '0-0'
    repeat
      cur = redis.call('XAUTOCLAIM', KEYS[1], g, me, 0, cur, 'COUNT', 1000, 'JUSTID')[1]
    until cur == '0-0'
    upto = '0-0'
  end
end
local out = {0, 0}
local n, last = max, nil
local function take(r)
  if not r then return end
  for _, x in ipairs(r[1][2]) do
    last = x[1]
    if x[2] then
      local f = x[2]
      local t, e = f[2], f[4]
      if f[1] ~= 't' then t, e = f[4], f[2] end
      out[#out + 1] = x[1]
      out[#out + 1] = t
      out[#out + 1] = e
      n = n - 1
    else
      redis.call('XACK', KEYS[1], g, x[1])
    end
  end
end
if pend > 0 then
  take(redis.call('XREADGROUP', 'GROUP', g, me, 'COUNT', n, 'STREAMS', KEYS[1], upto))
end
if n > 0 then
  take(redis.call('XREADGROUP', 'GROUP', g, me, 'COUNT', n, 'STREAMS', KEYS[1], '>'))
end
if last then
  redis.call('HSET', KEYS[2], 'upto', last, 'at', ARGV[2])
  -- The state lives as long as its stream (which expires after its
  -- newest event when the capture says so).
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  if KEYS[3] then
    redis.call('HSET', KEYS[3], 'owner', me, 'at', ARGV[2])
    redis.call('PEXPIRE', KEYS[3], 86400000)
  end
elseif redis.call('XLEN', KEYS[1]) == 0 and tonumber(redis.call('XPENDING', KEYS[1], g)[1]) == 0 then
  return drained()
end
return out
"#,
    )
});

/// Acknowledges delivered entries of one stream and deletes them. KEYS:
/// stream. ARGV: group, ids. Returns `{pending_left, holder|false}`:
/// the entries still pending, and the consumer that held the first of
/// these ids (the one that may now give the space back).
pub static ACK_STREAM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, false} end
local g = ARGV[1]
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], g, ARGV[2], ARGV[2], 1)
if not ok then return {0, false} end
local holder = false
if p[1] then holder = p[1][2] end
for i = 2, #ARGV, 500 do
  local e = i + 499
  if e > #ARGV then e = #ARGV end
  redis.call('XACK', KEYS[1], g, unpack(ARGV, i, e))
  redis.call('XDEL', KEYS[1], unpack(ARGV, i, e))
end
return {tonumber(redis.call('XPENDING', KEYS[1], g)[1]), holder}
"#,
    )
});

/// One stream's numbers. KEYS: stream, its state hash. ARGV: group.
/// Returns `{entries, pending, trimmed}`.
pub static STREAM_STATS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local len = redis.call('XLEN', KEYS[1])
local pend = 0
if len > 0 or redis.call('EXISTS', KEYS[1]) == 1 then
  local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])
  if ok then pend = tonumber(p[1]) end
end
return {len, pend, tonumber(redis.call('HGET', KEYS[2], 'trimmed') or '0')}
"#,
    )
});

#[cfg(test)]
mod tests {
    use super::*;

    /// The capture finds the stream from the channel's name: the shard's
    /// prefix is the channel without its last word.
    #[test]
    fn the_channel_ends_in_events() {
        assert!(CAPTURE.contains("string.sub(chan, 1, #chan - 6)"));
        assert_eq!("events".len(), 6);
        let shas = [
            OCCUPY.get_hash(),
            CLAIM_SPACE.get_hash(),
            TOUCH_SPACE.get_hash(),
            CLAIM_STREAM.get_hash(),
            ACK_STREAM.get_hash(),
            STREAM_STATS.get_hash(),
            RENEW_SWITCH.get_hash(),
            READ_SWITCH.get_hash(),
        ];
        for (i, a) in shas.iter().enumerate() {
            for b in &shas[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
