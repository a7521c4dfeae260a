local on, aw, win, ret = cfg_load(KEYS[3], 1)
local w = tonumber(ARGV[8])
if w == 0 then w = win end
if w < 1 or w > ret then return {-1, S(ret)} end
local cut = S(tonumber(ARGV[7]) - w)
return {redis.call('ZCOUNT', KEYS[1], cut, '+inf'), redis.call('ZCOUNT', KEYS[2], cut, '+inf')}
