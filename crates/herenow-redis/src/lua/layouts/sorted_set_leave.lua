local now, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = 0
for i = 3, #ARGV do
  local old = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if old then
    if tonumber(old) * 1000 + retention > now then n = n + 1 end
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
