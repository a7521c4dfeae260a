local on, aw, win, ret = cfg_load(KEYS[2], 1)
local w = tonumber(ARGV[8])
if w == 0 then w = win end
if w < 1 or w > ret then return {-1, S(ret)} end
local cut = tonumber(ARGV[7]) - w
local n = tonumber(ARGV[11])
local from, in_window
if ARGV[9] == '' then
  from = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. S(cut))
  in_window = redis.call('ZCARD', KEYS[1]) - from
else
  from = count_le(KEYS[1], tonumber(ARGV[9]), ARGV[10])
  in_window = -1
end
local ids = {}
if n > 0 then ids = redis.call('ZRANGE', KEYS[1], from, from + n - 1) end
local last = ''
if #ids > 0 then last = S(tonumber(redis.call('ZSCORE', KEYS[1], ids[#ids]))) end
return {0, in_window, last, ids}
