//! The Lua scripts of live connections (see [`herenow_core::conn`]): attach,
//! detach, the listing of a member's connections, and the sweep that closes
//! connections which stopped pinging before it runs [`TICK`]'s body.
//!
//! They follow the memory engine (`Space::attach`, `detach`, `drop_conn`,
//! `conn_gone` and the top of `Space::tick`) step for step, atomically per
//! call, on keys that all carry the space's hash tag:
//!
//! - `conns`, a sorted set: connection id → expiry in ms;
//! - `cinfo`, a hash: connection id → its record, `F K ID \n META`, where
//!   `F` is `0` (visible), `1` (invisible) or `2` (visible, lingering in
//!   its member's grace: see [`LINGER`]), `K` the member's kind letter,
//!   `ID` the member id (which holds no control characters, so the first
//!   newline ends it) and `META` the connection's metadata JSON, empty for
//!   none;
//! - `mconn`, a hash: member (`u:ID` / `g:ID`, as in the metadata hash) →
//!   its connections, space-separated, each `F` then the connection id
//!   (connection ids hold no spaces). At most
//!   [`limits::MAX_CONNS_PER_MEMBER`](herenow_core::limits::MAX_CONNS_PER_MEMBER)
//!   entries, so "the member's other visible connections" and the listing
//!   read one short field.
//!
//! Every script but [`CONNECTIONS`] takes the same keys (as does
//! [`TICK`]): `zu zg meta state config lease conns cinfo mconn ru rg
//! unidx` (attach and detach never touch the lease). When a member's last
//! visible connection goes, the member is remembered (see
//! [`crate::scripts`]): at the time of the close (a detach, or turning
//! invisible) or at its last heartbeat (a connection that expired), never
//! before its last heartbeat.
//!
//! Events caused by a connection carry its id as a ninth element of the
//! event tuple (see [`scripts`](crate::scripts)) and the connection's
//! metadata in place of the member's.
//!
//! [`TICK`]: crate::scripts::TICK

use std::sync::LazyLock;

use redis::Script;

use crate::scripts::{PRELUDE, TICK_BODY};

/// Connection helpers, after [`PRELUDE`].
const CONN_PRELUDE: &str = r#"
local CK = {z = {u = KEYS[1], g = KEYS[2]},
  meta = KEYS[3], state = KEYS[4], config = KEYS[5],
  conns = KEYS[7], cinfo = KEYS[8], mconn = KEYS[9],
  rz = {u = KEYS[10], g = KEYS[11]}, unidx = KEYS[12]}
local function cinfo_enc(inv, k, id, meta) return inv .. k .. id .. '\n' .. meta end
-- inv, kind, id, meta
local function cinfo_dec(v)
  local nl = string.find(v, '\n', 3, true)
  return string.sub(v, 1, 1), string.sub(v, 2, 2), string.sub(v, 3, nl - 1), string.sub(v, nl + 1)
end
local function mc_count(list)
  local n = 0
  for _ in string.gmatch(list, '%S+') do n = n + 1 end
  return n
end
-- Visible connections (flag 0, or 2: lingering) other than `conn`.
local function mc_visible_others(list, conn)
  local n = 0
  for e in string.gmatch(list, '%S+') do
    if string.sub(e, 1, 1) ~= '1' and string.sub(e, 2) ~= conn then n = n + 1 end
  end
  return n
end
-- The member's lingering connection that expires first, or nil.
local function mc_lingering(list)
  local best, at = nil, nil
  for e in string.gmatch(list, '%S+') do
    if string.sub(e, 1, 1) == '2' then
      local c = string.sub(e, 2)
      local x = tonumber(redis.call('ZSCORE', CK.conns, c))
      if x and (not at or x < at) then best, at = c, x end
    end
  end
  return best
