local len = redis.call('XLEN', KEYS[1])
local pend = 0
if len > 0 or redis.call('EXISTS', KEYS[1]) == 1 then
  local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])
  if ok then pend = tonumber(p[1]) end
end
return {len, pend, tonumber(redis.call('HGET', KEYS[2], 'trimmed') or '0')}
