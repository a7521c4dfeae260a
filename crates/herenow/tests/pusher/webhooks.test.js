// Webhooks in Pusher's format, checked by the `pusher` server library
// itself: this script is the app's webhook endpoint (an HTTP server on a
// free loopback port), starts `herenow serve --pusher-app ... --pusher-webhook
// URL --pusher-webhook-client-events` (HERENOW_BIN), drives it with
// pusher-js 8, and reads every request with
// `pusher.webhook({headers, rawBody})`: each must be `isValid()`, and
// `getEvents()` must tell the presence channel's occupancy, its members,
// a client event, and a public and a private channel's occupancy. Run by crates/herenow/tests/pusher_webhooks.rs as
// `node --test webhooks.test.js` with HERENOW_BIN and PUSHER_APP
// (ID:KEY:SECRET) in the environment.
//
// Every wait is bounded (STEP).

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const PusherJS = require('pusher-js');
const Pusher = require('pusher');

const STEP = 20_000;
const harness = require('./harness');
const [appId, key, secret] = process.env.PUSHER_APP.split(':');

const within = (what, promise) => harness.within(what, promise, STEP);

const until = (what, check) => harness.until(what, check, STEP);

// The app's webhook endpoint: every request kept as received.
function receiver() {
  const requests = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      requests.push({ headers: req.headers, rawBody: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200);
      res.end();
    });
  });
  return new Promise((resolve) => {
    srv.listen(0, '127.0.0.1', () => resolve({ srv, requests, port: srv.address().port }));
  });
}

// Ann and Bob join `presence-webhooks` through pusher-js, both subscribe
// `news` and Bob `private-webhooks`, Ann whispers, both leave; answers
// every event the app's endpoint was sent, each request checked by the
// library, once every channel is vacated.
async function scenario(t, extra) {
  const rx = await receiver();
  t.after(() => rx.srv.close());
  const server = await harness.serveHerenow([
    '--pusher-app', process.env.PUSHER_APP,
    '--pusher-webhook', `http://127.0.0.1:${rx.port}/pusher`,
    ...extra,
  ], STEP);
  t.after(() => server.child.kill('SIGTERM'));
  const { url } = server;
  const app = new Pusher({ appId, key, secret, host: url.hostname, port: url.port, useTLS: false });

  const clients = [];
  const client = (member) => {
    const c = new PusherJS(key, {
      wsHost: url.hostname,
      wsPort: Number(url.port),
      forceTLS: false,
      enabledTransports: ['ws'],
      cluster: 'mt1',
      disableStats: true,
      channelAuthorization: {
        customHandler: ({ socketId, channelName }, callback) => {
          const data = channelName.startsWith('presence-') ? member : undefined;
          callback(null, app.authorizeChannel(socketId, channelName, data));
        },
      },
    });
    clients.push(c);
    return c;
  };
  t.after(() => clients.forEach((c) => c.disconnect()));
  const subscribed = (c, name) => within(`subscribed to ${name}`, new Promise((resolve) => {
    const channel = c.subscribe(name);
    channel.bind('pusher:subscription_succeeded', () => resolve(channel));
  }));

  const ann = client({ user_id: 'ann', user_info: { name: 'Ann' } });
  const bob = client({ user_id: 'bob' });
  const atAnn = await subscribed(ann, 'presence-webhooks');
  const atBob = await subscribed(bob, 'presence-webhooks');
  await subscribed(ann, 'news');
  await subscribed(bob, 'news');
  await subscribed(bob, 'private-webhooks');
  const typing = [];
  atBob.bind('client-typing', (d) => typing.push(d));
  assert.equal(atAnn.trigger('client-typing', { typing: true }), true);
  await until('the whisper at Bob', () => typing.length === 1);
  ann.disconnect();
  bob.disconnect();

  // Every request is valid for the library, and says what happened.
  const events = [];
  const read = () => {
    events.length = 0;
    for (const request of rx.requests) {
      const hook = app.webhook(request);
      assert.equal(hook.isValid(), true, `a valid webhook: ${JSON.stringify(request)}`);
      assert.equal(request.headers['x-pusher-key'], key);
      assert.ok(hook.getTime() instanceof Date && !Number.isNaN(hook.getTime().getTime()));
      events.push(...hook.getEvents());
    }
    return events;
  };
  const vacated = (channel) => events.some((e) => e.name === 'channel_vacated' && e.channel === channel);
  await until('every event', () =>
    read() && ['presence-webhooks', 'news', 'private-webhooks'].every(vacated)
      && events.filter((e) => e.name === 'member_removed').length === 2,
  );
  return { app, url, events, requests: rx.requests };
}

