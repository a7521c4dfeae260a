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
