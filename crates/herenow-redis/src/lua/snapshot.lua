local now = tonumber(ARGV[1])
local on, aw = cfg_load(KEYS[5], 2)
local max = tonumber(ARGV[8])
local seq = tonumber(redis.call('HGET', KEYS[4], 'seq') or '0')
local out = {seq, 0, 0, {}, {}}
local zs = {KEYS[1], KEYS[2]}
for i, k in ipairs({'u', 'g'}) do
  local x = marks_load(KEYS[4], k, now, on, aw)
  local card = redis.call('ZCARD', zs[i])
  local first = count_le(zs[i], x[3], x[4])
  out[1 + i] = card - first
  local from = first
  if card - first > max then from = card - max end
  if from < card then
    local xs = redis.call('ZRANGE', zs[i], from, card - 1, 'WITHSCORES')
    local items = {}
    for j = 1, #xs, 2 do
      local id, s = xs[j], tonumber(xs[j + 1])
      items[#items + 1] = id
      items[#items + 1] = xs[j + 1]
      items[#items + 1] = presence(x, s, id)
      items[#items + 1] = redis.call('HGET', KEYS[3], k .. ':' .. id)
    end
    out[3 + i] = items
  end
end
return out
