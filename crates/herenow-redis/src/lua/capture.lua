local WH = {0, 0}
local WH_KINDS = {join = true, away = true, back = true, leave = true, update = true}
-- Members of the shard above the gone watermark, both kinds: `base` is
-- the shard's key prefix `P:{T}:`. A shard without watermarks yet stores
-- nobody who could be gone.
local function wh_present(base, state)
  local v = redis.call('HMGET', state, 'gsu', 'gmu', 'gsg', 'gmg')
  local n = 0
  for i, k in ipairs({'u', 'g'}) do
    local z = base .. k
    local c = redis.call('ZCARD', z)
    if c > 0 and v[2 * i - 1] then c = c - count_le(z, tonumber(v[2 * i - 1]), v[2 * i]) end
    n = n + c
  end
  return n
end
local function wh_add(stream, what)
  redis.call('XADD', stream, '*', 't', ARGV[1], 'e', what)
end
-- `spec` is `CMD CAP MODE KEEP`; `enc` the events' encoded tuples.
local function wh_capture(spec, state, chan, ev, enc)
  local cap, mode, keep = string.match(spec, ' (%d+) (%d) (%d+)$')
  local base = string.sub(chan, 1, #chan - 6)
  local stream = base .. 'wh'
  local joins, leaves = 0, 0
  for _, e in ipairs(ev) do
    if e[1] == 'join' then joins = joins + 1 elseif e[1] == 'leave' then leaves = leaves + 1 end
  end
  local shift = 0
  if joins > 0 or leaves > 0 then
    local after = wh_present(base, state)
    local before = after - joins + leaves
    if before <= 0 and after > 0 then shift = 1 elseif before > 0 and after <= 0 then shift = -1 end
  end
  local n = 0
  if shift == 1 and mode == '1' then
    wh_add(stream, '["occupied"]')
    n = n + 1
  end
  for i, e in ipairs(ev) do
    if WH_KINDS[e[1]] then
      wh_add(stream, enc[i])
      n = n + 1
    end
  end
  if shift == -1 and mode == '1' then
    wh_add(stream, '["vacated"]')
    n = n + 1
  end
  if n > 0 then
    local cut = redis.call('XTRIM', stream, 'MAXLEN', cap)
    if cut > 0 then redis.call('HINCRBY', base .. 'whs', 'trimmed', cut) end
    if keep ~= '0' then
      redis.call('PEXPIRE', stream, keep)
      redis.call('PEXPIRE', base .. 'whs', keep)
    end
    WH[1] = WH[1] + n
  end
  if shift ~= 0 and mode == '2' then
    WH[2] = shift * redis.call('HINCRBY', state, 'whocc', 1)
  end
end
