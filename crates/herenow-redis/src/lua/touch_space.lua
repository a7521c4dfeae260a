if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'at', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], 86400000)
end
return 1
