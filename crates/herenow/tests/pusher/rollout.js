// A server of two going away under its members, for crates/herenow/tests/
// rollout.rs: `node --experimental-websocket rollout.js` with A_URL, B_URL
// (two `herenow serve` on one Redis), A_PID, PUSHER_APP, MODE (`term`: a
// rolling restart, A gets SIGTERM; `kill`: A gets SIGKILL) and MEMBERS.
//
// MEMBERS pusher-js members (presence-rollout) and MEMBERS members of
// herenow's browser client (space `rollout`, over /v1/ws) connect through
// a TCP proxy standing in for a load balancer, which sends them to A. Two
// observers sit on B: pusher-js on the presence channel, herenow's client
// subscribed to the space. Then the proxy sends new connections to B and
// A is stopped:
//
// - term: every member reconnects through the proxy to B; the observers
//   see no member leave or join, from A's signal to past the grace; the
//   rosters and B's HTTP APIs end exact.
// - kill: a fifth of the members do not come back (their clients stop
//   when A dies); the rest reconnect to B. Those never leave for the
//   observers; the others leave, within 5 s + the grace of A's death, for
//   the observers and in B's APIs.
//
// With GRACE_MS=0 (servers started with `--grace 0`) it checks the
// contrary, as herenow behaved before the grace: every member is seen
// leaving and coming back.
//
// Prints `measured: …` lines; any failure throws (exit 1). Every wait is
// bounded.

'use strict';

const net = require('node:net');
const path = require('node:path');
const assert = require('node:assert/strict');
const PusherJS = require('pusher-js');
const Pusher = require('pusher');
const { until } = require('./harness');

require(path.join(__dirname, '../../../herenow-server/assets/client.js'));
const { Herenow } = globalThis;

const A = new URL(process.env.A_URL);
const B = new URL(process.env.B_URL);
const A_PID = Number(process.env.A_PID);
const MODE = process.env.MODE;
const MEMBERS = Number(process.env.MEMBERS || 100);
const GRACE_MS = Number(process.env.GRACE_MS || 5000);
const [appId, key, secret] = process.env.PUSHER_APP.split(':');
const CHANNEL = 'presence-rollout';
const SPACE = 'rollout';
const LONG = 60_000;

const backendOf = (u) => new Pusher({ appId, key, secret, host: u.hostname, port: u.port, useTLS: false });
const backend = backendOf(B);

// The load balancer: each new connection goes to `target`.
let target = Number(A.port);
const lb = net.createServer((down) => {
  const up = net.connect(target, '127.0.0.1');
  down.pipe(up);
  up.pipe(down);
  const end = () => { down.destroy(); up.destroy(); };
  down.on('error', end);
  up.on('error', end);
  down.on('close', end);
  up.on('close', end);
});

function pusherMember(id, port, onSubscribed) {
  const c = new PusherJS(key, {
    wsHost: '127.0.0.1',
    wsPort: port,
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    cluster: 'mt1',
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) => {
        callback(null, backend.authorizeChannel(socketId, channelName, { user_id: id, user_info: { id } }));
      },
    },
  });
  const ch = c.subscribe(CHANNEL);
  ch.bind('pusher:subscription_succeeded', () => onSubscribed(ch));
  return { id, client: c, channel: ch };
}

