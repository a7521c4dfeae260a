local limit = tonumber(ARGV[1])
local n = redis.call('SCARD', KEYS[1])
for i = 2, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 0 then n = n + 1 end
end
if n > limit then return -n end
for i = 2, #ARGV, 500 do
  local j = i + 499
  if j > #ARGV then j = #ARGV end
  redis.call('SADD', KEYS[1], unpack(ARGV, i, j))
end
return redis.call('SCARD', KEYS[1])
