// pusher-js in headless Chromium against a running `herenow serve
// --pusher-app`: a page served here (pusher-js's own dist file from
// node_modules, nothing from a CDN; its auth endpoint signs with the npm
// `pusher` library) joins a presence channel as Ada and sees Bob, a
// pusher-js client in Node, join and leave; an event triggered by the
// server library reaches it. Chromium is Debian's (HERENOW_CHROMIUM
// overrides /usr/bin/chromium), driven by playwright-core as
// crates/herenow-server/tests/browser.rs drives it. Run by
// pusher_clients.rs as `node --test browser.test.js` with HERENOW_URL and
// PUSHER_APP set.

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { chromium } = require('playwright-core');
const PusherJS = require('pusher-js');
const Pusher = require('pusher');
const { STEP, until, authServer } = require('./harness');

const url = new URL(process.env.HERENOW_URL);
const [appId, key, secret] = process.env.PUSHER_APP.split(':');
const backend = new Pusher({ appId, key, secret, host: url.hostname, port: url.port, useTLS: false });
const NAMES = { ada: 'Ada Lovelace', bob: 'Bob Kahn' };

// The page: docs/PUSHER.md's pusher-js options, the channel's members and events
// kept in window.seen for the test to read.
function page() {
  const options = {
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    cluster: 'mt1',
    channelAuthorization: { endpoint: '/pusher/auth', headers: { Authorization: 'Bearer ada' } },
  };
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>pusher-js</title>
<script src="/pusher.min.js"></script></head>
<body><ul id="members"></ul>
<script>
  window.seen = { subscribed: false, members: [], added: [], removed: [], events: [], errors: [] };
  const pusher = new Pusher(${JSON.stringify(key)}, ${JSON.stringify(options)});
  const room = pusher.subscribe('presence-browser');
  const ids = () => { const out = []; room.members.each((m) => out.push(m.id)); return out.sort(); };
  room.bind('pusher:subscription_succeeded', () => { seen.subscribed = true; seen.members = ids(); seen.me = room.members.me; });
  room.bind('pusher:subscription_error', (e) => seen.errors.push(e));
  room.bind('pusher:member_added', (m) => { seen.added.push(m); seen.members = ids(); });
  room.bind('pusher:member_removed', (m) => { seen.removed.push(m); seen.members = ids(); });
  room.bind('news', (d) => seen.events.push(d));
  pusher.connection.bind('error', (e) => seen.errors.push(e));
</script></body></html>`;
}

test('a page on pusher-js sees a member from Node join and leave', async (t) => {
  const dist = fs.readFileSync(path.join(__dirname, 'node_modules/pusher-js/dist/web/pusher.min.js'));
  const auth = await authServer({
    decide: (user) => (user ? { user_id: user, user_info: { name: NAMES[user] } } : 403),
    sign: (socketId, channel, data) => backend.authorizeChannel(socketId, channel, data),
    routes: {
      '/': (req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(page()); },
      '/pusher.min.js': (req, res) => { res.writeHead(200, { 'content-type': 'text/javascript' }); res.end(dist); },
    },
  });
  t.after(() => auth.close());
  const browser = await chromium.launch({
    executablePath: process.env.HERENOW_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    timeout: STEP,
  });
  t.after(() => browser.close());
  const tab = await browser.newPage();
  const pageErrors = [];
  tab.on('pageerror', (e) => pageErrors.push(String(e)));
  // Nothing but this test's two servers is fetched.
  const fetched = [];
  tab.on('request', (r) => fetched.push(new URL(r.url()).host));
  await tab.goto(`${auth.url}/`, { timeout: STEP });
  const seen = () => tab.evaluate(() => window.seen);
  await tab.waitForFunction(() => window.seen.subscribed || window.seen.errors.length, null, { timeout: STEP });
  let s = await seen();
  assert.deepEqual(s.errors, []);
  assert.deepEqual(s.members, ['ada']);
  assert.deepEqual(s.me, { id: 'ada', info: { name: 'Ada Lovelace' } });

  const bob = new PusherJS(key, {
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    cluster: 'mt1',
    channelAuthorization: { endpoint: `${auth.url}/pusher/auth`, headers: { Authorization: 'Bearer bob' } },
  });
  t.after(() => bob.disconnect());
  const bobRoom = bob.subscribe('presence-browser');
  const bobSaw = await new Promise((resolve) => bobRoom.bind('pusher:subscription_succeeded', resolve));
  assert.equal(bobSaw.count, 2);
  assert.deepEqual(bobSaw.get('ada').info, { name: 'Ada Lovelace' });
  await tab.waitForFunction(() => window.seen.added.length === 1, null, { timeout: STEP });
  s = await seen();
  assert.deepEqual(s.added, [{ id: 'bob', info: { name: 'Bob Kahn' } }]);
  assert.deepEqual(s.members, ['ada', 'bob']);

  await backend.trigger('presence-browser', 'news', { text: 'to the page' }, { socket_id: bob.connection.socket_id });
  await tab.waitForFunction(() => window.seen.events.length === 1, null, { timeout: STEP });

  bob.disconnect();
  await tab.waitForFunction(() => window.seen.removed.length === 1, null, { timeout: STEP });
  s = await seen();
  assert.deepEqual(s.removed, [{ id: 'bob', info: { name: 'Bob Kahn' } }]);
  assert.deepEqual(s.members, ['ada']);
  assert.deepEqual(s.events, [{ text: 'to the page' }]);
  assert.deepEqual(s.errors, []);
  assert.deepEqual(pageErrors, []);
  const hosts = new Set(fetched);
  assert.deepEqual([...hosts], [new URL(auth.url).host], 'the page fetched from the test\'s server only');
  await until('the users API agrees', async () => {
    const users = await (await backend.get({ path: '/channels/presence-browser/users' })).json();
    return users.users.length === 1 && users.users[0].id === 'ada';
  });
});
