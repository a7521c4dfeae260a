local new = {}
for i = 1, #ARGV do new[ARGV[i]] = true end
local old = {}
local removed, added = {}, {}
for _, f in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  old[f] = true
  if not new[f] then removed[#removed + 1] = f end
end
for i = 1, #ARGV do
  if not old[ARGV[i]] then added[#added + 1] = ARGV[i] end
end
redis.call('DEL', KEYS[1])
for i = 1, #ARGV, 500 do
  local j = i + 499
  if j > #ARGV then j = #ARGV end
  redis.call('SADD', KEYS[1], unpack(ARGV, i, j))
end
return {redis.call('SCARD', KEYS[1]), removed, added}
