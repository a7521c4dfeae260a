local n = redis.call('SUNIONSTORE', KEYS[1], unpack(KEYS, 2))
redis.call('DEL', KEYS[1])
return n
