// A presence channel of 1,000 members over pusher-js, in one Node process
// against a running `herenow serve --pusher-app` (Pusher itself caps a
// presence channel at 100): every member ends with the full count, one
// more joins and every member gets member_added, it leaves and every
// member gets member_removed. MEMBERS (default 1000) sets the size. Run by
// pusher_clients.rs as `node --test thousand.test.js` with HERENOW_URL and
// PUSHER_APP set.

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const PusherJS = require('pusher-js');
const Pusher = require('pusher');
const { until } = require('./harness');

const url = new URL(process.env.HERENOW_URL);
const [appId, key, secret] = process.env.PUSHER_APP.split(':');
const backend = new Pusher({ appId, key, secret, host: url.hostname, port: url.port, useTLS: false });
const MEMBERS = Number(process.env.MEMBERS || 1000);
const CHANNEL = 'presence-crowd';
// Waits scale with the crowd: the joins alone are MEMBERS² member events.
const LONG = 45_000;

const clients = [];

function member(id) {
  const c = new PusherJS(key, {
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    cluster: 'mt1',
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) => {
        callback(null, backend.authorizeChannel(socketId, channelName, { user_id: id, user_info: { n: id } }));
      },
    },
  });
  clients.push(c);
  const state = { client: c, channel: c.subscribe(CHANNEL), subscribed: false, added: [], removed: [], errors: [] };
  state.channel.bind('pusher:subscription_succeeded', () => { state.subscribed = true; });
  state.channel.bind('pusher:subscription_error', (e) => state.errors.push(e));
  state.channel.bind('pusher:member_added', (m) => state.added.push(m.id));
  state.channel.bind('pusher:member_removed', (m) => state.removed.push(m.id));
  c.connection.bind('error', (e) => state.errors.push(e));
  return state;
}

test.after(() => {
  for (const c of clients) c.disconnect();
});

test(`${MEMBERS} pusher-js members in one presence channel`, async () => {
  const started = Date.now();
  const crowd = [];
  // In waves of 100, as a reconnect storm arrives.
  for (let i = 0; i < MEMBERS; i += 100) {
    const wave = [];
    for (let j = i; j < Math.min(i + 100, MEMBERS); j++) wave.push(member(`m${j}`));
    crowd.push(...wave);
    await until(`wave ${i / 100} subscribed`, () => wave.every((m) => m.subscribed || m.errors.length), LONG);
    if (process.env.DEBUG_WAVES) console.log(`wave ${i / 100}: ${Date.now() - started} ms, connected ${wave.filter((m) => m.client.connection.state === "connected").length}`);
  }
  const failed = crowd.filter((m) => m.errors.length);
  assert.deepEqual(failed.map((m) => m.errors), [], 'no refusal, no error');
  await until('every member sees the full count', () => crowd.every((m) => m.channel.members.count === MEMBERS), LONG);
  const joined = Date.now();

  const info = await (await backend.get({ path: `/channels/${CHANNEL}`, params: { info: 'user_count,subscription_count' } })).json();
  assert.deepEqual(info, { occupied: true, user_count: MEMBERS, subscription_count: MEMBERS });

  // One more: member_added at every member, once.
  const late = member('late');
  await until('the late one subscribed', () => late.subscribed || late.errors.length, LONG);
  assert.deepEqual(late.errors, []);
  assert.equal(late.channel.members.count, MEMBERS + 1);
  await until('every member got member_added', () => crowd.every((m) => m.added.includes('late')), LONG);
  for (const m of crowd) {
    assert.equal(m.added.filter((id) => id === 'late').length, 1);
    assert.equal(m.channel.members.count, MEMBERS + 1);
  }
  // It leaves: member_removed at every member.
  late.client.disconnect();
  await until('every member got member_removed', () => crowd.every((m) => m.removed.includes('late')), LONG);
  assert.ok(crowd.every((m) => m.channel.members.count === MEMBERS && m.removed.length === 1));
  const secs = (t) => ((t - started) / 1000).toFixed(1);
  console.log(`${MEMBERS} members in ${secs(joined)} s; join and leave of one more seen by all at ${secs(Date.now())} s`);
});
