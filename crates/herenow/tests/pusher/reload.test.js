// A page reload is no leave (issue 43): three Laravel Echo pages in
// headless Chromium (Debian's; HERENOW_CHROMIUM overrides it) join a
// presence channel through `Echo.join`, the app's backend played by the
// npm `pusher` library; this script is also the app's webhook endpoint for
// both of herenow's formats (Pusher's and Standard Webhooks), and starts
// `herenow serve` (HERENOW_BIN) itself with them and a grace of 5 s.
//
// - Cy's page reloads: Ada's and Bob's pages see no `leaving` nor
//   `joining`, and no webhook of either format arrives, up to past the
//   grace; the channel's users stay the three.
// - Cy's page closes for good: after the grace, Ada and Bob see Cy leave
//   once, and the endpoints are told once.
//
// Run by crates/herenow/tests/pusher_clients.rs as `node --test
// reload.test.js` with HERENOW_BIN and PUSHER_APP set. Every wait is
// bounded.

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { chromium } = require('playwright-core');
const Pusher = require('pusher');
const { STEP, until, authServer, serveHerenow } = require('./harness');

const [appId, key, secret] = process.env.PUSHER_APP.split(':');
const GRACE_MS = 5000;
const HOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const NAMES = { ada: 'Ada Lovelace', bob: 'Bob Kahn', cy: 'Cy Young' };

// The app's webhook endpoints: every request's events, by format.
function receiver() {
  const got = { pusher: [], herenow: [] };
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      if (req.url === '/pusher') got.pusher.push(...body.events.map((e) => `${e.name}:${e.user_id || ''}`));
      else got.herenow.push(...body.data.events.map((e) => `${e.type}:${e.member || ''}`));
      res.writeHead(200);
      res.end();
    });
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({ srv, got, port: srv.address().port })));
}


