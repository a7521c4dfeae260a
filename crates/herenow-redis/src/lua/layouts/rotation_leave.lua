local n = 0
for i = 1, #ARGV do
  local a = redis.call('SREM', KEYS[1], ARGV[i])
  local b = redis.call('SREM', KEYS[2], ARGV[i])
  if a + b > 0 then n = n + 1 end
end
return n
