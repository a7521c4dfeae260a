local joined = 0
for i = 1, #ARGV do
  local m = ARGV[i]
  if redis.call('SISMEMBER', KEYS[1], m) == 0 and redis.call('SISMEMBER', KEYS[2], m) == 0 then
    joined = joined + 1
  end
  redis.call('SADD', KEYS[1], m)
end
return joined
