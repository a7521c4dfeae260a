//! The Lua scripts: every multi-step operation on a space runs as one
//! script, so it is atomic and costs one round trip. All keys a script
//! touches share the space's hash tag (the shard's, for a space split over
//! shards: see [`crate::key_names`]), so every script runs on one node of a
//! cluster.
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
//! - The command argument of `publish` also says whether the store's
//!   webhook outbox is open; then `publish` adds the events to the shard's
//!   stream too, and every script that publishes answers `outbox`, `{added,
//!   transition}`, as its reply's last element ([`crate::outbox_scripts`]).
//!
//! One file on purpose, though it passes 800 lines: it is Lua text, one
//! constant per script and no Rust logic, and every script is `PRELUDE`
//! plus a body written against the conventions above, so a change to one
//! convention is checked by reading all of them side by side. The scripts
//! of live connections, which add their own conventions, are
//! [`crate::conn_scripts`]; those of the store-wide keys (the space
//! registry, users' indexes, friend sets) are [`crate::user_scripts`].

use std::sync::LazyLock;

use redis::Script;

use crate::outbox_scripts::CAPTURE;

/// Helpers every script starts with: [`HELPERS`], the outbox's capture
/// ([`crate::outbox_scripts::CAPTURE`]), then `publish`.
pub(crate) static PRELUDE: LazyLock<String> =
    LazyLock::new(|| format!("{HELPERS}{CAPTURE}{PUBLISH}"));

/// The prelude's helpers before the capture and `publish`.
const HELPERS: &str = r#"
local function S(n) return string.format('%d', n) end
local function blt(a, b)
  local la, lb = #a, #b
  local n = la
  if lb < n then n = lb end
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return la < lb
end
-- The space's policy: online, away, window, retention, remember (ms) and
-- whether guests are remembered. The defaults are six arguments from
-- ARGV[a] on (a config written before remembering existed has no
-- remember fields: those come from the defaults too).
local function cfg_load(key, a)
  local c = redis.call('HMGET', key, 'online', 'away', 'window', 'retention', 'remember', 'rguests')
  local rem, rg = c[5], c[6]
  if not rem then rem, rg = ARGV[a + 4], ARGV[a + 5] end
  if c[1] then
    return tonumber(c[1]), tonumber(c[2]), tonumber(c[3]), tonumber(c[4]), tonumber(rem), rg == '1'
  end
  return tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(rem), rg == '1'
end
-- Whether the policy remembers members of kind k.
local function remembers(k, rem, rg)
  return rem > 0 and (k == 'u' or rg)
end
-- Remembers (k, id) as last seen at t in the remembered set rz, if the
-- policy remembers its kind and t is still within the horizon at now;
-- never moves a remembered time back (ZADD GT). Returns 1 if the member
-- was not remembered before (its index entry may be new).
local function remember(rz, k, id, t, now, rem, rg)
  if not remembers(k, rem, rg) or now >= t + rem then return 0 end
  return redis.call('ZADD', rz, 'GT', S(t), id)
