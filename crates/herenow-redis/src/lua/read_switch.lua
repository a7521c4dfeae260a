local v = redis.call('MGET', KEYS[1], KEYS[2])
if v[1] and redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return v
