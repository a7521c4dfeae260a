local now = tonumber(ARGV[1])
local on, aw, win, ret, rem, rg = cfg_load(KEYS[5], 2)
local z = {u = KEYS[1], g = KEYS[2]}
local rz = {u = KEYS[6], g = KEYS[7]}
local mk = {}
for _, k in ipairs({'u', 'g'}) do mk[k] = marks_load(KEYS[4], k, now, on, aw) end
local present = 0
local ev = {}
for i = 10, #ARGV, 3 do
  local k, id, upto = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local s = redis.call('ZSCORE', z[k], id)
  if s then s = tonumber(s) end
  if s and upto and s > upto then s = nil end
  if s then
    local t = s
    if presence(mk[k], s, id) ~= 0 then
      present = present + 1
      ev_add(ev, KEYS[3], 'leave', k, id, s, 0, 'explicit')
      t = upto or now
      if t < s then t = s end
    end
    redis.call('ZREM', z[k], id)
    redis.call('HDEL', KEYS[3], k .. ':' .. id)
    remember(rz[k], k, id, t, now, rem, rg)
  end
end
publish(KEYS[4], ARGV[8], ARGV[9], ev)
return {present, WH}
