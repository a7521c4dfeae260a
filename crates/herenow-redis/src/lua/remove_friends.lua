for i = 1, #ARGV, 500 do
  local j = i + 499
  if j > #ARGV then j = #ARGV end
  redis.call('SREM', KEYS[1], unpack(ARGV, i, j))
end
return redis.call('SCARD', KEYS[1])
