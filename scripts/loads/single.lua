-- wrk: one heartbeat per request into space "load", for ids spread over
-- 100k users (user-0 ... user-99999, 7919 apart: every id once per 100k
-- requests). Shared by the bench-*.sh scripts.
local counter = 0
request = function()
  counter = counter + 1
  local id = (counter * 7919) % 100000
  return wrk.format("POST", "/v1/spaces/load/heartbeat",
    {["Content-Type"] = "application/json"}, '{"id":"user-' .. id .. '"}')
end
