// The real Pusher libraries against a running `herenow serve --pusher-app`:
// pusher-js 8 (its Node build, whose WebSocket is the faye-websocket it
// bundles) for the sockets, and the `pusher` server library for the HTTP
// API and channel authorization. Run by crates/herenow/tests/pusher_js.rs
// as `node --test pusher.test.js` with HERENOW_URL, PUSHER_APP (ID:KEY:SECRET)
// and PUSHER_ENCRYPTION_KEY (base64, 32 bytes) in the environment.
//
// Every wait is bounded (STEP); "never received" is shown by ordering: a
// later event on the same socket arrives, and the one it must not have got
// did not come before it.

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const PusherJS = require('pusher-js');
const Pusher = require('pusher');

const STEP = 10_000;
const harness = require('./harness');
const url = new URL(process.env.HERENOW_URL);
const [appId, key, secret] = process.env.PUSHER_APP.split(':');
const encryptionMasterKeyBase64 = process.env.PUSHER_ENCRYPTION_KEY;

const server = new Pusher({
  appId,
  key,
  secret,
  host: url.hostname,
  port: url.port,
  useTLS: false,
  encryptionMasterKeyBase64,
});

const open = [];

// A pusher-js client as an app configures it for a self-hosted server;
// `member` is the presence data its (in-process) auth endpoint signs.
function client(member, options = {}) {
  const c = new PusherJS(options.key || key, {
    wsHost: url.hostname,
    wsPort: Number(url.port),
    forceTLS: false,
    enabledTransports: ['ws'],
    cluster: 'mt1',
    disableStats: true,
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) => {
        try {
          const signer = options.signer || server;
          callback(null, signer.authorizeChannel(socketId, channelName, member));
        } catch (e) {
          callback(e, null);
        }
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

function once(emitter, event, what) {
  return within(what || event, new Promise((resolve) => {
    const handler = (data, meta) => {
      emitter.unbind(event, handler);
      resolve(data === undefined ? meta : data);
    };
    emitter.bind(event, handler);
  }));
}

function connected(c) {
  if (c.connection.state === 'connected') return Promise.resolve();
  return within('connected', new Promise((resolve) => {
    c.connection.bind('connected', resolve);
  }));
}

async function subscribed(c, name) {
  await connected(c);
  const channel = c.subscribe(name);
  const data = await once(channel, 'pusher:subscription_succeeded', `subscribed to ${name}`);
  return { channel, data };
}

// Collects a channel's events of one name, in order.
function collect(channel, event) {
  const got = [];
  channel.bind(event, (data) => got.push(data));
  return got;
}

const until = (what, check) => harness.until(what, check, STEP);

async function api(path, params) {
  const res = await server.get({ path, params: params || {} });
  return res.json();
}

test('a public channel gets the events the server library triggers, but not the sender\'s', async () => {
  const a = client();
  const b = client();
  const { channel: ca } = await subscribed(a, 'news');
  const { channel: cb } = await subscribed(b, 'news');
  const atA = collect(ca, 'headline');
  const atB = collect(cb, 'headline');
  // The socket id is pusher's "N.M".
  assert.match(a.connection.socket_id, /^\d+\.\d+$/);
  await server.trigger('news', 'headline', { n: 1 }, { socket_id: a.connection.socket_id });
  await server.trigger(['news', 'other'], 'headline', { n: 2 });
  await until('both events at B', () => atB.length === 2);
  await until('the second event at A', () => atA.length === 1);
  assert.deepEqual(atB, [{ n: 1 }, { n: 2 }]);
  assert.deepEqual(atA, [{ n: 2 }], 'A, the excluded sender, did not get the first');

  // A batch, and the counts asked for with info.
  const res = await server.triggerBatch([
    { channel: 'news', name: 'headline', data: { n: 3 }, info: 'subscription_count' },
    { channel: 'news', name: 'headline', data: 'plain text' },
  ]);
  const body = await res.json();
  assert.equal(body.batch[0].subscription_count, 2);
  await until('the batch at B', () => atB.length === 4);
  assert.deepEqual(atB.slice(2), [{ n: 3 }, 'plain text']);

  const one = await server.trigger('news', 'headline', { n: 4 }, { info: 'subscription_count' });
  assert.deepEqual(await one.json(), { channels: { news: { subscription_count: 2 } } });

  const info = await api('/channels/news', { info: 'subscription_count' });
  assert.deepEqual(info, { occupied: true, subscription_count: 2 });
  const list = await api('/channels', { filter_by_prefix: 'ne' });
  assert.deepEqual(list, { channels: { news: {} } });

  a.unsubscribe('news');
  await until('A unsubscribed', async () =>
    (await api('/channels/news', { info: 'subscription_count' })).subscription_count === 1);
});

test('private channels: signed subscriptions, client events to the others only', async () => {
  const a = client();
  const b = client();
  const { channel: ca } = await subscribed(a, 'private-doc');
  const { channel: cb } = await subscribed(b, 'private-doc');
  const typingAtA = collect(ca, 'client-typing');
  const typingAtB = collect(cb, 'client-typing');
  assert.equal(ca.trigger('client-typing', { who: 'a' }), true);
  await until('the client event at B', () => typingAtB.length === 1);
  assert.deepEqual(typingAtB, [{ who: 'a' }]);
  // Then a server event to both: A's own event never came back to it.
  const savedAtA = collect(ca, 'saved');
  await server.trigger('private-doc', 'saved', { v: 1 });
  await until('saved at A', () => savedAtA.length === 1);
  assert.deepEqual(typingAtA, [], 'a client event is not echoed to its sender');
});

test('an encrypted channel relays what the server library encrypted, unread', async () => {
  const a = client();
  const { channel } = await subscribed(a, 'private-encrypted-vault');
  const got = collect(channel, 'secret');
  await server.trigger('private-encrypted-vault', 'secret', { code: 42 });
  await until('the decrypted event', () => got.length === 1);
  assert.deepEqual(got, [{ code: 42 }]);
});

test('a presence channel is a herenow space: one member per user, counts, users', async () => {
  const ada = { user_id: 'ada', user_info: { name: 'Ada' } };
  const bob = { user_id: 'bob', user_info: { name: 'Bob' } };
  const a1 = client(ada);
  const { channel: c1, data: members } = await subscribed(a1, 'presence-room');
  assert.equal(members.count, 1);
  assert.deepEqual(members.me, { id: 'ada', info: { name: 'Ada' } });
  const added = collect(c1, 'pusher:member_added');
  const removed = collect(c1, 'pusher:member_removed');

  // Ada's second socket: no member_added, she is one member.
  const a2 = client(ada);
  const { data: members2 } = await subscribed(a2, 'presence-room');
  assert.equal(members2.count, 1);

  const b = client(bob);
  const { data: atBob } = await subscribed(b, 'presence-room');
  assert.equal(atBob.count, 2);
  assert.deepEqual(atBob.get('ada'), { id: 'ada', info: { name: 'Ada' } });
  await until('Bob added at Ada', () => added.length === 1);
  assert.deepEqual(added, [{ id: 'bob', info: { name: 'Bob' } }]);

  // The HTTP API: distinct users, this server's subscriptions.
  const info = await api('/channels/presence-room', { info: 'user_count,subscription_count' });
  assert.deepEqual(info, { occupied: true, user_count: 2, subscription_count: 3 });
  const users = await api('/channels/presence-room/users');
  assert.deepEqual(users.users.map((u) => u.id).sort(), ['ada', 'bob']);
  const list = await api('/channels', { filter_by_prefix: 'presence-', info: 'user_count' });
  assert.deepEqual(list.channels['presence-room'], { user_count: 2 });

  // herenow's own API answers about the channel as about any space.
  const online = await (await fetch(`${url.origin}/v1/spaces/presence-room/online`)).json();
  assert.deepEqual(online.members.map((m) => m.id).sort(), ['ada', 'bob']);
  assert.deepEqual(online.members.find((m) => m.id === 'bob').meta, { name: 'Bob' });

  // Ada's second socket goes: Bob sees nothing; her last goes: member_removed.
  const addedAtBob = collect(b.channel('presence-room'), 'pusher:member_added');
  const removedAtBob = collect(b.channel('presence-room'), 'pusher:member_removed');
  a2.disconnect();
  await until('one subscription less', async () =>
    (await api('/channels/presence-room', { info: 'subscription_count' })).subscription_count === 2);
  b.disconnect();
  await until('Bob removed at Ada', () => removed.length === 1);
  assert.deepEqual(removed, [{ id: 'bob', info: { name: 'Bob' } }]);
  assert.equal(c1.members.count, 1);
  assert.deepEqual(addedAtBob, []);
  assert.deepEqual(removedAtBob, []);

  // Last seen after the leave, as for any herenow member.
  const bobNow = await (await fetch(`${url.origin}/v1/spaces/presence-room/members/bob`)).json();
  assert.equal(bobNow.status, 'offline');
  assert.ok(bobNow.last_seen_ms > 0);
});

test('bad signatures and oversized user_info are refused on the channel', async () => {
  const forger = new Pusher({ appId, key, secret: 'not-the-secret', host: url.hostname, port: url.port, useTLS: false });
  const a = client({ user_id: 'eve' }, { signer: forger });
  await connected(a);
  const refused = await once(a.subscribe('private-x'), 'pusher:subscription_error', 'refused');
  assert.equal(refused.status, 401);
  assert.equal(refused.type, 'AuthError');

  const big = client({ user_id: 'big', user_info: { bio: 'x'.repeat(2000) } });
  await connected(big);
  const tooBig = await once(big.subscribe('presence-big'), 'pusher:subscription_error', 'too big');
  assert.equal(tooBig.status, 413);
  const users = await api('/channels/presence-big/users');
  assert.deepEqual(users.users, [], 'the refused member is not in the channel');
});

test('client events: not on public channels, and not past the rate', async () => {
  const a = client();
  const b = client();
  const errors = [];
  a.connection.bind('error', (e) => errors.push(e));
  const { channel: pub } = await subscribed(a, 'lobby');
  pub.trigger('client-hello', {});
  await until('refused on a public channel', () => errors.length === 1);
  // null, as Pusher answers it: 4000-4299 would mean the connection closes.
  assert.equal(errors[0].data.code, null);
  assert.match(errors[0].data.message, /^Client event rejected/);

  const { channel: ca } = await subscribed(a, 'private-flood');
  const { channel: cb } = await subscribed(b, 'private-flood');
  const atB = collect(cb, 'client-n');
  for (let i = 0; i < 30; i++) ca.trigger('client-n', { i });
  // A frame the server answers after the 30: every answer to them is in.
  a.connection.send('end of flood');
  await until('the flood answered', () => errors.slice(1).some((e) => e.data.code === null));
  const limited = errors.filter((e) => e.data.code === 4301).length;
  assert.ok(limited > 0, 'some were refused');
  const mark = collect(cb, 'mark');
  await server.trigger('private-flood', 'mark', {});
  await until('mark at B', () => mark.length === 1);
  assert.equal(atB.length + limited, 30, 'every event was relayed or refused');
  assert.ok(atB.length >= 10 && atB.length < 30, `relayed ${atB.length}`);
  assert.equal(a.connection.state, 'connected', 'the flooder stays connected');
});

test('malformed frames get pusher:error and the socket goes on', async () => {
  const a = client();
  const errors = [];
  a.connection.bind('error', (e) => errors.push(e));
  await connected(a);
  a.connection.send('not json');
  a.connection.send('{"no":"event"}');
  a.connection.send(JSON.stringify({ event: 'pusher:subscribe', data: { nochannel: 1 } }));
  await until('three errors', () => errors.length === 3);
  assert.ok(errors.every((e) => e.type === 'PusherError' && e.data.code === null));
  const { channel } = await subscribed(a, 'after-errors');
  const got = collect(channel, 'ok');
  await server.trigger('after-errors', 'ok', 1);
  await until('still served', () => got.length === 1);
});

test('an unknown app key is refused with 4001', async () => {
  const c = client(undefined, { key: 'no-such-key' });
  const errors = [];
  c.connection.bind('error', (e) => errors.push(e));
  // Before connection_established, pusher-js wraps the server's error.
  await until('the refusal', () => errors.length > 0);
  assert.equal(errors[0].error.type, 'PusherError');
  assert.equal(errors[0].error.data.code, 4001);
  // 4000-4099: pusher-js does not reconnect.
  await until('given up', () => ['disconnected', 'failed'].includes(c.connection.state));
});

test('the HTTP API refuses a bad signature with 401 and changes nothing', async () => {
  const a = client();
  const { channel } = await subscribed(a, 'guarded');
  const got = collect(channel, 'e');
  const forger = new Pusher({ appId, key, secret: 'not-the-secret', host: url.hostname, port: url.port, useTLS: false });
  // The library's RequestError carries the body: the server's sentence
  // naming the problem (issue 44).
  await assert.rejects(forger.trigger('guarded', 'e', 'forged'),
    (e) => e.status === 401 && /^invalid signature/.test(e.body));
  await assert.rejects(forger.get({ path: '/channels' }),
    (e) => e.status === 401 && /^invalid signature/.test(e.body));
  await assert.rejects(server.trigger('guarded', 'e', 'x'.repeat(10241)),
    (e) => e.status === 413 && /event data is larger than 10 KB/.test(e.body));
  // 165 bytes: the library allows 200, the protocol 164.
  await assert.rejects(server.trigger('c'.repeat(165), 'e', 'x'),
    (e) => e.status === 400 && /^invalid channel name/.test(e.body));
  await server.trigger('guarded', 'e', 'real');
  await until('the real event', () => got.length === 1);
  assert.deepEqual(got, ['real']);
});
