for i = 1, #KEYS do redis.call(ARGV[1], KEYS[i], ARGV[2]) end
return #KEYS
