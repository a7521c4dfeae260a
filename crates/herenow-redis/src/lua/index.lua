for i = 1, #KEYS do redis.call('ZADD', KEYS[i], ARGV[1], ARGV[2]) end
return #KEYS
