// laravel-echo 2 against a running `herenow serve --pusher-app`, configured
// as a Laravel app is: docs/PUSHER.md's `.env` block (LARAVEL_ENV: the block
// with the test server's port) read as Laravel and Vite read it, and its
// `resources/js/echo.js` block run as written, with pusher-js as
// `window.Pusher`. The app's backend is played by the npm `pusher` library,
// configured as Laravel's config/broadcasting.php configures its driver:
// it serves `/broadcasting/auth` (Echo's default endpoint) and triggers
// the events Laravel's broadcast() would. Run by pusher_clients.rs as
// `node --test echo.test.js` with LARAVEL_ENV and HERENOW_URL set.

'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const PusherJS = require('pusher-js');
const Pusher = require('pusher');
const { until, guideBlock, parseDotenv, authServer } = require('./harness');

const env = parseDotenv(process.env.LARAVEL_ENV);
assert.equal(env.BROADCAST_CONNECTION, 'pusher');
const herenowUrl = process.env.HERENOW_URL;

// config/broadcasting.php's `pusher` connection.
const backend = new Pusher({
  appId: env.PUSHER_APP_ID,
  key: env.PUSHER_APP_KEY,
  secret: env.PUSHER_APP_SECRET,
  cluster: env.PUSHER_APP_CLUSTER,
  host: env.PUSHER_HOST,
  port: env.PUSHER_PORT,
  useTLS: (env.PUSHER_SCHEME || 'https') === 'https',
});

const NAMES = { ada: 'Ada Lovelace', bob: 'Bob Kahn', eve: 'Eve' };

// routes/channels.php: who may join what.
function decide(user, channel) {
  if (!user) return 403;
  if (channel === 'presence-room' || channel === 'presence-tabs') return { user_id: user, user_info: { id: user, name: NAMES[user] } };
  if (channel === 'private-chat') return true;
  if (channel === 'private-admin') return user === 'ada' ? true : 403;
  return 403;
}

// docs/PUSHER.md's echo.js, run as Vite would run it: `import.meta.env` is the
// VITE_ values, the imports are laravel-echo and pusher-js. Each user's
// browser sends its session (here a bearer header) to /broadcasting/auth.
const echoJs = guideBlock('js', 'new Echo(');
let auth;
// laravel-echo 2 ships its CommonJS build as an ES module file, so Node
// loads it as Laravel's Vite build does: with import.
let Echo;
const echoes = [];

function echoFor(user) {
  // The page's global object: Echo finds pusher-js as window.Pusher.
  const window = {};
  globalThis.window = window;
  const viteEnv = Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith('VITE_')));
  class AppEcho extends Echo {
    constructor(options) {
      // What the page adds: where its backend is, and who is signed in.
      super({
        ...options,
        authEndpoint: `${auth.url}/broadcasting/auth`,
        auth: { headers: { Authorization: `Bearer ${user}` } },
      });
    }
  }
  const body = echoJs
    .replace(/^import .*$/gm, '')
    .replace(/import\.meta\.env/g, 'viteEnv');
  new Function('Echo', 'Pusher', 'window', 'viteEnv', body)(AppEcho, PusherJS, window, viteEnv);
  assert.ok(window.Echo instanceof Echo, 'docs/PUSHER.md\'s echo.js made window.Echo');
  assert.equal(window.Pusher, PusherJS);
  echoes.push(window.Echo);
  return window.Echo;
}

async function connected(echo) {
  await until('connected', () => echo.connectionStatus() === 'connected');
  return echo.socketId();
}

test.before(async () => {
  Echo = (await import('laravel-echo')).default;
  auth = await authServer({
    decide,
    sign: (socketId, channel, data) => backend.authorizeChannel(socketId, channel, data),
  });
});

test.after(async () => {
  for (const e of echoes) e.disconnect();
  await auth.close();
});

test('docs/PUSHER.md\'s options reach herenow without TLS, on the .env\'s port', async () => {
  const echo = echoFor('ada');
  await connected(echo);
  const options = echo.connector.pusher.config;
  assert.equal(options.wsHost, env.PUSHER_HOST);
  assert.equal(String(options.wsPort), env.PUSHER_PORT);
  assert.equal(options.useTLS, false);
  assert.match(echo.socketId(), /^\d+\.\d+$/);
  echo.disconnect();
});

