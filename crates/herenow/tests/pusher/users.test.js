// Pusher users with the real libraries, on two herenow servers sharing one
// Redis: pusher-js 8's `signin()`, `user.bind(...)` and
// `user.watchlist.bind('online' | 'offline', ...)`, and the `pusher` server
// library's `authenticateUser`, `sendToUser` and `terminateUserConnections`,
// with events crossing servers. Run by crates/herenow/tests/pusher_users.rs
// as `node --test users.test.js` with HERENOW_URL_A, HERENOW_URL_B and
// PUSHER_APP (ID:KEY:SECRET) in the environment.
//
// Every wait is bounded (STEP).

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const PusherJS = require('pusher-js');
const Pusher = require('pusher');

const STEP = 10_000;
const harness = require('./harness');
const urlA = new URL(process.env.HERENOW_URL_A);
const urlB = new URL(process.env.HERENOW_URL_B);
const [appId, key, secret] = process.env.PUSHER_APP.split(':');

function serverLib(url) {
  return new Pusher({ appId, key, secret, host: url.hostname, port: url.port, useTLS: false });
}
const serverA = serverLib(urlA);
const serverB = serverLib(urlB);

const open = [];

// A pusher-js client of server `url`, signing in as `user` through its
// (in-process) user authentication endpoint.
function client(url, user) {
  const c = new PusherJS(key, {
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws'],
    cluster: 'mt1',
    disableStats: true,
    userAuthentication: {
      customHandler: ({ socketId }, callback) => {
        try {
          callback(null, serverA.authenticateUser(socketId, user));
        } catch (e) {
          callback(e, null);
        }
      },
    },
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) => {
        callback(null, serverA.authorizeChannel(socketId, channelName));
      },
    },
  });
  open.push(c);
  return c;
}

test.after(() => {
  for (const c of open) c.disconnect();
});

const within = (what, promise) => harness.within(what, promise, STEP);

const until = (what, check) => harness.until(what, check, STEP);

async function signedIn(c) {
  c.signin();
  await until('signed in', () => c.user.user_data !== null && c.user.serverToUserChannel);
  return c.user.user_data;
}

async function subscribed(c, name) {
  const channel = c.subscribe(name);
  await within(`subscribed to ${name}`, new Promise((resolve) => {
    channel.bind('pusher:subscription_succeeded', resolve);
  }));
  return channel;
}

test('signin, then sendToUser through the other server reaches pusher.user.bind', async () => {
  const ann = client(urlA, { id: 'ann', user_info: { name: 'Ann' } });
  const data = await signedIn(ann);
  assert.deepEqual(data, { id: 'ann', user_info: { name: 'Ann' } });
  const notes = [];
  ann.user.bind('note', (d) => notes.push(d));
  await serverB.sendToUser('ann', 'note', { n: 1 });
  await serverA.sendToUser('ann', 'note', { n: 2 });
  await until('both notes', () => notes.length === 2);
  assert.deepEqual(notes, [{ n: 1 }, { n: 2 }]);
  // Nobody else's: a note to bob does not reach ann.
  await serverB.sendToUser('bob', 'note', { n: 3 });
  await serverB.sendToUser('ann', 'note', { n: 4 });
  await until('the fourth note', () => notes.length === 3);
  assert.deepEqual(notes[2], { n: 4 });
});

test('the watchlist says online and offline, across servers', async () => {
  const online = [];
  const offline = [];
  const wat = client(urlA, { id: 'wat', watchlist: ['bea', 'cy'] });
  wat.user.watchlist.bind('online', (e) => online.push(e.user_ids.slice().sort()));
  wat.user.watchlist.bind('offline', (e) => offline.push(e.user_ids.slice().sort()));
  await signedIn(wat);
  // The state right after signin.
  await until('the first picture', () => offline.length === 1);
  assert.deepEqual(offline[0], ['bea', 'cy']);
  const bea = client(urlB, { id: 'bea' });
  await signedIn(bea);
  await until('bea online', () => online.length === 1);
  assert.deepEqual(online[0], ['bea']);
  bea.disconnect();
  await until('bea offline', () => offline.length === 2);
  assert.deepEqual(offline[1], ['bea']);
});

test('an event through one server and a client event from the other cross', async () => {
  const onA = client(urlA, { id: 'x1' });
  const onB = client(urlB, { id: 'x2' });
  const newsA = await subscribed(onA, 'news');
  const news = [];
  newsA.bind('headline', (d) => news.push(d));
  await serverB.trigger('news', 'headline', { n: 1 });
  await until('the headline at A', () => news.length === 1);

  const roomA = await subscribed(onA, 'private-room');
  const roomB = await subscribed(onB, 'private-room');
  const typing = [];
  roomB.bind('client-typing', (d) => typing.push(d));
  assert.equal(roomA.trigger('client-typing', { who: 'a' }), true);
  await until('the client event at B', () => typing.length === 1);
  assert.deepEqual(typing, [{ who: 'a' }]);
});

test('terminateUserConnections through B closes the user\'s socket on A, for good', async () => {
  const zed = client(urlA, { id: 'zed' });
  const other = client(urlA, { id: 'yan' });
  await signedIn(zed);
  await signedIn(other);
  const errors = [];
  zed.connection.bind('error', (e) => errors.push(e));
  await serverB.terminateUserConnections('zed');
  await until('zed disconnected', () => zed.connection.state === 'disconnected');
  // 4009: pusher-js does not reconnect; the other user stays.
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(zed.connection.state, 'disconnected');
  assert.equal(other.connection.state, 'connected');
});
