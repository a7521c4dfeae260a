for i = 1, #ARGV do redis.call('PUBLISH', ARGV[i], 'friends') end
return #ARGV
