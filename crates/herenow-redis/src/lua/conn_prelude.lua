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
