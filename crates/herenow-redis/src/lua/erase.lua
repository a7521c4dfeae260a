local now = tonumber(ARGV[1])
local id = ARGV[10]
local mf = 'u:' .. id
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
local ev = {}
local present, remembered, closed = 0, 0, 0
local list = redis.call('HGET', CK.mconn, mf)
if list then
  for e in string.gmatch(list, '%S+') do
    local conn = string.sub(e, 2)
    redis.call('ZREM', CK.conns, conn)
    redis.call('HDEL', CK.cinfo, conn)
    closed = closed + 1
  end
  redis.call('HDEL', CK.mconn, mf)
end
local s = redis.call('ZSCORE', CK.z.u, id)
if s then
  s = tonumber(s)
  local x = marks_load(CK.state, 'u', now, on, aw)
  if presence(x, s, id) ~= 0 then
    present = 1
    ev_add(ev, CK.meta, 'leave', 'u', id, s, 0, 'explicit')
  end
  redis.call('ZREM', CK.z.u, id)
  redis.call('HDEL', CK.meta, mf)
end
local r = redis.call('ZSCORE', CK.rz.u, id)
if r then
  if remembers('u', rem, rg) and now < tonumber(r) + rem then remembered = 1 end
  redis.call('ZREM', CK.rz.u, id)
end
redis.call('SREM', CK.unidx, id)
publish(CK.state, ARGV[8], ARGV[9], ev)
return {present, remembered, closed, WH}
