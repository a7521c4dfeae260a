local now, away = tonumber(ARGV[1]), tonumber(ARGV[2])
local accepted, joined, stale = 0, 0, 0
for i = 3, #ARGV, 2 do
  local s, m = tonumber(ARGV[i]), ARGV[i + 1]
  local old = redis.call('ZSCORE', KEYS[1], m)
  if old and tonumber(old) > s then
    stale = stale + 1
  else
    accepted = accepted + 1
    if (not old or now - tonumber(old) * 1000 >= away) and now - s * 1000 < away then
      joined = joined + 1
    end
    redis.call('ZADD', KEYS[1], 'GT', s, m)
  end
end
return {accepted, joined, stale}
