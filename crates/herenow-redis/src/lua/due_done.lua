local d = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not d or tonumber(d) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then redis.call('HDEL', KEYS[3], ARGV[1]) end
return 1
