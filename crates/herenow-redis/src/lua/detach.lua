local now = tonumber(ARGV[1])
local k, id, conn = ARGV[10], ARGV[11], ARGV[12]
local rec = redis.call('HGET', CK.cinfo, conn)
if not rec then return {0, 0} end
local _, pk, pid = cinfo_dec(rec)
if pk ~= k or pid ~= id then return {0, 0} end
local on, aw, win, ret, rem, rg = cfg_load(CK.config, 2)
local ev = {}
local left = conn_drop(conn, rec, now, on, aw, {now = now, rem = rem, rg = rg}, 'explicit', ev)
publish(CK.state, ARGV[8], ARGV[9], ev)
return {1, left, WH}
