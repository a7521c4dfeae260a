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
