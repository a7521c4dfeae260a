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
