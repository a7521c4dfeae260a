if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local t = redis.call('ZSCORE', KEYS[2], ARGV[1])
if t and tonumber(t) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[3] ~= '1' then redis.call('HDEL', KEYS[3], ARGV[1]) end
return 1