end
-- The list with `conn` set to flag `f`, or removed when `f` is nil.
local function mc_set(list, conn, f)
  local out = {}
  for e in string.gmatch(list, '%S+') do
    if string.sub(e, 2) ~= conn then out[#out + 1] = e end
  end
  if f then out[#out + 1] = f .. conn end
  return table.concat(out, ' ')
end
local function ev_conn(ev, typ, k, id, ts, p, reason, meta, conn)
  if meta == '' then meta = false end
  ev[#ev + 1] = {typ, k, id, S(ts), p, reason, meta, false, conn}
end
-- A visible connection of member (k, id) went away (closed, expired or
-- turned invisible) and `others` visible ones remain: `disconnect`, or
-- `leave` if it was the last, the member then no longer stored but
-- remembered (pol: now, rem, rg): at the close, or at its last heartbeat
-- when it expired or `lingered` out its grace. Returns 1 if the member
-- left.
local function conn_gone(x, k, id, others, reason, conn, meta, ev, pol, lingered)
  local s = redis.call('ZSCORE', CK.z[k], id)
  if not s then return 0 end
  s = tonumber(s)
  local p = presence(x, s, id)
  if p == 0 then return 0 end
  if others > 0 then
    ev_conn(ev, 'disconnect', k, id, s, p, '', meta, conn)
    return 0
  end
  ev_conn(ev, 'leave', k, id, s, 0, reason, meta, conn)
  redis.call('ZREM', CK.z[k], id)
  redis.call('HDEL', CK.meta, k .. ':' .. id)
  local t = s
  if reason ~= 'timeout' and not lingered and pol.now > s then t = pol.now end
  remember(CK.rz[k], k, id, t, pol.now, pol.rem, pol.rg)
  return 1
end
-- Removes connection `conn` (record `rec`) and announces it. Returns 1 if
-- its member left.
local function conn_drop(conn, rec, now, on, aw, pol, reason, ev)
  local inv, k, id, meta = cinfo_dec(rec)
  local mf = k .. ':' .. id
  redis.call('ZREM', CK.conns, conn)
  redis.call('HDEL', CK.cinfo, conn)
  local list = mc_set(redis.call('HGET', CK.mconn, mf) or '', conn, nil)
  if list == '' then
    redis.call('HDEL', CK.mconn, mf)
  else
    redis.call('HSET', CK.mconn, mf, list)
  end
  if inv == '1' then return 0 end
  -- A lingering connection's grace is over: it ended when it began to
  -- linger, a goodbye late, its member seen last then.
  local lingered = inv == '2'
  if lingered then reason = 'explicit' end
  local x = marks_load(CK.state, k, now, on, aw)
  return conn_gone(x, k, id, mc_visible_others(list, conn), reason, conn, meta, ev, pol, lingered)
end
"#;

fn conn_script(body: &str) -> Script {
    Script::new(&format!("{}\n{CONN_PRELUDE}\n{body}", *PRELUDE))
}

/// Opens, pings or changes a connection. KEYS: see the module docs. ARGV:
/// now, the six defaults, publish command, channel, kind, id,
/// connection id, metadata (`''`: none), invisible (`0`/`1`), expiry (ms),
/// most connections per member. Returns `{status, opened, joined, left,
/// new_user, outbox, resumed, revived}` (`outbox`: see
/// [`crate::outbox_scripts`]; `resumed`: 1 when the connection took the
/// place of a lingering one of its member, as the memory engine's
/// `Space::attach` does; `revived`: 1 when the connection itself was
/// lingering, pinged again by a server found dead while it was only slow);
/// status 0 is done, -1 the id belongs to another member, -2 the member
/// has too many connections (nothing changed in either case); `new_user`
/// is 1 when a user neither stored nor remembered was stored (added to
/// `unidx`, as by a heartbeat: the caller indexes it).
///
/// A visible attach is the member's heartbeat "now": `join` if the member
/// was not present, `back` if it was away, else `connect` if this
/// connection just became visible, else `update` if this connection's
/// metadata changed (compared with what the connection had, not with the
/// member's). The member takes the connection's metadata when the
/// connection opens or changes it, and keeps its own when the connection
/// has none. Turning the last visible connection invisible is a `leave`.
pub static ATTACH: LazyLock<Script> = LazyLock::new(|| {
    conn_script(
        r#"
local now = tonumber(ARGV[1])
local k, id, conn, meta, inv = ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14]
local mf = k .. ':' .. id
local prev = redis.call('HGET', CK.cinfo, conn)
local pinv, pmeta = nil, nil
if prev then
  local pk, pid
  pinv, pk, pid, pmeta = cinfo_dec(prev)
  if pk ~= k or pid ~= id then return {-1, 0, 0, 0, 0} end
end
local list = redis.call('HGET', CK.mconn, mf) or ''
-- A new visible connection takes the place of one of its member's in
-- their grace: the member never left, so nobody is told.
local heir = nil
if not prev and inv == '0' then heir = mc_lingering(list) end
if not prev and not heir and mc_count(list) >= tonumber(ARGV[16]) then return {-2, 0, 0, 0, 0} end
-- HGET answers false, not nil, for a missing field.
local was_visible, meta_changed, resumed = false, false, 0
if heir then
  local hrec = redis.call('HGET', CK.cinfo, heir)
  local _, _, _, hmeta = cinfo_dec(hrec)
  redis.call('ZREM', CK.conns, heir)
  redis.call('HDEL', CK.cinfo, heir)
  list = mc_set(list, heir, nil)
  if list == '' then redis.call('HDEL', CK.mconn, mf) else redis.call('HSET', CK.mconn, mf, list) end
  was_visible, meta_changed, resumed = true, hmeta ~= meta, 1
elseif prev then
  was_visible = pinv ~= '1'
  meta_changed = pmeta ~= meta
end
local others = mc_visible_others(list, conn)
redis.call('ZADD', CK.conns, ARGV[15], conn)
local rec = cinfo_enc(inv, k, id, meta)
if rec ~= prev then redis.call('HSET', CK.cinfo, conn, rec) end
if pinv ~= inv then redis.call('HSET', CK.mconn, mf, mc_set(list, conn, inv)) end
local opened, joined, left, new = 1, 0, 0, 0
if prev then opened = 0 end
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
local pol = {now = now, rem = rem, rg = rg}
local x, fresh = marks_load(CK.state, k, now, on, aw)
local ev = {}
if inv == '0' then
  if fresh then
    marks_save(CK.state, k, x)
    if k == 'u' then redis.call('HSET', CK.state, 'ix', 'done') end
  end
  local z = CK.z[k]
  local old = redis.call('ZSCORE', z, id)
  if old then old = tonumber(old) end
  if not old then
    -- Stored anew: present again, no longer only remembered (and, if it
    -- was not remembered, new to its index).
    if redis.call('ZREM', CK.rz[k], id) == 0 and k == 'u' then
      redis.call('SADD', CK.unidx, id)
      new = 1
    end
  end
  -- A member whose last heartbeat is in the future (an explicit time)
  -- keeps it, as after any older heartbeat.
  if not (old and old > now) then
    local op = 0
    if old then op = presence(x, old, id) end
    if (meta_changed or not was_visible) and meta ~= '' then
      if redis.call('HGET', CK.meta, mf) ~= meta then redis.call('HSET', CK.meta, mf, meta) end
    end
    if old ~= now then redis.call('ZADD', z, S(now), id) end
    local np = presence(x, now, id)
    local e = nil
    if np ~= 0 then
      if op == 0 then
        e = 'join'
        joined = 1
      elseif op == 1 and np == 2 then
        e = 'back'
      elseif not was_visible then
        e = 'connect'
      elseif meta_changed then
        e = 'update'
      end
    end
    if e then ev_conn(ev, e, k, id, now, np, '', meta, conn) end
  end
elseif was_visible then
  left = conn_gone(x, k, id, others, 'explicit', conn, meta, ev, pol)
end
local revived = 0
if pinv == '2' then revived = 1 end
publish(CK.state, ARGV[8], ARGV[9], ev)
return {0, opened, joined, left, new, WH, resumed, revived}
"#,
    )
});

/// Closes a connection of a member. KEYS: see the module docs. ARGV: now,
/// the six defaults, publish command, channel, kind, id, connection id.
/// Returns `{found, left, outbox}`; an id that is unknown or another member's is
/// not found.
pub static DETACH: LazyLock<Script> = LazyLock::new(|| {
    conn_script(
        r#"
local now = tonumber(ARGV[1])
local k, id, conn = ARGV[10], ARGV[11], ARGV[12]
local rec = redis.call('HGET', CK.cinfo, conn)
if not rec then return {0, 0} end
local _, pk, pid = cinfo_dec(rec)
if pk ~= k or pid ~= id then return {0, 0} end
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
local ev = {}
local left = conn_drop(conn, rec, now, on, aw, {now = now, rem = rem, rg = rg}, 'explicit', ev)
publish(CK.state, ARGV[8], ARGV[9], ev)
return {1, left, WH}
"#,
    )
});

/// A connection ended without a goodbye (see [`herenow_core::conn`]): a
/// visible one lingers (flag `2`) until now + the space's grace, its
/// member seen now if it was online (no event), and the sweep
/// closes it then (a `leave` with reason `explicit`, the member seen last
/// when it began to linger) unless the member's next visible attach takes
/// its place ([`ATTACH`]); an invisible one, or any with a grace of 0, is
/// detached (`explicit`). Lingering again changes nothing. KEYS: see the module
/// docs. ARGV: now, the six defaults, publish command, channel, kind, id,
/// connection id, the default grace (ms), optionally when the connection
/// ended (a dead server's last beat; default now): the grace and the last
/// seen count from then. Returns `{found, left, outbox}` as [`DETACH`]
/// does.
pub static LINGER: LazyLock<Script> = LazyLock::new(|| {
    conn_script(
        r#"
local now = tonumber(ARGV[1])
local k, id, conn = ARGV[10], ARGV[11], ARGV[12]
local rec = redis.call('HGET', CK.cinfo, conn)
if not rec then return {0, 0} end
local inv, pk, pid, meta = cinfo_dec(rec)
if pk ~= k or pid ~= id then return {0, 0} end
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
local grace = redis.call('HGET', CK.config, 'grace')
if grace then grace = tonumber(grace) else grace = tonumber(ARGV[13]) end
-- When the connection ended: now, or earlier for a dead server's.
local at = now
if ARGV[14] and ARGV[14] ~= '' then at = math.min(now, tonumber(ARGV[14])) end
local ev = {}
if inv == '1' or grace == 0 then
  local left = conn_drop(conn, rec, now, on, aw, {now = at, rem = rem, rg = rg}, 'explicit', ev)
  publish(CK.state, ARGV[8], ARGV[9], ev)
  return {1, left, WH}
end
if inv == '2' then return {1, 0} end
local mf = k .. ':' .. id
redis.call('HSET', CK.cinfo, conn, cinfo_enc('2', k, id, meta))
redis.call('HSET', CK.mconn, mf, mc_set(redis.call('HGET', CK.mconn, mf) or '', conn, '2'))
redis.call('ZADD', CK.conns, S(at + grace), conn)
-- Last seen when the connection ended, not at its last ping, if it held
-- the member online (an away member stays away, seen last at its last
-- activity): no event either way.
local z = CK.z[k]
local old = redis.call('ZSCORE', z, id)
if old then
  old = tonumber(old)
  if old < at and presence(marks_load(CK.state, k, now, on, aw), old, id) == 2 then
    redis.call('ZADD', z, S(at), id)
  end
end
return {1, 0}
"#,
    )
});

/// Erases a user from one shard of a space
/// ([`UserIndex::erase_user`](herenow_core::UserIndex::erase_user)):
/// its presence (a `leave` with reason `explicit` if it was present), its
/// metadata, its live connections (closed without further events: the
/// leave says it), its remembered time and its place in `unidx`. KEYS: see
/// the module docs. ARGV: now, the six defaults, publish command, channel,
/// user id. Returns `{present, remembered, connections, outbox}`: `remembered` is
/// 1 only for a time still within the horizon (one past it was already
/// forgotten, only not yet swept). Running it again does nothing.
///
/// Claims of the user's connection ids in other shards (spaces of several
/// shards) are not touched: they hold the owner's id and expire by
/// themselves shortly after the connection's TTL.
pub static ERASE: LazyLock<Script> = LazyLock::new(|| {
    conn_script(
        r#"
local now = tonumber(ARGV[1])
local id = ARGV[10]
local mf = 'u:' .. id
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
local ev = {}
local present, remembered, closed = 0, 0, 0
local list = redis.call('HGET', CK.mconn, mf)
if list then
  for e in string.gmatch(list, '%S+') do
    local conn = string.sub(e, 2)
    redis.call('ZREM', CK.conns, conn)
    redis.call('HDEL', CK.cinfo, conn)
    closed = closed + 1
  end
  redis.call('HDEL', CK.mconn, mf)
end
local s = redis.call('ZSCORE', CK.z.u, id)
if s then
  s = tonumber(s)
  local x = marks_load(CK.state, 'u', now, on, aw)
  if presence(x, s, id) ~= 0 then
    present = 1
    ev_add(ev, CK.meta, 'leave', 'u', id, s, 0, 'explicit')
  end
  redis.call('ZREM', CK.z.u, id)
  redis.call('HDEL', CK.meta, mf)
end
local r = redis.call('ZSCORE', CK.rz.u, id)
if r then
  if remembers('u', rem, rg) and now < tonumber(r) + rem then remembered = 1 end
  redis.call('ZREM', CK.rz.u, id)
end
redis.call('SREM', CK.unidx, id)
publish(CK.state, ARGV[8], ARGV[9], ev)
return {present, remembered, closed, WH}
"#,
    )
});

/// Members' connections. KEYS: conns cinfo mconn. ARGV: `u:ID` / `g:ID`
/// per member. Returns one array per member, flat `conn, expiry, invisible
/// (0/1), meta` groups (meta `''` for none), in no particular order.
pub static CONNECTIONS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local out = {}
for i = 1, #ARGV do
  local items = {}
  local list = redis.call('HGET', KEYS[3], ARGV[i])
  if list then
    for e in string.gmatch(list, '%S+') do
      local conn = string.sub(e, 2)
      local rec = redis.call('HGET', KEYS[2], conn)
      local exp = redis.call('ZSCORE', KEYS[1], conn)
      if rec and exp then
        local nl = string.find(rec, '\n', 3, true)
        items[#items + 1] = conn
        items[#items + 1] = exp
        items[#items + 1] = string.sub(rec, 1, 1)
        items[#items + 1] = string.sub(rec, nl + 1)
      end
    end
  end
  out[i] = items
end
return out
"#,
    )
});

/// Claims connection id `CONN` for a member in a space split over
/// several shards (see [`crate::key_names`]): the claim key lives in the shard
/// the id hashes to, the member's connections in the member's shard.
/// KEYS: the claim key. ARGV: owner (`u:ID` / `g:ID`), time to live (ms).
/// Returns 1 if the member holds the id now (claimed or renewed), 0 if
/// another member does.
pub static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"#,
    )
});

