local joined = 0
for i = 2, #ARGV do
  local m, seen = ARGV[i], false
  for k = 2, #KEYS do
    if redis.call('SISMEMBER', KEYS[k], m) == 1 then seen = true break end
  end
  if not seen then joined = joined + 1 end
  redis.call('SADD', KEYS[1], m)
end
redis.call('EXPIRE', KEYS[1], ARGV[1], 'NX')
redis.call('EXPIRE', KEYS[1], ARGV[1], 'GT')
return joined
