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
