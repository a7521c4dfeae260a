local window, n = tonumber(ARGV[1]), 0
for i = 2, #ARGV do
  local m, seen = ARGV[i], false
  for k = 1, #KEYS do
    if redis.call('SREM', KEYS[k], m) == 1 and k <= window then seen = true end
  end
  if seen then n = n + 1 end
end
return n
