redis.call('XADD', KEYS[1], '*', 't', ARGV[1], 'e', ARGV[4])
local cut = redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[2])
if cut > 0 then redis.call('HINCRBY', KEYS[2], 'trimmed', cut) end
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
