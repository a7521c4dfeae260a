local on, aw, win, ret = cfg_load(KEYS[4], 1)
local w = tonumber(ARGV[8])
if w == 0 then w = win end
if w < 1 or w > ret then return {-1, S(ret)} end
local cut = tonumber(ARGV[7]) - w
local want = tonumber(ARGV[9]) + 1
local kinds = ARGV[10]
local cs, ck, cm = ARGV[11], ARGV[12], ARGV[13]
local rank = {u = 1, g = 0}
local out = {0, S(on), S(aw), S(win), S(ret), {}, {}}
local zs = {KEYS[1], KEYS[2]}
for i, k in ipairs({'u', 'g'}) do
  if kinds == 'a' or kinds == k then
    local z = zs[i]
    local top
    if cs == '' then
      top = redis.call('ZCARD', z)
    else
      local s = tonumber(cs)
      if rank[k] < rank[ck] then
        top = redis.call('ZCOUNT', z, '-inf', cs)
      elseif rank[k] > rank[ck] then
        top = redis.call('ZCOUNT', z, '-inf', '(' .. cs)
      else
        top = count_lt(z, s, cm)
      end
    end
    local items = {}
    if top > 0 then
      local from = top - want
      if from < 0 then from = 0 end
      local xs = redis.call('ZRANGE', z, from, top - 1, 'WITHSCORES')
      for j = #xs - 1, 1, -2 do
        local id, s = xs[j], tonumber(xs[j + 1])
        if s < cut then break end
        items[#items + 1] = id
        items[#items + 1] = xs[j + 1]
        items[#items + 1] = redis.call('HGET', KEYS[3], k .. ':' .. id)
      end
    end
    out[5 + i] = items
  end
end
return out
