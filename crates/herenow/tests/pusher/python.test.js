// PyPI's `pusher` library (the Django side) against a running `herenow
// serve --pusher-app`: its trigger reaches pusher-js subscribers (and a
// refused one raises the library's error with the server's reason), and
// its authenticate output is what pusher-js hands the server for private
// and presence channels. pusher_py.py runs the library; PYTHON is the venv's
// interpreter. Run by pusher_clients.rs as `node --test python.test.js`
// with HERENOW_URL, PUSHER_APP and PYTHON set.

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const path = require('node:path');
const PusherJS = require('pusher-js');
const { until, within } = require('./harness');

const url = new URL(process.env.HERENOW_URL);
const [, key] = process.env.PUSHER_APP.split(':');

// The library, once per call, as a Django view would call it.
function py(...args) {
  return within(`pusher_py.py ${args[0]}`, new Promise((resolve, reject) => {
    execFile(process.env.PYTHON, [path.join(__dirname, 'pusher_py.py'), ...args], (err, stdout, stderr) => {
      if (err) reject(new Error(`pusher_py.py ${args.join(' ')}: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout));
    });
  }));
}

const open = [];

// pusher-js as docs/PUSHER.md configures it; its auth endpoint is the Django view
// that answers with the library's authenticate().
function client(member) {
  const c = new PusherJS(key, {
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    cluster: 'mt1',
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) => {
        const args = ['authenticate', channelName, socketId];
        if (member) args.push(JSON.stringify(member));
        py(...args).then((auth) => callback(null, auth), (e) => callback(e, null));
      },
    },
  });
  open.push(c);
  return c;
}

test.after(() => {
  for (const c of open) c.disconnect();
});

function subscribed(c, name) {
  const channel = c.subscribe(name);
  return within(`subscribed to ${name}`, new Promise((resolve, reject) => {
    channel.bind('pusher:subscription_succeeded', (data) => resolve({ channel, data }));
    channel.bind('pusher:subscription_error', (e) => reject(new Error(`refused: ${JSON.stringify(e)}`)));
  }));
}

test('trigger from Python reaches pusher-js subscribers, but not the excluded socket', async () => {
  const a = client();
  const b = client();
  const { channel: ca } = await subscribed(a, 'django-news');
  const { channel: cb } = await subscribed(b, 'django-news');
  const atA = [];
  const atB = [];
  ca.bind('published', (d) => atA.push(d));
  cb.bind('published', (d) => atB.push(d));
  assert.deepEqual(await py('trigger', 'django-news', 'published', '{"title":"one"}', a.connection.socket_id), {});
  await py('trigger', 'django-news', 'published', '{"title":"two"}');
  await until('both at B', () => atB.length === 2);
  await until('the second at A', () => atA.length === 1);
  assert.deepEqual(atB, [{ title: 'one' }, { title: 'two' }]);
  assert.deepEqual(atA, [{ title: 'two' }]);
});

test('authenticate output is accepted for a private channel', async () => {
  const a = client();
  const b = client();
  const { channel: ca } = await subscribed(a, 'private-django');
  const { channel: cb } = await subscribed(b, 'private-django');
  const got = [];
  cb.bind('client-ping', (d) => got.push(d));
  ca.trigger('client-ping', { n: 1 });
  const saved = [];
  ca.bind('saved', (d) => saved.push(d));
  await py('trigger', 'private-django', 'saved', '{"ok":true}');
  await until('the client event at B', () => got.length === 1);
  await until('the Python event at A', () => saved.length === 1);
});

test('authenticate output with custom_data is a presence member', async () => {
  const ada = client({ user_id: 'ada', user_info: { name: 'Ada' } });
  const bob = client({ user_id: 42, user_info: { name: 'Bob' } });
  const { channel: ca, data: first } = await subscribed(ada, 'presence-django');
  assert.equal(first.count, 1);
  const added = [];
  ca.bind('pusher:member_added', (m) => added.push(m));
  const { data: roster } = await subscribed(bob, 'presence-django');
  assert.equal(roster.count, 2);
  assert.deepEqual(roster.get('ada'), { id: 'ada', info: { name: 'Ada' } });
  await until('Bob added at Ada', () => added.length === 1);
  // A numeric user_id is the member "42".
  assert.deepEqual(added, [{ id: '42', info: { name: 'Bob' } }]);
});

test('a trigger signed with another secret is refused: PusherBadAuth says why', async () => {
  const refused = await within('refused', new Promise((resolve) => {
    execFile(process.env.PYTHON, [path.join(__dirname, 'pusher_py.py'), 'trigger', 'django', 'e', '"x"'],
      { env: { ...process.env, PUSHER_APP: process.env.PUSHER_APP.replace(/:[^:]*$/, ':not-the-secret') } },
      (err, stdout, stderr) => resolve({ err, stderr }));
  }));
  assert.ok(refused.err, 'the trigger failed');
  // The library raises PusherBadAuth with the body as its message (issue 44).
  assert.match(refused.stderr, /PusherBadAuth: invalid signature/);
});

test('an authenticate by another app\'s secret is refused', async () => {
  // A socket whose Django view signs with a wrong secret.
  const c = new PusherJS(key, {
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    cluster: 'mt1',
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) => {
        execFile(process.env.PYTHON, [path.join(__dirname, 'pusher_py.py'), 'authenticate', channelName, socketId],
          { env: { ...process.env, PUSHER_APP: process.env.PUSHER_APP.replace(/:[^:]*$/, ':not-the-secret') } },
          (err, stdout) => (err ? callback(err, null) : callback(null, JSON.parse(stdout))));
      },
    },
  });
  open.push(c);
  const refused = await within('refused', new Promise((resolve) => {
    c.subscribe('private-django').bind('pusher:subscription_error', resolve);
  }));
  assert.equal(refused.status, 401);
});
