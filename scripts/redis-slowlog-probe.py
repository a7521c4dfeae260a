#!/usr/bin/env python3
"""Redis' own time per one-member script call, from SLOWLOG with a 0 us
threshold, on a redis-server already running on the port given (FLUSHALL
between runs). Loads herenow's HEARTBEAT and LEAVE scripts as the store
builds them (prelude + body, read from crates/herenow-redis/src), makes N
members present, then sends 2,000 single leave/join pairs and 2N-4000
steady one-member heartbeats (no event), pipelined 50 at a time.

    redis-server --port 7701 --save "" --appendonly no --daemonize yes
    for v in base prelude calls0 calls4; do redis-cli -p 7701 FLUSHALL; N=4000 python3 scripts/redis-slowlog-probe.py $v 7701; done

Variants cut the scripts down: `prelude` (the shared helpers, then
`return 1`), `calls0` (`return 1`), `calls4` (four one-field HMGETs).
"""
import re, socket, sys, subprocess, time, os
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
src = open(os.path.join(ROOT, 'crates/herenow-redis/src/scripts.rs')).read()
osrc = open(os.path.join(ROOT, 'crates/herenow-redis/src/outbox_scripts.rs')).read()
def raw(text, name):
    m = re.search(r'(?:const|static) ' + name + r'\b.*?r#"(.*?)"#', text, re.S)
    return m.group(1)
HELPERS = raw(src, 'HELPERS'); PUBLISH = raw(src, 'PUBLISH'); CAPTURE = raw(osrc, 'CAPTURE')
PRE = HELPERS + CAPTURE + PUBLISH
HB = PRE + '\n' + raw(src, 'HEARTBEAT'); LV = PRE + '\n' + raw(src, 'LEAVE')
variant = sys.argv[1] if len(sys.argv) > 1 else 'base'
if variant == 'nopub':
    HB = HB.replace("redis.call(cmd, chan, '[' .. table.concat(enc, ',') .. ']')", "")
    LV = LV.replace("redis.call(cmd, chan, '[' .. table.concat(enc, ',') .. ']')", "")
if variant == 'nouserpub':
    HB = HB.replace("redis.call('PUBLISH', p .. ':u:' .. e[3]", "local _ = (p .. ':u:' .. e[3]")
    LV = LV.replace("redis.call('PUBLISH', p .. ':u:' .. e[3]", "local _ = (p .. ':u:' .. e[3]")
if variant == 'prelude':
    HB = PRE + '\nreturn 1'; LV = PRE + '\nreturn 1'
if variant == 'noenc':
    HB = HB.replace("enc[i] = cjson.encode(e)", "enc[i] = 'x'"); LV = LV.replace("enc[i] = cjson.encode(e)", "enc[i] = 'x'")
if variant == 'nohincr':
    HB = HB.replace("local last = redis.call('HINCRBY', state, 'seq', #ev)", "local last = 5"); LV = LV.replace("local last = redis.call('HINCRBY', state, 'seq', #ev)", "local last = 5")
if variant == 'calls4':
    HB = "for i=1,4 do redis.call('HMGET', KEYS[5], 'online') end return 1"; LV = HB
if variant == 'calls0':
    HB = "return 1"; LV = HB
if variant == 'empty':
    HB = 'return 1'; LV = 'return 1'
def enc(*args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)
port = int(sys.argv[2])
s = socket.create_connection(('127.0.0.1', port))
def cmd(*a):
    s.sendall(enc(*a)); return s.recv(1 << 20)
hb = cmd('SCRIPT', 'LOAD', HB).split(b'\r\n')[1].decode()
lv = cmd('SCRIPT', 'LOAD', LV).split(b'\r\n')[1].decode()
K = ['p:{c}:u','p:{c}:g','p:{c}:meta','p:{c}:state','p:{c}:config','p:{c}:ru','p:{c}:rg','p:{c}:unidx']
D = ['60000','300000','600000','900000','2592000000','0','PUBLISH','p:{c}:events']
N = int(os.environ.get('N', '1000'))
# members present
ids = ['u%07d' % i for i in range(N)]
for j in range(0, N, 500):
    chunk = ids[j:j+500]
    cmd('EVALSHA', hb, 8, *K, '1700000001000', *D, len(chunk), 0, *chunk)
cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); cmd('CONFIG', 'SET', 'slowlog-max-len', '100000'); cmd('SLOWLOG', 'RESET')
buf = []
for m in ids[:2000]:
    buf.append(enc('EVALSHA', lv, 7, *K[:7], '1700000002000', *D, 'u', m, ''))
    buf.append(enc('EVALSHA', hb, 8, *K, '1700000002000', *D, 1, 0, m))
for m in ids[2000:4000] if N >= 4000 else []:
    buf.append(enc('EVALSHA', hb, 8, *K, '1700000002000', *D, 1, 0, m) + enc('EVALSHA', hb, 8, *K, '1700000002000', *D, 1, 0, m))
for i in range(0, len(buf), 50):
    s.sendall(b''.join(buf[i:i+50]))
    time.sleep(0.002)
time.sleep(1)
s.setblocking(False)
try:
    while s.recv(1 << 20): pass
except BlockingIOError: pass
s.setblocking(True)
import subprocess
out = subprocess.run(['redis-cli', '-p', str(port), 'SLOWLOG', 'GET', '100000'], capture_output=True, text=True).stdout.split('\n')
d = {lv: [], hb: []}
for i, l in enumerate(out):
    if l == 'EVALSHA' and out[i+1] in d:
        d[out[i+1]].append((int(out[i-1]), out[i+22] if out[i+1]==hb else ''))
allv = sorted(x[0] for x in d[hb]); print(variant, 'all', len(allv), 'median', allv[len(allv)//2], 'p10', allv[len(allv)//10])
if HB == LV: sys.exit(0)
st = sorted(x[0] for x in d[hb] if x[1] and int(x[1][1:] or 0) >= 2000)
jn = sorted(x[0] for x in d[hb] if x[1] and int(x[1][1:] or 0) < 2000)
lvv = sorted(x[0] for x in d[lv])
for name, v in (('leave', lvv), ('join', jn), ('steady', st)):
    print(variant, name, len(v), 'median', v[len(v)//2] if v else None, 'p10', v[len(v)//10] if v else None)
