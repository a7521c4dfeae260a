local n = 0
for i = 1, #KEYS do
  local s = redis.call('ZSCORE', KEYS[i], ARGV[1])
  if s and tonumber(s) <= tonumber(ARGV[2]) then n = n + redis.call('ZREM', KEYS[i], ARGV[1]) end
end
return n
