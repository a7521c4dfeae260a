local k, s = ARGV[3], tonumber(ARGV[4])
local prev = tonumber(redis.call('HGET', KEYS[1], k) or '0')
if math.abs(prev) >= math.abs(s) then return 0 end
redis.call('HSET', KEYS[1], k, ARGV[4])
local was, is = prev > 0, s > 0
if was == is then return 0 end
local d = -1
if is then d = 1 end
local n = redis.call('HINCRBY', KEYS[1], 'n', d)
local what
if is and n == 1 then what = '["occupied"]' elseif not is and n == 0 then what = '["vacated"]' end
if not what then return 0 end
if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[2]) then
  local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1]
  if first and tonumber(first[2][2]) >= tonumber(ARGV[1]) then
    redis.call('HINCRBY', KEYS[3], 'trimmed', 1)
    return 0
  end
end
redis.call('XADD', KEYS[2], '*', 't', ARGV[1], 'e', what)
local cut = redis.call('XTRIM', KEYS[2], 'MAXLEN', ARGV[2])
if cut > 0 then redis.call('HINCRBY', KEYS[3], 'trimmed', cut) end
if ARGV[5] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return 1
