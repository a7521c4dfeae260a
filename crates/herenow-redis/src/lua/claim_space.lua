local o = redis.call('HMGET', KEYS[1], 'owner', 'at')
if o[1] == ARGV[1] then return 0 end
if o[1] and tonumber(ARGV[2]) - tonumber(o[2]) < tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'at', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 86400000)
return 1