test('Echo.join: here, joining, leaving, whispers; last seen through herenow\'s API', async () => {
  const ada = echoFor('ada');
  const bob = echoFor('bob');
  const atAda = { here: null, joining: [], leaving: [], typing: [] };
  ada.join('room')
    .here((users) => { atAda.here = users; })
    .joining((user) => atAda.joining.push(user))
    .leaving((user) => atAda.leaving.push(user))
    .listenForWhisper('typing', (e) => atAda.typing.push(e));
  await until('here() at Ada', () => atAda.here);
  assert.deepEqual(atAda.here, [{ id: 'ada', name: 'Ada Lovelace' }]);

  const atBob = { here: null, typing: [] };
  bob.join('room')
    .here((users) => { atBob.here = users; })
    .listenForWhisper('typing', (e) => atBob.typing.push(e));
  await until('here() at Bob', () => atBob.here);
  assert.deepEqual(
    atBob.here.map((u) => u.id).sort(),
    ['ada', 'bob'],
  );
  await until('joining() at Ada', () => atAda.joining.length === 1);
  assert.deepEqual(atAda.joining, [{ id: 'bob', name: 'Bob Kahn' }]);

  // whisper is a client event: to the others, never back to the sender.
  bob.join('room').whisper('typing', { name: 'Bob Kahn' });
  await until('the whisper at Ada', () => atAda.typing.length === 1);
  assert.deepEqual(atAda.typing, [{ name: 'Bob Kahn' }]);
  ada.join('room').whisper('typing', { name: 'Ada Lovelace' });
  await until('the whisper at Bob', () => atBob.typing.length === 1);
  assert.deepEqual(atBob.typing, [{ name: 'Ada Lovelace' }], 'Bob\'s own whisper did not come back');

  // The same channel through the server library and herenow's own API.
  const users = await (await backend.get({ path: '/channels/presence-room/users' })).json();
  assert.deepEqual(users.users.map((u) => u.id).sort(), ['ada', 'bob']);

  bob.leave('room');
  await until('leaving() at Ada', () => atAda.leaving.length === 1);
  assert.deepEqual(atAda.leaving, [{ id: 'bob', name: 'Bob Kahn' }]);
  const seen = await (await fetch(`${herenowUrl}/v1/spaces/presence-room/members/bob`)).json();
  assert.equal(seen.status, 'offline');
  assert.ok(seen.last_seen_ms > 0, 'Bob is seen last after he left');
});

test('Echo.join: a user in two tabs is one member, gone when the last tab closes', async () => {
  const bob = echoFor('bob');
  const atBob = { here: null, joining: [], leaving: [] };
  bob.join('tabs')
    .here((users) => { atBob.here = users; })
    .joining((user) => atBob.joining.push(user))
    .leaving((user) => atBob.leaving.push(user));
  await until('here() at Bob', () => atBob.here);
  const tab1 = echoFor('ada');
  const tab2 = echoFor('ada');
  const here = [];
  tab1.join('tabs').here((users) => here.push(users));
  await until('Ada\'s first tab joined', () => atBob.joining.length === 1);
  tab2.join('tabs').here((users) => here.push(users));
  await until('both tabs subscribed', () => here.length === 2);
  for (const users of here) assert.deepEqual(users.map((u) => u.id).sort(), ['ada', 'bob']);
  tab1.disconnect();
  // The first tab's leave is no leave: the channel's API still counts her.
  await until('one subscription less', async () => {
    const info = await (await backend.get({ path: '/channels/presence-tabs', params: { info: 'user_count,subscription_count' } })).json();
    return info.subscription_count === 2 && info.user_count === 2;
  });
  assert.deepEqual(atBob.leaving, []);
  tab2.disconnect();
  await until('leaving() at Bob', () => atBob.leaving.length === 1);
  assert.deepEqual(atBob.joining, [{ id: 'ada', name: 'Ada Lovelace' }]);
  assert.deepEqual(atBob.leaving, [{ id: 'ada', name: 'Ada Lovelace' }]);
});

test('Echo.private: authorized by /broadcasting/auth, events and whispers; a refusal reaches .error()', async () => {
  const ada = echoFor('ada');
  const bob = echoFor('bob');
  const sent = [];
  const whispers = [];
  ada.private('chat')
    .listen('MessageSent', (e) => sent.push(e))
    .listenForWhisper('typing', (e) => whispers.push(e));
  const subscribed = [];
  bob.private('chat').subscribed(() => subscribed.push('bob'));
  ada.private('chat').subscribed(() => subscribed.push('ada'));
  await until('both subscribed', () => subscribed.length === 2);

  // broadcast(new MessageSent($message)): App\Events\MessageSent.
  await backend.trigger('private-chat', 'App\\Events\\MessageSent', { message: { body: 'hi' } });
  await until('the event at Ada', () => sent.length === 1);
  assert.deepEqual(sent, [{ message: { body: 'hi' } }]);
  bob.private('chat').whisper('typing', { who: 'bob' });
  await until('the whisper at Ada', () => whispers.length === 1);

  const refused = [];
  bob.private('admin').error((e) => refused.push(e));
  await until('the refusal at Bob', () => refused.length === 1);
  assert.equal(refused[0].status, 403);
  const allowed = [];
  ada.private('admin').subscribed(() => allowed.push(true));
  await until('Ada may', () => allowed.length === 1);
});

test('Echo.channel().listen(\'.name\'): broadcastAs names, toOthers() leaves out the sender', async () => {
  const ada = echoFor('ada');
  const bob = echoFor('bob');
  const atAda = [];
  const atBob = [];
  const ready = [];
  ada.channel('orders').listen('.order.shipped', (e) => atAda.push(e)).subscribed(() => ready.push(1));
  bob.channel('orders').listen('.order.shipped', (e) => atBob.push(e)).subscribed(() => ready.push(1));
  await until('both subscribed', () => ready.length === 2);
  const bobSocket = await connected(bob);
  // broadcast(new OrderShipped($order))->toOthers() from Bob's request:
  // Laravel passes his X-Socket-ID as socket_id.
  await backend.trigger('orders', 'order.shipped', { id: 1 }, { socket_id: bobSocket });
  await backend.trigger('orders', 'order.shipped', { id: 2 });
  await until('both at Ada', () => atAda.length === 2);
  await until('the second at Bob', () => atBob.length === 1);
  assert.deepEqual(atAda, [{ id: 1 }, { id: 2 }]);
  assert.deepEqual(atBob, [{ id: 2 }]);
});
