if redis.call('EXISTS', KEYS[1]) == 0 then return {0, false} end
local g = ARGV[1]
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], g, ARGV[2], ARGV[2], 1)
if not ok then return {0, false} end
local holder = false
if p[1] then holder = p[1][2] end
for i = 2, #ARGV, 500 do
  local e = i + 499
  if e > #ARGV then e = #ARGV end
  redis.call('XACK', KEYS[1], g, unpack(ARGV, i, e))
  redis.call('XDEL', KEYS[1], unpack(ARGV, i, e))
end
return {tonumber(redis.call('XPENDING', KEYS[1], g)[1]), holder}