// A Laravel page: pusher-js and Echo's browser build from node_modules
// (nothing from a CDN), Echo.join('room') recording what it is told.
function page(url, user) {
  const options = {
    broadcaster: 'pusher',
    key,
    cluster: 'mt1',
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    authEndpoint: '/broadcasting/auth',
    auth: { headers: { Authorization: `Bearer ${user}` } },
  };
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${user}</title>
<script src="/pusher.min.js"></script><script src="/echo.iife.js"></script></head>
<body><script>
  window.seen = { here: null, joining: [], leaving: [] };
  window.Echo = new Echo.default(${JSON.stringify(options)});
  window.Echo.join('room')
    .here((users) => { seen.here = users.map((u) => u.id).sort(); })
    .joining((u) => seen.joining.push(u.id))
    .leaving((u) => seen.leaving.push(u.id));
</script></body></html>`;
}

test('a page reload tells the other pages and the webhooks nothing; a page closed for good leaves once after the grace', async (t) => {
  const rx = await receiver();
  t.after(() => rx.srv.close());
  const server = await serveHerenow([
    '--pusher-app', process.env.PUSHER_APP,
    '--pusher-webhook', `http://127.0.0.1:${rx.port}/pusher`,
    '--webhook', `http://127.0.0.1:${rx.port}/herenow,events=join,leave`,
    '--webhook-secret', HOOK_SECRET,
    '--grace', `${GRACE_MS}ms`,
  ]);
  t.after(() => server.child.kill('SIGTERM'));
  const { url } = server;
  const backend = new Pusher({ appId, key, secret, host: url.hostname, port: url.port, useTLS: false });
  const nm = path.join(__dirname, 'node_modules');
  const files = {
    '/pusher.min.js': fs.readFileSync(path.join(nm, 'pusher-js/dist/web/pusher.min.js')),
    '/echo.iife.js': fs.readFileSync(path.join(nm, 'laravel-echo/dist/echo.iife.js')),
  };
  const routes = {};
  for (const [p, body] of Object.entries(files)) {
    routes[p] = (req, res) => { res.writeHead(200, { 'content-type': 'text/javascript' }); res.end(body); };
  }
  for (const user of Object.keys(NAMES)) {
    routes[`/${user}`] = (req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end(page(url, user)); };
  }
  const app = await authServer({
    decide: (user, channel) => (user && channel === 'presence-room' ? { user_id: user, user_info: { id: user, name: NAMES[user] } } : 403),
    sign: (socketId, channel, data) => backend.authorizeChannel(socketId, channel, data),
    routes,
  });
  t.after(() => app.close());
  // authServer answers any other path with the auth endpoint's answer.
  const browser = await chromium.launch({
    executablePath: process.env.HERENOW_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    timeout: STEP,
  });
  t.after(() => browser.close());
  const errors = [];
  const tabs = {};
  for (const user of Object.keys(NAMES)) {
    // A browser context each: three people, not three tabs of one.
    const ctx = await browser.newContext();
    const tab = await ctx.newPage();
    tab.on('pageerror', (e) => errors.push(`${user}: ${e}`));
    await tab.goto(`${app.url}/${user}`, { timeout: STEP });
    await tab.waitForFunction(() => window.seen.here !== null, null, { timeout: STEP });
    tabs[user] = tab;
  }
  const seen = (user) => tabs[user].evaluate(() => window.seen);
  await until('every page sees the three', async () => {
    for (const u of ['ada', 'bob', 'cy']) {
      const s = await seen(u);
      const ids = new Set([...s.here, ...s.joining]);
      for (const l of s.leaving) ids.delete(l);
      if (ids.size !== 3) return false;
    }
    return true;
  });
  await until('the joins told to both endpoints', () =>
    ['ada', 'bob', 'cy'].every((u) => rx.got.pusher.includes(`member_added:${u}`) && rx.got.herenow.includes(`join:${u}`)));
  const before = { ada: await seen('ada'), bob: await seen('bob') };
  rx.got.pusher.length = 0;
  rx.got.herenow.length = 0;

  // Cy reloads her page.
  const reloaded = performance.now();
  await tabs.cy.reload({ timeout: STEP });
  await tabs.cy.waitForFunction(() => window.seen.here !== null, null, { timeout: STEP });
  const cyBack = await seen('cy');
  assert.deepEqual(cyBack.here, ['ada', 'bob', 'cy'], 'the reloaded page sees everyone, itself included');
  console.log(`measured: a reloaded page was subscribed again ${(performance.now() - reloaded).toFixed(0)} ms after the reload began`);
  // Past the grace the old socket had: nothing told to anyone.
  await new Promise((r) => setTimeout(r, GRACE_MS + 2000));
  for (const u of ['ada', 'bob']) {
    const s = await seen(u);
    assert.deepEqual(s.leaving, before[u].leaving, `${u}'s page saw Cy leave`);
    assert.deepEqual(s.joining, before[u].joining, `${u}'s page saw Cy join again`);
  }
  assert.deepEqual(rx.got.pusher, [], 'Pusher webhooks after a reload');
  assert.deepEqual(rx.got.herenow, [], 'herenow webhooks after a reload');
  const users = await (await backend.get({ path: '/channels/presence-room/users' })).json();
  assert.deepEqual(users.users.map((u) => u.id).sort(), ['ada', 'bob', 'cy']);

  // Cy closes her page for good: one leave, once the grace is over.
  const closed = performance.now();
  await tabs.cy.close();
  for (const u of ['ada', 'bob']) {
    await tabs[u].waitForFunction(() => window.seen.leaving.includes('cy'), null, { timeout: STEP });
  }
  const leftMs = performance.now() - closed;
  console.log(`measured: a page closed for good was seen leaving ${leftMs.toFixed(0)} ms after it closed (grace ${GRACE_MS} ms)`);
  assert.ok(leftMs >= GRACE_MS - 100, `the leave came before the grace ended: ${leftMs} ms`);
  await until('the leave told to both endpoints', () =>
    rx.got.pusher.includes('member_removed:cy') && rx.got.herenow.includes('leave:cy'));
  assert.deepEqual(rx.got.pusher, ['member_removed:cy']);
  assert.deepEqual(rx.got.herenow, ['leave:cy']);
  for (const u of ['ada', 'bob']) {
    assert.deepEqual((await seen(u)).leaving.filter((x) => x === 'cy'), ['cy'], `${u} saw Cy leave once`);
  }
  assert.deepEqual(errors, []);
});
