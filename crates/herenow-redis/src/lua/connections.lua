local out = {}
for i = 1, #ARGV do
  local items = {}
  local list = redis.call('HGET', KEYS[3], ARGV[i])
  if list then
    for e in string.gmatch(list, '%S+') do
      local conn = string.sub(e, 2)
      local rec = redis.call('HGET', KEYS[2], conn)
      local exp = redis.call('ZSCORE', KEYS[1], conn)
      if rec and exp then
        local nl = string.find(rec, '\n', 3, true)
        items[#items + 1] = conn
        items[#items + 1] = exp
        items[#items + 1] = string.sub(rec, 1, 1)
        items[#items + 1] = string.sub(rec, nl + 1)
      end
    end
  end
  out[i] = items
end
return out
