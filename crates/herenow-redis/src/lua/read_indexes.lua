local out = {}
for i = 1, #KEYS do out[i] = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES') end
return out
