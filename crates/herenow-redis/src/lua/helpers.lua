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