async function mint(user) {
  const res = await fetch(`${B.origin}/v1/tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user, spaces: [SPACE], ttl_s: 3600 }),
  });
  if (!res.ok) throw new Error(`minting a token: ${res.status} ${await res.text()}`);
  return (await res.json()).token;
}

function herenowMember(id, url) {
  const client = new Herenow.Client({ url, token: () => mint(id) });
  const opens = { n: 0 };
  client.on('state', (s) => { if (s === 'open') opens.n += 1; });
  client.space(SPACE).join({ id });
  client.connect();
  return { id, client, opens };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  await new Promise((r) => lb.listen(0, '127.0.0.1', r));
  const lbPort = lb.address().port;

  // The observers, on B.
  const seen = { added: [], removed: [], joins: [], leaves: [] };
  const watcher = pusherMember('observer', Number(B.port), () => {});
  watcher.channel.bind('pusher:member_added', (m) => seen.added.push(m.id));
  watcher.channel.bind('pusher:member_removed', (m) => seen.removed.push(m.id));
  const observer = new Herenow.Client({ url: `ws://${B.host}/v1/ws`, token: () => mint('observer') });
  const room = observer.space(SPACE);
  room.on('join', (m) => seen.joins.push(m.id));
  room.on('leave', (m) => seen.leaves.push(m.id));
  room.subscribe();
  observer.connect();
  await until('the observers subscribed', () => watcher.channel.subscribed && room.synced, LONG);

  // The members, through the load balancer to A.
  const subscribed = new Map();
  const pushers = [];
  const herenows = [];
  for (let i = 0; i < MEMBERS; i++) {
    const id = `p${i}`;
    pushers.push(pusherMember(id, lbPort, () => subscribed.set(id, (subscribed.get(id) || 0) + 1)));
    herenows.push(herenowMember(`w${i}`, `ws://127.0.0.1:${lbPort}/v1/ws`));
  }
  await until(
    'every member present for the observers',
    () => watcher.channel.members.count === MEMBERS + 1 && room.members.size === MEMBERS,
    LONG,
  );
  console.log(`measured: ${MEMBERS} pusher-js and ${MEMBERS} /v1/ws members on A, seen from B`);
  for (const list of Object.values(seen)) list.length = 0;

  // A fifth of the members will not come back after a crash.
  const gone = MODE === 'kill' ? new Set([...pushers, ...herenows].filter((_, i) => i % 5 === 0).map((m) => m.id)) : new Set();
  const opensBefore = new Map(herenows.map((m) => [m.id, m.opens.n]));
  const subsBefore = new Map(pushers.map((m) => [m.id, subscribed.get(m.id)]));

  target = Number(B.port);
  const t0 = performance.now();
  process.kill(A_PID, MODE === 'kill' ? 'SIGKILL' : 'SIGTERM');
  for (const m of pushers) if (gone.has(m.id)) m.client.disconnect();
  for (const m of herenows) if (gone.has(m.id)) m.client.close();

  const back = () =>
    pushers.every((m) => gone.has(m.id) || subscribed.get(m.id) > subsBefore.get(m.id)) &&
    herenows.every((m) => gone.has(m.id) || m.opens.n > opensBefore.get(m.id));
  await until('every member back on B', back, LONG);
  const backMs = performance.now() - t0;
  console.log(`measured: ${MODE}: every returning member reconnected to B ${backMs.toFixed(0)} ms after A's signal`);

  const stay = MEMBERS * 2 - gone.size;
  const expected = (m) => !gone.has(m.id);
  const left = (list) => list.filter((id) => !gone.has(id));
  if (MODE === 'kill') {
    const goneP = pushers.filter((m) => gone.has(m.id)).length;
    const goneW = herenows.filter((m) => gone.has(m.id)).length;
    // When each protocol's observer saw them gone, to tell which lagged.
    const goneAt = {};
    await until(
      'the members that did not come back gone for the observers',
      () => {
        const now = performance.now() - t0;
        if (watcher.channel.members.count === MEMBERS - goneP + 1) goneAt.pusher ??= now;
        if (room.members.size === MEMBERS - goneW) goneAt.herenow ??= now;
        return goneAt.pusher !== undefined && goneAt.herenow !== undefined;
      },
      LONG,
    );
    const goneMs = performance.now() - t0;
    console.log(`measured: kill: the ${gone.size} members that did not come back were gone for the observers ${goneMs.toFixed(0)} ms after SIGKILL (grace ${GRACE_MS} ms; pusher-js observer ${goneAt.pusher.toFixed(0)} ms, /v1/ws observer ${goneAt.herenow.toFixed(0)} ms)`);
    assert.ok(goneMs <= 5000 + GRACE_MS + 1500, `ghosts stayed ${goneMs} ms`);
    assert.deepEqual(new Set(seen.removed), new Set(pushers.filter((m) => gone.has(m.id)).map((m) => m.id)));
    assert.deepEqual(new Set(seen.leaves), new Set(herenows.filter((m) => gone.has(m.id)).map((m) => m.id)));
  }
  // Past the grace of every connection A had: nothing more arrives.
  await sleep(GRACE_MS + 2000);
  if (GRACE_MS === 0) {
    // Without a grace, as before it: every member leaves and comes back.
    await until(
      'every member seen leaving and coming back',
      () => seen.removed.length === MEMBERS && seen.leaves.length === MEMBERS
        && seen.added.length === MEMBERS && seen.joins.length === MEMBERS,
      LONG,
    );
    console.log(`measured: ${MODE} without a grace: members seen leaving by the observers: ${seen.removed.length + seen.leaves.length}`);
    seen.removed.length = seen.leaves.length = seen.added.length = seen.joins.length = 0;
  }
  assert.deepEqual(left(seen.removed), [], 'a returning pusher-js member was removed');
  assert.deepEqual(left(seen.leaves), [], 'a returning /v1/ws member left');
  assert.deepEqual(seen.added, [], 'a member was added again');
  assert.deepEqual(seen.joins, [], 'a member joined again');
  console.log(`measured: ${MODE}: members seen leaving by the observers: ${left(seen.removed).length + left(seen.leaves).length} (of ${stay} that came back)`);

  // The rosters and B's APIs are exact.
  const pIds = pushers.filter(expected).map((m) => m.id).concat('observer').sort();
  const wIds = herenows.filter(expected).map((m) => m.id).sort();
  assert.deepEqual(Object.keys(watcher.channel.members.members).sort(), pIds);
  assert.deepEqual([...room.members.values()].map((m) => m.id).sort(), wIds);
  const users = await backend.get({ path: `/channels/${CHANNEL}/users` });
  assert.equal(users.status, 200);
  assert.deepEqual((await users.json()).users.map((u) => u.id).sort(), pIds);
  const count = await (await fetch(`${B.origin}/v1/spaces/${SPACE}/count`)).json();
  assert.equal(count.users, wIds.length, JSON.stringify(count));

  for (const m of [...pushers, watcher]) m.client.disconnect();
  for (const m of herenows) m.client.close();
  observer.close();
  lb.close();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e && e.stack ? e.stack : String(e));
    process.exit(1);
  },
);
