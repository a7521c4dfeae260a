local j = 1
for i = 1, #KEYS do
  local n = tonumber(ARGV[j])
  -- unpack() in slices: Lua's stack is bounded.
  for a = j + 1, j + n, 1000 do
    local b = a + 999
    if b > j + n then b = j + n end
    redis.call('SADD', KEYS[i], unpack(ARGV, a, b))
  end
  j = j + n + 1
end
return #KEYS
