-- Status changes of users (join, away, back, leave) also go to each
-- user's own channel, P:u:ID, for the servers that follow the user
-- (follow.rs): `[space, tuple]`, the tuple without metadata. Always
-- classic PUBLISH: a script may not SPUBLISH outside its slot, and a
-- cluster carries a PUBLISH to every node. P and the space are read from
-- the space's channel, P:{S}:events or P:{S#k}:events (a space name needs
-- no JSON escaping). Each tuple is encoded once, for both messages, unless
-- it has metadata to leave out.
local STATUS_EVENTS = {join = true, away = true, back = true, leave = true}
local function publish(state, cmd, chan, ev)
  if #ev == 0 then return end
  local spec = nil
  if #cmd > 8 then spec, cmd = cmd, string.match(cmd, '^%u+') end
  local last = redis.call('HINCRBY', state, 'seq', #ev)
  local enc = {}
  for i, e in ipairs(ev) do
    e[8] = S(last - #ev + i)
    enc[i] = cjson.encode(e)
  end
  redis.call(cmd, chan, '[' .. table.concat(enc, ',') .. ']')
  if spec then wh_capture(spec, state, chan, ev, enc) end
  local p, s = string.match(chan, '^(.*):{([^{}#]*)[^{}]*}:events$')
  if not p then return end
  for i, e in ipairs(ev) do
    if e[2] == 'u' and STATUS_EVENTS[e[1]] then
      local t = enc[i]
      if e[7] then t = cjson.encode({e[1], e[2], e[3], e[4], e[5], e[6], false, e[8], e[9]}) end
      redis.call('PUBLISH', p .. ':u:' .. e[3], '["' .. s .. '",' .. t .. ']')
    end
  end
end
