local now = tonumber(ARGV[1])
local on, aw = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('HSET', KEYS[2], 'online', ARGV[2], 'away', ARGV[3], 'window', ARGV[4], 'retention', ARGV[5],
  'remember', ARGV[6], 'rguests', ARGV[7], 'grace', ARGV[8])
for _, k in ipairs({'u', 'g'}) do marks_save(KEYS[1], k, {now - on, '', now - aw, ''}) end
return 1
