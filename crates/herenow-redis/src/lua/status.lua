local on, aw, win, ret, rem, rg = cfg_load(KEYS[4], 1)
local g = 0
if rg then g = 1 end
local out = {S(on), S(aw), S(win), S(ret), S(rem), g}
local z = {u = KEYS[1], g = KEYS[2]}
local rz = {u = KEYS[5], g = KEYS[6]}
for i = 7, #ARGV, 2 do
  local k, id = ARGV[i], ARGV[i + 1]
  local s = redis.call('ZSCORE', z[k], id)
  out[#out + 1] = s
  if s then
    out[#out + 1] = redis.call('HGET', KEYS[3], k .. ':' .. id)
    out[#out + 1] = false
  else
    out[#out + 1] = false
    out[#out + 1] = redis.call('ZSCORE', rz[k], id)
  end
end
return out