/// Gives up a claim made by [`CLAIM`] if the member holds it. KEYS: the
/// claim key. ARGV: owner. Returns 1 if it did.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"#,
    )
});

/// One bounded step of background work on a space, connections first:
/// close the connections whose expiry has passed (as the memory engine
/// does at the top of its tick: `disconnect`, or a `leave` with reason
/// `timeout` for a member's last visible one), then run [`TICK`]'s body.
/// KEYS: see the module docs. ARGV: those of [`TICK`], then the most
/// connections this call may close.
///
/// Only the holder of the space's sweep lease works (the same check as
/// [`TICK`]'s). Returns [`TICK`]'s reply with `left` also counting the
/// connections still stored (so a space that holds only connections,
/// invisible ones say, is not dropped from the registry while they live)
/// and the connections it closed fifth, `more` set when either budget ran
/// out: `{expired, transitions, more, left, connections_expired,
/// forgotten, remembered, due, unindexed, trimmed, outbox}`. When another store
/// holds the lease: `{0, 0, 0, -1, 0, stored, remembered, due}`, `stored`
/// counting what `left` counts (so a space split over shards swept by
/// several stores can still be found empty, and its remembered times
/// scheduled).
///
/// [`TICK`]: crate::scripts::TICK
pub static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    conn_script(&format!(
        r#"
local now = tonumber(ARGV[1])
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
if not redis.call('SET', KEYS[6], ARGV[11], 'NX', 'PX', ARGV[12]) then
  if redis.call('GET', KEYS[6]) ~= ARGV[11] then
    local stored = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
      + redis.call('ZCARD', KEYS[7]) + redis.call('SCARD', KEYS[12])
    local n, due = rem_due(KEYS[10], KEYS[11], now, rem, rg)
    return {{0, 0, 0, -1, 0, stored, n, due}}
  end
  redis.call('PEXPIRE', KEYS[6], ARGV[12])
end
local pol = {{now = now, rem = rem, rg = rg}}
local budget = tonumber(ARGV[13])
local closed, cmore = 0, 0
local cev = {{}}
while budget > 0 do
  local n = budget
  if n > 256 then n = 256 end
  local xs = redis.call('ZRANGEBYSCORE', CK.conns, '-inf', S(now), 'LIMIT', 0, n)
  if #xs == 0 then break end
  for _, conn in ipairs(xs) do
    budget = budget - 1
    local rec = redis.call('HGET', CK.cinfo, conn)
    if rec then
      conn_drop(conn, rec, now, on, aw, pol, 'timeout', cev)
    else
      redis.call('ZREM', CK.conns, conn)
    end
    closed = closed + 1
  end
end
if budget == 0 and redis.call('ZCOUNT', CK.conns, '-inf', S(now)) > 0 then cmore = 1 end
publish(CK.state, ARGV[8], ARGV[9], cev)
local function tick_body()
{TICK_BODY}
end
local r = tick_body()
if r[4] >= 0 then r[4] = r[4] + redis.call('ZCARD', CK.conns) end
if cmore == 1 then r[3] = 1 end
r[5] = closed
return r
"#
    ))
});

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep embeds the tick body: it must stay a chunk that can be
    /// wrapped in a function (it returns from its last line).
    #[test]
    fn sweep_wraps_the_tick_body() {
        assert!(TICK_BODY.trim_end().ends_with('}'));
        assert!(TICK_BODY.contains("\nreturn {ex, tr, more,"));
        // Building the scripts computes their hashes: no panic, distinct.
        let shas = [
            ATTACH.get_hash(),
            DETACH.get_hash(),
            ERASE.get_hash(),
            CONNECTIONS.get_hash(),
            SWEEP.get_hash(),
        ];
        for (i, a) in shas.iter().enumerate() {
            for b in &shas[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
