"""Medians of EVALSHA durations (us) in a `redis-cli SLOWLOG GET 100000` dump, by
script, key count, publish argument and first count argument.
Captured during `./outbox_cost.new` (20,000 members; CONFIG SET slowlog-log-slower-than 30,
slowlog-max-len 100000; SLOWLOG GET after 30 s):  python3 parse_slow.py slow.txt"""
import collections, sys
lines = open(sys.argv[1]).read().split('\n')
c = collections.Counter(); d = collections.defaultdict(list)
for i in range(len(lines) - 40):
    if lines[i] == 'EVALSHA':
        dur = int(lines[i - 1]); sha = lines[i + 1][:8]; nk = lines[i + 2]
        j = i + 3
        while j < i + 40 and not lines[j].startswith('PUBLISH'):
            j += 1
        key = (sha, nk, lines[j][:24] if j < i + 40 else '?', lines[j + 2] if j < i + 40 else '?')
        c[key] += 1; d[key].append(dur)
for k, v in c.most_common(15):
    ds = sorted(d[k]); print(v, 'median', ds[len(ds) // 2], 'p90', ds[int(len(ds) * .9)], k)