test('presence channels and client events reach the app as Pusher webhooks its library accepts', async (t) => {
  const { app, url, events, requests } = await scenario(t, ['--pusher-webhook-client-events']);
  const said = (e) => [e.name, e.channel, e.user_id || '-'].join(' ');
  const presence = events
    .filter((e) => e.name !== 'client_event' && e.channel === 'presence-webhooks')
    .map(said);
  // A public and a private channel: occupied once, then vacated once,
  // however many sockets subscribed.
  const others = events.filter((e) => e.channel !== 'presence-webhooks').map(said);
  assert.deepEqual([...others].sort(), [
    'channel_occupied news -',
    'channel_occupied private-webhooks -',
    'channel_vacated news -',
    'channel_vacated private-webhooks -',
  ]);
  for (const channel of ['news', 'private-webhooks']) {
    assert.ok(
      others.indexOf(`channel_occupied ${channel} -`) < others.indexOf(`channel_vacated ${channel} -`),
      others.join('\n'),
    );
  }
  assert.deepEqual([...presence].sort(), [
    'channel_occupied presence-webhooks -',
    'channel_vacated presence-webhooks -',
    'member_added presence-webhooks ann',
    'member_added presence-webhooks bob',
    'member_removed presence-webhooks ann',
    'member_removed presence-webhooks bob',
  ].sort());
  // A member comes before it goes; the channel is vacated last.
  for (const who of ['ann', 'bob']) {
    assert.ok(
      presence.indexOf(`member_added presence-webhooks ${who}`)
        < presence.indexOf(`member_removed presence-webhooks ${who}`),
      presence.join('\n'),
    );
  }
  assert.equal(presence[presence.length - 1], 'channel_vacated presence-webhooks -');
  const clientEvents = events.filter((e) => e.name === 'client_event');
  assert.equal(clientEvents.length, 1);
  const [whisper] = clientEvents;
  assert.equal(whisper.channel, 'presence-webhooks');
  assert.equal(whisper.event, 'client-typing');
  assert.equal(whisper.user_id, 'ann');
  assert.match(whisper.socket_id, /^\d+\.\d+$/);
  assert.deepEqual(JSON.parse(whisper.data), { typing: true });

  // What the library must refuse: another body, or another app's secret.
  const [first] = requests;
  assert.equal(app.webhook({ headers: first.headers, rawBody: first.rawBody.replace('presence', 'presenze') }).isValid(), false);
  const stranger = new Pusher({ appId, key, secret: 'another-secret', host: url.hostname, port: url.port });
  assert.equal(stranger.webhook(first).isValid(), false);
});

test('client events are sent only when asked for', async (t) => {
  const { events } = await scenario(t, []);
  assert.equal(events.filter((e) => e.name === 'member_added').length, 2);
  assert.deepEqual(events.filter((e) => e.name === 'client_event'), []);
});

test('a --pusher-webhook that cannot be served stops the start, naming the flag', async () => {
  for (const args of [
    ['--pusher-app', process.env.PUSHER_APP, '--pusher-webhook', 'ftp://example.com/hook'],
    ['--pusher-app', process.env.PUSHER_APP, '--pusher-webhook', '999=http://127.0.0.1:1/hook'],
    ['--pusher-webhook', 'http://127.0.0.1:1/hook'],
  ]) {
    await assert.rejects(harness.serveHerenow(args, STEP), (e) => {
      assert.match(e.message, /--pusher-webhook/);
      return true;
    }, args.join(' '));
  }
});
