local now = tonumber(ARGV[1])
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
if not redis.call('SET', KEYS[6], ARGV[11], 'NX', 'PX', ARGV[12]) then
  if redis.call('GET', KEYS[6]) ~= ARGV[11] then
    local stored = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
      + redis.call('ZCARD', KEYS[7]) + redis.call('SCARD', KEYS[12])
    local n, due = rem_due(KEYS[10], KEYS[11], now, rem, rg)
    return {0, 0, 0, -1, 0, stored, n, due}
  end
  redis.call('PEXPIRE', KEYS[6], ARGV[12])
end
local pol = {now = now, rem = rem, rg = rg}
local budget = tonumber(ARGV[13])
local closed, cmore = 0, 0
local cev = {}
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
-- tick.lua
end
local r = tick_body()
if r[4] >= 0 then r[4] = r[4] + redis.call('ZCARD', CK.conns) end
if cmore == 1 then r[3] = 1 end
r[5] = closed
return r
