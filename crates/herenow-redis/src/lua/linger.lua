local now = tonumber(ARGV[1])
local k, id, conn = ARGV[10], ARGV[11], ARGV[12]
local rec = redis.call('HGET', CK.cinfo, conn)
if not rec then return {0, 0} end
local inv, pk, pid, meta = cinfo_dec(rec)
if pk ~= k or pid ~= id then return {0, 0} end
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
local grace = redis.call('HGET', CK.config, 'grace')
if grace then grace = tonumber(grace) else grace = tonumber(ARGV[13]) end
-- When the connection ended: now, or earlier for a dead server's.
local at = now
if ARGV[14] and ARGV[14] ~= '' then at = math.min(now, tonumber(ARGV[14])) end
local ev = {}
if inv == '1' or grace == 0 then
  local left = conn_drop(conn, rec, now, on, aw, {now = at, rem = rem, rg = rg}, 'explicit', ev)
  publish(CK.state, ARGV[8], ARGV[9], ev)
  return {1, left, WH}
end
if inv == '2' then return {1, 0} end
local mf = k .. ':' .. id
redis.call('HSET', CK.cinfo, conn, cinfo_enc('2', k, id, meta))
redis.call('HSET', CK.mconn, mf, mc_set(redis.call('HGET', CK.mconn, mf) or '', conn, '2'))
redis.call('ZADD', CK.conns, S(at + grace), conn)
-- Last seen when the connection ended, not at its last ping, if it held
-- the member online (an away member stays away, seen last at its last
-- activity): no event either way.
local z = CK.z[k]
local old = redis.call('ZSCORE', z, id)
if old then
  old = tonumber(old)
  if old < at and presence(marks_load(CK.state, k, now, on, aw), old, id) == 2 then
    redis.call('ZADD', z, S(at), id)
  end
end
return {1, 0}
