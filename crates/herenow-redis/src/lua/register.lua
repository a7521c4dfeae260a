local rec = redis.call('HGET', KEYS[3], ARGV[1])
if rec and rec ~= ARGV[3] then return -tonumber(rec) end
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
if not rec then redis.call('HSET', KEYS[3], ARGV[1], ARGV[3]) end
return 1
