local now, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local exists = math.min(redis.call('EXISTS', KEYS[1]) + redis.call('EXISTS', KEYS[2]), 1)
local last = redis.call('GET', KEYS[3])
if not last then
  redis.call('SET', KEYS[3], ARGV[1], 'PX', 4 * period)
  return {0, 0, exists}
end
if now - tonumber(last) < period then return {0, 0, exists} end
redis.call('SET', KEYS[3], ARGV[1], 'PX', 4 * period)
local gone = redis.call('SCARD', KEYS[2]) - redis.call('SINTERCARD', 2, KEYS[2], KEYS[1])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RENAME', KEYS[1], KEYS[2])
else
  redis.call('DEL', KEYS[2])
end
return {1, gone, redis.call('EXISTS', KEYS[2])}