end
-- How many members the remembered sets hold, and when the first of them
-- passes the horizon (-1: none; now for a kind no longer remembered).
local function rem_due(ru, rgk, now, rem, rg)
  local n, due = 0, -1
  for k, z in pairs({u = ru, g = rgk}) do
    local c = redis.call('ZCARD', z)
    if c > 0 then
      n = n + c
      local d = now
      if remembers(k, rem, rg) then
        d = tonumber(redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')[2]) + rem
      end
      if due < 0 or d < due then due = d end
    end
  end
  return n, due
end
local function le_mark(s, m, ms, mm)
  if s ~= ms then return s < ms end
  if mm == '' then return true end
  return not blt(mm, m)
end
-- A kind's marks from the four fields at v[o + 1 ..] of an HMGET of the
-- state (as, am, gs, gm), or fresh ones (true) if it had none.
local function marks_from(v, o, now, on, aw)
  if v[o + 1] then return {tonumber(v[o + 1]), v[o + 2], tonumber(v[o + 3]), v[o + 4]}, false end
  return {now - on, '', now - aw, ''}, true
end
local function marks_load(state, k, now, on, aw)
  return marks_from(redis.call('HMGET', state, 'as' .. k, 'am' .. k, 'gs' .. k, 'gm' .. k), 0, now, on, aw)
end
local function marks_save(state, k, x)
  redis.call('HSET', state, 'as' .. k, S(x[1]), 'am' .. k, x[2], 'gs' .. k, S(x[3]), 'gm' .. k, x[4])
end
local function presence(x, s, m)
  if le_mark(s, m, x[3], x[4]) then return 0 end
  if le_mark(s, m, x[1], x[2]) then return 1 end
  return 2
end
-- Members of zset `z` at or below (s, m) in (score, member) order.
local function count_le(z, s, m)
  local below = redis.call('ZCOUNT', z, '-inf', '(' .. S(s))
  if m == '' then return below + redis.call('ZCOUNT', z, S(s), S(s)) end
  local sc = redis.call('ZSCORE', z, m)
  if sc and tonumber(sc) == s then return redis.call('ZRANK', z, m) + 1 end
  -- The mark's member moved or left: count its score group by hand. Only
  -- members sharing that exact millisecond are read.
  local n, off = 0, 0
  while true do
    local g = redis.call('ZRANGEBYSCORE', z, S(s), S(s), 'LIMIT', off, 1000)
    for _, x in ipairs(g) do
      if blt(m, x) then return below + n end
      n = n + 1
    end
    if #g < 1000 then return below + n end
    off = off + 1000
  end
end
-- Members strictly below (s, m).
local function count_lt(z, s, m)
  local sc = redis.call('ZSCORE', z, m)
  if sc and tonumber(sc) == s then return redis.call('ZRANK', z, m) end
  return count_le(z, s, m)
end
local function ev_add(ev, meta, typ, k, id, ts, p, reason)
  ev[#ev + 1] = {typ, k, id, S(ts), p, reason, redis.call('HGET', meta, k .. ':' .. id)}
end
"#;

/// `publish`: the events of a script call, numbered, on the shard's
/// channel, each user's status changes on its own channel, and, when the
/// command says the outbox is open (`CMD CAP MODE`, see
/// [`crate::outbox_scripts`]), into the shard's stream.
const PUBLISH: &str = r#"
-- Status changes of users (join, away, back, leave) also go to each
-- user's own channel, P:u:ID, for the servers that follow the user
-- (follow.rs): `[space, tuple]`, the tuple without metadata. Always
-- classic PUBLISH: a script may not SPUBLISH outside its slot, and a
-- cluster carries a PUBLISH to every node. P and the space are read from
-- the space's channel, P:{S}:events or P:{S#k}:events (a space name needs
-- no JSON escaping). Each tuple is encoded once, for both messages, unless
-- it has metadata to leave out.
local STATUS_EVENTS = {join = true, away = true, back = true, leave = true}
local function publish(state, cmd, chan, ev)
  if #ev == 0 then return end
  local spec = nil
  if #cmd > 8 then spec, cmd = cmd, string.match(cmd, '^%u+') end
  local last = redis.call('HINCRBY', state, 'seq', #ev)
  local enc = {}
  for i, e in ipairs(ev) do
    e[8] = S(last - #ev + i)
    enc[i] = cjson.encode(e)
  end
  redis.call(cmd, chan, '[' .. table.concat(enc, ',') .. ']')
  if spec then wh_capture(spec, state, chan, ev, enc) end
  local p, s = string.match(chan, '^(.*):{([^{}#]*)[^{}]*}:events$')
  if not p then return end
  for i, e in ipairs(ev) do
    if e[2] == 'u' and STATUS_EVENTS[e[1]] then
      local t = enc[i]
      if e[7] then t = cjson.encode({e[1], e[2], e[3], e[4], e[5], e[6], false, e[8], e[9]}) end
      redis.call('PUBLISH', p .. ':u:' .. e[3], '["' .. s .. '",' .. t .. ']')
    end
  end
end
"#;

pub(crate) fn script(body: &str) -> Script {
    Script::new(&format!("{}\n{body}", *PRELUDE))
}

/// Heartbeats. KEYS: zu zg meta state config ru rg unidx. ARGV: now, the
/// six defaults, publish command,
/// channel, the number of users `nu` and of
/// guests `ng`, then the `nu` user ids and the `ng` guest ids (one entry
/// per member: the caller coalesces), then `pos at meta` for each entry
/// whose time is not `now` or that brings metadata (`pos` its 1-based
/// place among the ids, meta `''` keeps the member's). Returns `{accepted,
/// joined, stale, outcomes, new_users, outbox}`, outcomes one byte per entry in the order of
/// the ids: `0` accepted, `1` accepted and joined, `2` stale (so a caller
/// that merged several requests into one call can tell each its own
/// answer).
///
/// Remembered last seen: a member stored anew (not in its kind's sorted
/// set before) is dropped from the remembered set (presence answers
/// first); a heartbeat already past the retention is stale, but remembered
/// if the member is not stored and the time is within the horizon (never
/// moving a remembered time back). Users stored or remembered anew (not
/// remembered before: a remembered user is in its index already) are
/// added to `unidx` and returned in `new_users`: the caller adds the space
/// to each one's index of spaces and then removes them from `unidx` (the
/// sweep finishes the job if the caller never does).
///
/// Per member it reads the old score and writes the new one, as seed
/// 001's `ZADD` does, in bulk: for each chunk of 250 members of a kind, one `ZMSCORE` and then one variadic `ZADD` (while the
/// members are still in the CPU's cache); one `HMGET` for the members that
/// bring metadata and one `HSET` for those whose metadata changed. The
/// common heartbeat (now, no metadata) is one argument, and its score the
/// one string `now`. The old score decides `join` / `back` / `update`
/// against the watermarks.
pub static HEARTBEAT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local snow = ARGV[1]
local now = tonumber(snow)
local on, aw, win, ret, rem, rg = cfg_load(KEYS[5], 2)
local mk = {}
-- Both kinds' marks in one read (each redis.call costs about a
-- microsecond and a half of the server's time whatever it does).
local mv = redis.call('HMGET', KEYS[4], 'asu', 'amu', 'gsu', 'gmu', 'asg', 'amg', 'gsg', 'gmg')
for i, k in ipairs({'u', 'g'}) do
  local x, fresh = marks_from(mv, (i - 1) * 4, now, on, aw)
  if fresh then
    marks_save(KEYS[4], k, x)
    -- Users' marks are saved when a user is first stored: without them
    -- the shard holds no user from before users were indexed (see the
    -- sweep's walk).
    if k == 'u' then redis.call('HSET', KEYS[4], 'ix', 'done') end
  end
  mk[k] = x
end
local rz = {u = KEYS[6], g = KEYS[7]}
local newu = {}
local nu, ng = tonumber(ARGV[10]), tonumber(ARGV[11])
local base = 11
local total = nu + ng
local xat, xmeta = {}, {}
local mf, mpos = {}, {}
for i = base + total + 1, #ARGV, 3 do
  local p = tonumber(ARGV[i])
  xat[p] = tonumber(ARGV[i + 1])
  local m = ARGV[i + 2]
  if m ~= '' then
    xmeta[p] = m
    local k = 'u'
    if p > nu then k = 'g' end
    mf[#mf + 1] = k .. ':' .. ARGV[base + p]
    mpos[#mf] = p
  end
end
local cur = {}
for j = 1, #mf, 500 do
  local e = j + 499
  if e > #mf then e = #mf end
  local r = redis.call('HMGET', KEYS[3], unpack(mf, j, e))
  for x = 1, #r do cur[mpos[j + x - 1]] = r[x] end
end
local acc, joined, stale = 0, 0, 0
local res = {}
local ev = {}
local sets = {}
local CH = 250
for _, part in ipairs({{'u', KEYS[1], 1, nu}, {'g', KEYS[2], nu + 1, total}}) do
  local k, z, lo, hi = part[1], part[2], part[3], part[4]
  local x = mk[k]
  for j = lo, hi, CH do
    local e = j + CH - 1
    if e > hi then e = hi end
    local olds = redis.call('ZMSCORE', z, unpack(ARGV, base + j, base + e))
    local adds, na = {}, 0
    local fresh, nf = {}, 0
    for p = j, e do
      local id = ARGV[base + p]
      local old = olds[p - j + 1]
      if old then old = tonumber(old) end
      local at = xat[p] or now
      if now - at >= ret or (old and old > at) then
        stale = stale + 1
        res[p] = '2'
        if not old and now - at >= ret and remember(rz[k], k, id, at, now, rem, rg) == 1 and k == 'u' then
          newu[#newu + 1] = id
        end
      else
        acc = acc + 1
        if not old then
          nf = nf + 1
          fresh[nf] = id
        end
        -- Above the away mark is online whatever the member: no need to
        -- compare ids (the usual case, so it skips the function calls).
        local op = 0
        if old then
          if old > x[1] then op = 2 else op = presence(x, old, id) end
        end
        local meta = xmeta[p]
        local changed = false
        if meta and cur[p] ~= meta then
          sets[#sets + 1] = k .. ':' .. id
          sets[#sets + 1] = meta
          changed = true
        end
        if old ~= at then
          if at == now then adds[na + 1] = snow else adds[na + 1] = S(at) end
          adds[na + 2] = id
          na = na + 2
        end
        local np = 2
        if at <= x[1] then np = presence(x, at, id) end
        local ty = nil
        if np ~= 0 then
          if op == 0 then
            ty = 'join'
            joined = joined + 1
          elseif op == 1 and np == 2 then
            ty = 'back'
          elseif changed then
            ty = 'update'
          end
        end
        if ty then
          -- The member's metadata after this call: what it brought, else
          -- what it had.
          local m = meta
          if not m then m = redis.call('HGET', KEYS[3], k .. ':' .. id) end
          ev[#ev + 1] = {ty, k, id, S(at), np, '', m}
        end
        if ty == 'join' then res[p] = '1' else res[p] = '0' end
      end
    end
    if na > 0 then redis.call('ZADD', z, unpack(adds, 1, na)) end
    if nf > 0 then
      -- A user remembered here is in its index already: only the others
      -- are new to it.
      if k == 'u' then
        local was = redis.call('ZMSCORE', rz[k], unpack(fresh, 1, nf))
        for q = 1, nf do
          if not was[q] then newu[#newu + 1] = fresh[q] end
        end
      end
      redis.call('ZREM', rz[k], unpack(fresh, 1, nf))
    end
  end
end
for j = 1, #sets, 1000 do
  local e = j + 999
  if e > #sets then e = #sets end
  redis.call('HSET', KEYS[3], unpack(sets, j, e))
end
for j = 1, #newu, 1000 do
  local e = j + 999
  if e > #newu then e = #newu end
  redis.call('SADD', KEYS[8], unpack(newu, j, e))
end
publish(KEYS[4], ARGV[8], ARGV[9], ev)
return {acc, joined, stale, table.concat(res), newu, WH}
"#,
    )
});

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
pub static LEAVE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local now = tonumber(ARGV[1])
local on, aw, win, ret, rem, rg = cfg_load(KEYS[5], 2)
local z = {u = KEYS[1], g = KEYS[2]}
local rz = {u = KEYS[6], g = KEYS[7]}
local mk = {}
for _, k in ipairs({'u', 'g'}) do mk[k] = marks_load(KEYS[4], k, now, on, aw) end
local present = 0
local ev = {}
for i = 10, #ARGV, 3 do
  local k, id, upto = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local s = redis.call('ZSCORE', z[k], id)
  if s then s = tonumber(s) end
  if s and upto and s > upto then s = nil end
  if s then
    local t = s
    if presence(mk[k], s, id) ~= 0 then
      present = present + 1
      ev_add(ev, KEYS[3], 'leave', k, id, s, 0, 'explicit')
      t = upto or now
      if t < s then t = s end
    end
    redis.call('ZREM', z[k], id)
    redis.call('HDEL', KEYS[3], k .. ':' .. id)
    remember(rz[k], k, id, t, now, rem, rg)
  end
end
publish(KEYS[4], ARGV[8], ARGV[9], ev)
return {present, WH}
"#,
    )
});

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
pub(crate) const TICK_BODY: &str = r#"
if not redis.call('SET', KEYS[6], ARGV[11], 'NX', 'PX', ARGV[12]) then
  if redis.call('GET', KEYS[6]) ~= ARGV[11] then return {0, 0, 0, -1} end
  redis.call('PEXPIRE', KEYS[6], ARGV[12])
end
local now = tonumber(ARGV[1])
local on, aw, win, ret, rem, rg = cfg_load(KEYS[5], 2)
local budget = tonumber(ARGV[10])
local z = {u = KEYS[1], g = KEYS[2]}
local rz = {u = KEYS[10], g = KEYS[11]}
local ex, tr, more = 0, 0, 0
local ev = {}
for _, k in ipairs({'u', 'g'}) do
  local x = marks_load(KEYS[4], k, now, on, aw)
  for pass = 1, 2 do
    local cut = now - on
    local si, mi = 1, 2
    if pass == 2 then cut, si, mi = now - aw, 3, 4 end
    if x[si] < cut or (x[si] == cut and x[mi] ~= '') then
      local start = count_le(z[k], x[si], x[mi])
      -- Where the mark ends up: the cut if the walk gets there, else
      -- right after the last member handled, so the next step resumes
      -- exactly.
      local ns, nm = cut, ''
      local ls, lm = x[si], x[mi]
      local stop = false
      while not stop do
        local xs = redis.call('ZRANGE', z[k], start, start + 255, 'WITHSCORES')
        if #xs == 0 then break end
        for j = 1, #xs, 2 do
          local id, s = xs[j], tonumber(xs[j + 1])
          if s > cut then
            stop = true
            break
          end
          if budget == 0 then
            more = 1
            ns, nm = ls, lm
            stop = true
            break
          end
          budget = budget - 1
          if pass == 1 then
            if not le_mark(s, id, x[3], x[4]) then
              tr = tr + 1
              ev_add(ev, KEYS[3], 'away', k, id, s, 1, '')
            end
          else
            tr = tr + 1
            ev_add(ev, KEYS[3], 'leave', k, id, s, 0, 'timeout')
          end
          ls, lm = s, id
        end
        start = start + 256
      end
      x[si], x[mi] = ns, nm
    end
  end
  marks_save(KEYS[4], k, x)
  local before = S(now - ret)
  while budget > 0 do
    local xs = redis.call('ZRANGEBYSCORE', z[k], '-inf', before, 'WITHSCORES', 'LIMIT', 0, 256)
    if #xs == 0 then break end
    for j = 1, #xs, 2 do
      if budget == 0 then break end
      budget = budget - 1
      local id, s = xs[j], tonumber(xs[j + 1])
      if not le_mark(s, id, x[3], x[4]) then
        ev_add(ev, KEYS[3], 'leave', k, id, s, 0, 'expired')
      end
      redis.call('ZREM', z[k], id)
      redis.call('HDEL', KEYS[3], k .. ':' .. id)
      remember(rz[k], k, id, s, now, rem, rg)
      ex = ex + 1
    end
  end
  if budget == 0 and redis.call('ZCOUNT', z[k], '-inf', before) > 0 then more = 1 end
end
publish(KEYS[4], ARGV[8], ARGV[9], ev)
-- Remembered times past the horizon, oldest first.
local trimmed, fg = {}, 0
for _, k in ipairs({'u', 'g'}) do
  local cut = '+inf'
  if remembers(k, rem, rg) then cut = S(now - rem) end
  while budget > 0 do
    local n = budget
    if n > 256 then n = 256 end
    local xs = redis.call('ZRANGEBYSCORE', rz[k], '-inf', cut, 'LIMIT', 0, n)
    if #xs == 0 then break end
    budget = budget - #xs
    fg = fg + #xs
    redis.call('ZREM', rz[k], unpack(xs))
    if k == 'u' then
      for _, id in ipairs(xs) do trimmed[#trimmed + 1] = id end
    end
  end
  if budget == 0 and redis.call('ZCOUNT', rz[k], '-inf', cut) > 0 then more = 1 end
end
-- Users stored before spaces were indexed by user: one step of the walk.
local ix = redis.call('HGET', KEYS[4], 'ix')
if ix ~= 'done' then
  local src = KEYS[1]
  if ix == 'r' then src = KEYS[10] end
  local r = redis.call('ZSCAN', src, redis.call('HGET', KEYS[4], 'ixc') or '0', 'COUNT', 500)
  local ids = {}
  for j = 1, #r[2], 2 do ids[#ids + 1] = r[2][j] end
  if #ids > 0 then redis.call('SADD', KEYS[12], unpack(ids)) end
  if r[1] ~= '0' then
    redis.call('HSET', KEYS[4], 'ixc', r[1])
  elseif ix == 'r' then
    redis.call('HSET', KEYS[4], 'ix', 'done')
    redis.call('HDEL', KEYS[4], 'ixc')
  else
    redis.call('HSET', KEYS[4], 'ix', 'r', 'ixc', '0')
  end
end
local remembered, due = rem_due(KEYS[10], KEYS[11], now, rem, rg)
local unidx = redis.call('SCARD', KEYS[12])
local left = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2]) + unidx
return {ex, tr, more, left, 0, fg, remembered, due, unidx, trimmed, WH}
"#;

/// A subscriber's snapshot: the event sequence number and the members
/// present by the watermarks. KEYS: zu zg meta state config. ARGV: now, the
/// six defaults, the most members per kind. Returns `{seq, present_u,
/// present_g, items_u, items_g}`, items oldest first as flat
/// `id, score, presence, meta` groups.
pub static SNAPSHOT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local now = tonumber(ARGV[1])
local on, aw = cfg_load(KEYS[5], 2)
local max = tonumber(ARGV[8])
local seq = tonumber(redis.call('HGET', KEYS[4], 'seq') or '0')
local out = {seq, 0, 0, {}, {}}
local zs = {KEYS[1], KEYS[2]}
for i, k in ipairs({'u', 'g'}) do
  local x = marks_load(KEYS[4], k, now, on, aw)
  local card = redis.call('ZCARD', zs[i])
  local first = count_le(zs[i], x[3], x[4])
  out[1 + i] = card - first
  local from = first
  if card - first > max then from = card - max end
  if from < card then
    local xs = redis.call('ZRANGE', zs[i], from, card - 1, 'WITHSCORES')
    local items = {}
    for j = 1, #xs, 2 do
      local id, s = xs[j], tonumber(xs[j + 1])
      items[#items + 1] = id
      items[#items + 1] = xs[j + 1]
      items[#items + 1] = presence(x, s, id)
      items[#items + 1] = redis.call('HGET', KEYS[3], k .. ':' .. id)
    end
    out[3 + i] = items
  end
end
return out
"#,
    )
});

/// Last seen and metadata of members, and the remembered time of those
/// not stored. KEYS: zu zg meta config ru rg. ARGV: the six defaults, then
/// `kind id` pairs. Returns `{online, away, window, retention, remember,
/// remember_guests (0/1), score|false, meta|false, remembered|false,
/// ...}`. The horizon is checked by the caller (it has the policy and the
/// time), so the raw remembered time also tells it whether the space
/// holds anything of the member.
pub static STATUS: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local on, aw, win, ret, rem, rg = cfg_load(KEYS[4], 1)
local g = 0
if rg then g = 1 end
local out = {S(on), S(aw), S(win), S(ret), S(rem), g}
local z = {u = KEYS[1], g = KEYS[2]}
local rz = {u = KEYS[5], g = KEYS[6]}
for i = 7, #ARGV, 2 do
  local k, id = ARGV[i], ARGV[i + 1]
  local s = redis.call('ZSCORE', z[k], id)
  out[#out + 1] = s
  if s then
    out[#out + 1] = redis.call('HGET', KEYS[3], k .. ':' .. id)
    out[#out + 1] = false
  else
    out[#out + 1] = false
    out[#out + 1] = redis.call('ZSCORE', rz[k], id)
  end
end
return out
"#,
    )
});

/// Window counts. KEYS: zu zg config. ARGV: the six defaults, now, window
/// (0: the space's). Returns `{users, guests}` or `{-1, retention}` for a
/// window out of range.
pub static COUNT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local on, aw, win, ret = cfg_load(KEYS[3], 1)
local w = tonumber(ARGV[8])
if w == 0 then w = win end
if w < 1 or w > ret then return {-1, S(ret)} end
local cut = S(tonumber(ARGV[7]) - w)
return {redis.call('ZCOUNT', KEYS[1], cut, '+inf'), redis.call('ZCOUNT', KEYS[2], cut, '+inf')}
"#,
    )
});

/// One page, most recent first, per kind. KEYS: zu zg meta config. ARGV:
/// the six defaults, now, window (0: the space's), limit, kinds (`u`, `g`
/// or `a`), then the cursor `score kind id` or three `''`. The merged order
/// is (score, kind, id) descending with users above guests at equal
/// scores. Returns `{0, online, away, window, retention, items_u,
/// items_g}` with up to limit+1 items per kind after the cursor, newest
/// first, as flat `id, score, meta` groups; `{-1, retention}` for a bad
/// window.
pub static LIST_RECENT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local on, aw, win, ret = cfg_load(KEYS[4], 1)
local w = tonumber(ARGV[8])
if w == 0 then w = win end
if w < 1 or w > ret then return {-1, S(ret)} end
local cut = tonumber(ARGV[7]) - w
local want = tonumber(ARGV[9]) + 1
local kinds = ARGV[10]
local cs, ck, cm = ARGV[11], ARGV[12], ARGV[13]
local rank = {u = 1, g = 0}
local out = {0, S(on), S(aw), S(win), S(ret), {}, {}}
local zs = {KEYS[1], KEYS[2]}
for i, k in ipairs({'u', 'g'}) do
  if kinds == 'a' or kinds == k then
    local z = zs[i]
    local top
    if cs == '' then
      top = redis.call('ZCARD', z)
    else
      local s = tonumber(cs)
      if rank[k] < rank[ck] then
        top = redis.call('ZCOUNT', z, '-inf', cs)
      elseif rank[k] > rank[ck] then
        top = redis.call('ZCOUNT', z, '-inf', '(' .. cs)
      else
        top = count_lt(z, s, cm)
      end
    end
    local items = {}
    if top > 0 then
      local from = top - want
      if from < 0 then from = 0 end
      local xs = redis.call('ZRANGE', z, from, top - 1, 'WITHSCORES')
      for j = #xs - 1, 1, -2 do
        local id, s = xs[j], tonumber(xs[j + 1])
        if s < cut then break end
        items[#items + 1] = id
        items[#items + 1] = xs[j + 1]
        items[#items + 1] = redis.call('HGET', KEYS[3], k .. ':' .. id)
      end
    end
    out[5 + i] = items
  end
end
return out
"#,
    )
});

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
pub static ID_SLICE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local on, aw, win, ret = cfg_load(KEYS[2], 1)
local w = tonumber(ARGV[8])
if w == 0 then w = win end
if w < 1 or w > ret then return {-1, S(ret)} end
local cut = tonumber(ARGV[7]) - w
local n = tonumber(ARGV[11])
local from, in_window
if ARGV[9] == '' then
  from = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. S(cut))
  in_window = redis.call('ZCARD', KEYS[1]) - from
else
  from = count_le(KEYS[1], tonumber(ARGV[9]), ARGV[10])
  in_window = -1
end
local ids = {}
if n > 0 then ids = redis.call('ZRANGE', KEYS[1], from, from + n - 1) end
local last = ''
if #ids > 0 then last = S(tonumber(redis.call('ZSCORE', KEYS[1], ids[#ids]))) end
return {0, in_window, last, ids}
"#,
    )
});

/// Sets a space's policy and moves its watermarks to the new thresholds
/// without events (as the memory store does). KEYS: state config. ARGV:
/// now, online, away, window, retention, remember, remember guests (0/1),
/// grace.
/// Remembered times are not touched: reads apply the new horizon at once,
/// and the sweep trims by it.
pub static SET_CONFIG: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local now = tonumber(ARGV[1])
local on, aw = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('HSET', KEYS[2], 'online', ARGV[2], 'away', ARGV[3], 'window', ARGV[4], 'retention', ARGV[5],
  'remember', ARGV[6], 'rguests', ARGV[7], 'grace', ARGV[8])
for _, k in ipairs({'u', 'g'}) do marks_save(KEYS[1], k, {now - on, '', now - aw, ''}) end
return 1
"#,
    )
});
