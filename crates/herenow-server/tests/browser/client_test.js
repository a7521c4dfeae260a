// Unit tests of /client.js's connection logic with a scripted WebSocket and
// fake timers, for crates/herenow-server/tests/browser.rs:
//
//   node --test client_test.js
//
// The real server and browser are covered by two_users.js; these cover what
// a real network rarely shows on cue: reconnecting with backoff and jitter,
// restoring joins/subscriptions/invisibility/watches, refreshing a refused
// token, noticing a dead socket, pinging when the tab becomes visible, and
// a watch's pages, status changes and resyncs.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");

// ---- a scripted world: timers, document, WebSocket -------------------------

function world() {
  const w = { now: 0, timers: [], sockets: [], listeners: {}, visibility: "visible" };
  let id = 0;
  w.setTimeout = (fn, ms) => { w.timers.push({ id: ++id, at: w.now + ms, fn }); return id; };
  w.clearTimeout = (t) => { w.timers = w.timers.filter((x) => x.id !== t); };
  w.setInterval = (fn, ms) => {
    const t = { id: ++id, at: w.now + ms, fn, every: ms };
    w.timers.push(t);
    return t.id;
  };
  w.clearInterval = w.clearTimeout;
  w.advance = async (ms) => {
    const end = w.now + ms;
    for (;;) {
      w.timers.sort((a, b) => a.at - b.at);
      const t = w.timers[0];
      if (!t || t.at > end) break;
      w.now = t.at;
      if (t.every) t.at += t.every; else w.timers.shift();
      t.fn();
      await flush();
    }
    w.now = end;
  };
  class FakeSocket {
    constructor(url) {
      this.url = url;
      this.sent = [];
      this.closed = null;
      w.sockets.push(this);
    }
    send(s) { this.sent.push(JSON.parse(s)); }
    close(code) { this.closed = code || 1000; }
    // Test side:
    open() { this.onopen && this.onopen(); }
    recv(msg) { this.onmessage && this.onmessage({ data: JSON.stringify(msg) }); }
    drop(code) { this.onclose && this.onclose({ code, reason: "" }); }
    last(type) { return [...this.sent].reverse().find((m) => m.type === type); }
    types() { return this.sent.map((m) => m.type); }
  }
  w.WebSocket = FakeSocket;
  w.document = {
    get visibilityState() { return w.visibility; },
    addEventListener: (t, f) => { w.listeners[t] = f; },
    removeEventListener: (t) => { delete w.listeners[t]; },
  };
  return w;
}

const flush = () => new Promise((r) => setImmediate(r));

function load(w) {
  const g = {
    setTimeout: w.setTimeout, clearTimeout: w.clearTimeout,
    setInterval: w.setInterval, clearInterval: w.clearInterval,
    WebSocket: w.WebSocket, document: w.document,
    location: { protocol: "http:", host: "example.test" },
    addEventListener: (t, f) => { w.listeners[`window:${t}`] = f; },
    removeEventListener: () => {},
  };
  g.window = g;
  const src = require("node:fs").readFileSync(
    path.join(__dirname, "../../assets/client.js"), "utf8");
  // The client's `global` is its `window`; timers are looked up as globals.
  new Function("window", "setTimeout", "clearTimeout", "setInterval", "clearInterval",
    "WebSocket", "document", src)(g, g.setTimeout, g.clearTimeout, g.setInterval,
    g.clearInterval, g.WebSocket, g.document);
  return g.Herenow;
}

async function welcome(ws, ping = 10_000, extra = {}) {
  ws.open();
  await flush();
  ws.recv({ type: "welcome", conn: `c${ws.url.length}`, member: { kind: "user", id: "ann" }, ping_ms: ping, ...extra });
  await flush();
}

// ---- tests -------------------------------------------------------------------

test("hello first, then joins and subscriptions said again after every reconnect", async () => {
  const w = world();
  const H = load(w);
  const client = new H.Client({ token: "t1" });
  const room = client.space("room:1");
  room.join({ device: "laptop" });
  room.subscribe();
  client.connect();
  await flush();
  assert.equal(w.sockets.length, 1);
  assert.equal(w.sockets[0].url, "ws://example.test/v1/ws");
  await welcome(w.sockets[0]);
  assert.deepEqual(w.sockets[0].types(), ["hello", "join", "subscribe"]);
  assert.equal(w.sockets[0].sent[0].token, "t1");
  assert.deepEqual(w.sockets[0].last("join").meta, { device: "laptop" });
  client.setInvisible(true);

  w.sockets[0].drop(1006); // the network went away
  assert.equal(client.state, "reconnecting");
  await w.advance(BACKOFF_CAP(0));
  assert.equal(w.sockets.length, 2, "one reconnect within the first backoff");
  await welcome(w.sockets[1]);
  assert.deepEqual(w.sockets[1].types(), ["hello", "invisible", "join", "subscribe"]);
  assert.equal(w.sockets[1].last("invisible").on, true);
});

const BACKOFF_CAP = (attempt) => Math.min(30_000, 500 * 2 ** attempt);

test("backoff grows, with jitter under the cap, and resets once connected", async () => {
  const w = world();
  const H = load(w);
  const client = new H.Client({ token: "t" }).connect();
  await flush();
  for (let attempt = 0; attempt < 8; attempt++) {
    const before = w.sockets.length;
    w.sockets[before - 1].drop(1006);
    const t = w.timers.find((x) => !x.every);
    assert.ok(t.at - w.now <= BACKOFF_CAP(attempt), `attempt ${attempt}: wait ${t.at - w.now}`);
    await w.advance(BACKOFF_CAP(attempt));
    await flush();
    assert.equal(w.sockets.length, before + 1);
  }
  await welcome(w.sockets[w.sockets.length - 1]);
  w.sockets[w.sockets.length - 1].drop(1006);
  const t = w.timers.find((x) => !x.every);
  assert.ok(t.at - w.now <= BACKOFF_CAP(0), "the backoff starts over after a welcome");
  client.close();
});

test("a refused token is fetched again; a fixed token that is refused stops", async () => {
  const w = world();
  const H = load(w);
  let calls = 0;
  const client = new H.Client({ token: async () => `tok-${++calls}` }).connect();
  await flush();
  await welcome(w.sockets[0]);
  assert.equal(w.sockets[0].sent[0].token, "tok-1");
  w.sockets[0].drop(1006);
  await w.advance(BACKOFF_CAP(0));
  await flush();
  assert.equal(w.sockets[1].sent.length, 0);
  w.sockets[1].open();
  await flush();
  assert.equal(w.sockets[1].sent[0].token, "tok-1", "an ordinary drop keeps the token");
  w.sockets[1].drop(4002); // expired
  await w.advance(BACKOFF_CAP(1));
  await flush();
  w.sockets[2].open();
  await flush();
  assert.equal(w.sockets[2].sent[0].token, "tok-2", "4002 fetches a new token");
  client.close();

  const w2 = world();
  const H2 = load(w2);
  const fixed = new H2.Client({ token: "forged" }).connect();
  const states = [];
  fixed.on("state", (s) => states.push(s));
  await flush();
  w2.sockets[0].drop(4001);
  await w2.advance(60_000);
  assert.equal(w2.sockets.length, 1, "no retry with a token the server refused");
  assert.equal(fixed.state, "closed");
});

test("pings every ping_ms and when the tab becomes visible; two lost pongs reconnect", async () => {
  const w = world();
  const H = load(w);
  const client = new H.Client({ token: "t" }).connect();
  await flush();
  const ws = w.sockets[0];
  await welcome(ws, 5_000);
  await w.advance(5_000);
  assert.equal(ws.types().filter((t) => t === "ping").length, 1);
  ws.recv({ type: "pong", ref: ws.last("ping").ref });
  await flush();
  w.visibility = "visible";
  w.listeners.visibilitychange();
  await flush();
  assert.equal(ws.types().filter((t) => t === "ping").length, 2, "a ping on becoming visible");
  ws.recv({ type: "pong", ref: ws.last("ping").ref });
  await flush();
  // Now the server goes silent: no pongs.
  await w.advance(5_000);
  await w.advance(5_000);
  await w.advance(5_000);
  assert.ok(ws.closed, "the dead socket was closed");
  assert.equal(client.state, "reconnecting");
  client.close();
});

test("snapshot pages, then events with per-connection metas", async () => {
  const w = world();
  const H = load(w);
  const client = new H.Client({ token: "t" }).connect();
  const room = client.space("r");
  room.subscribe();
  await flush();
  const ws = w.sockets[0];
  await welcome(ws);
  let changes = 0;
  room.on("change", () => changes++);
  ws.recv({ type: "snapshot", space: "r", members: [{ kind: "user", id: "a", status: "online", last_seen_ms: 1, metas: [{ conn: "x", meta: { d: 1 } }] }], last: false });
  assert.equal(room.members.size, 0, "nothing shown before the last page");
  ws.recv({ type: "snapshot", space: "r", members: [{ kind: "user", id: "b", status: "away", last_seen_ms: 2, metas: [] }], last: true, omitted: 0 });
  assert.equal(room.members.size, 2);
  assert.equal(changes, 1);
  ws.recv({ type: "event", space: "r", event: { type: "connect", kind: "user", id: "a", status: "online", last_seen_ms: 3, conn: "y", meta: { d: 2 } } });
  assert.deepEqual([...room.members.get("user:a").metas.keys()].sort(), ["x", "y"]);
  ws.recv({ type: "event", space: "r", event: { type: "disconnect", kind: "user", id: "a", status: "online", last_seen_ms: 3, conn: "x" } });
  assert.deepEqual([...room.members.get("user:a").metas.keys()], ["y"]);
  ws.recv({ type: "event", space: "r", event: { type: "leave", kind: "user", id: "a", status: "offline", reason: "explicit", conn: "y" } });
  assert.equal(room.members.has("user:a"), false);
  // A lagged subscription ignores events until its fresh snapshot.
  ws.recv({ type: "lagged", space: "r", missed: 3 });
  ws.recv({ type: "event", space: "r", event: { type: "join", kind: "user", id: "c", status: "online" } });
  assert.equal(room.members.has("user:c"), false);
  ws.recv({ type: "snapshot", space: "r", members: [{ kind: "user", id: "c", status: "online", metas: [] }], last: true });
  assert.deepEqual([...room.members.keys()], ["user:c"]);
  // A lag in the middle of a resync snapshot: the half received pages are
  // superseded by the next resync, so nobody of them is left over.
  ws.recv({ type: "lagged", space: "r", missed: 1 });
  ws.recv({ type: "snapshot", space: "r", members: [{ kind: "user", id: "gone", status: "online", metas: [] }], last: false, resync: true });
  ws.recv({ type: "lagged", space: "r", missed: 1 });
  ws.recv({ type: "snapshot", space: "r", members: [{ kind: "user", id: "d", status: "online", metas: [] }], last: true, resync: true });
  assert.deepEqual([...room.members.keys()], ["user:d"], "the map is exactly the resync snapshot");
  client.close();
  assert.equal(ws.closed, 1000, "close() says goodbye, so the server detaches at once");
});

// ---- watching users ------------------------------------------------------------

const ids = (watch) => [...watch.users.keys()].sort();

test("watching: a picture shown once complete, then status, new friends, unwatched and a resync that replaces it", async () => {
  const w = world();
  const H = load(w);
  const client = new H.Client({ token: "t" }).connect();
  const contacts = client.watch({ friends: true });
  assert.equal(client.watch({ friends: true }), contacts, "one watch per client");
  await flush();
  const ws = w.sockets[0];
  await welcome(ws);
  assert.deepEqual(ws.types(), ["hello", "watch"], "said once the socket is open");
  const sent = ws.last("watch");
  assert.deepEqual(sent.users, []);
  assert.equal(sent.friends, true);
  assert.equal(sent.space, undefined, "no space: anywhere");
  assert.equal(sent.replace, true, "a fresh watch replaces whatever the server holds");
  let changes = 0;
  contacts.on("change", () => changes++);

  ws.recv({ type: "watching", space: null, users: [{ id: "bob", status: "online", last_seen_ms: 5, space: "site" }], last: false, resync: true });
  assert.equal(contacts.users.size, 0, "nothing shown before the last page");
  ws.recv({ type: "watching", space: null, users: [{ id: "cy", status: "offline", last_seen_ms: null }], last: true, resync: true, ref: sent.ref });
  assert.deepEqual(ids(contacts), ["bob", "cy"]);
  assert.deepEqual(contacts.users.get("bob"), { id: "bob", status: "online", last_seen_ms: 5, space: "site" });
  assert.deepEqual(contacts.users.get("cy"), { id: "cy", status: "offline", last_seen_ms: null, space: null });
  assert.equal(contacts.synced, true);
  assert.equal(changes, 1);
  assert.equal((await contacts.ready).ref, sent.ref, "ready settles with the answer");

  const seen = [];
  contacts.on("status", (u, before) => seen.push([u.id, u.status, before]));
  ws.recv({ type: "status", id: "bob", status: "away", last_seen_ms: 5, space: "site" });
  assert.deepEqual(seen, [["bob", "away", "online"]]);
  assert.equal(contacts.users.get("bob").status, "away");

  // A friend added to the set: a page without resync, merged.
  ws.recv({ type: "watching", space: null, users: [{ id: "dee", status: "online", last_seen_ms: 9 }], last: true, resync: false });
  assert.deepEqual(ids(contacts), ["bob", "cy", "dee"]);
  // A friend gone from it.
  const gone = [];
  contacts.on("unwatched", (list) => gone.push(...list));
  ws.recv({ type: "unwatched", users: ["cy"] });
  assert.deepEqual(gone, ["cy"]);
  assert.deepEqual(ids(contacts), ["bob", "dee"]);

  // After lag: a fresh picture replaces the map exactly, once complete.
  ws.recv({ type: "watching", space: null, users: [{ id: "bob", status: "offline", last_seen_ms: 7 }], last: false, resync: true });
  assert.deepEqual(ids(contacts), ["bob", "dee"], "the old map stays until the last page");
  assert.equal(contacts.users.get("bob").status, "away");
  ws.recv({ type: "watching", space: null, users: [{ id: "eve", status: "online", last_seen_ms: 8 }], last: true, resync: true });
  assert.deepEqual(ids(contacts), ["bob", "eve"], "dee is not in the picture: no longer watched");
  assert.deepEqual(contacts.users.get("bob"), { id: "bob", status: "offline", last_seen_ms: 7, space: null });
  assert.deepEqual(contacts.list().map((u) => u.id), ["eve", "bob"], "online first");
  client.close();
});

test("watching again after a reconnect, as a fresh picture; adding, changing scope and stopping", async () => {
  const w = world();
  const H = load(w);
  const client = new H.Client({ token: "t" }).connect();
  await flush();
  const ws0 = w.sockets[0];
  await welcome(ws0);
  const contacts = client.watch({ users: ["bob"], space: "site" });
  let sent = ws0.last("watch");
  assert.deepEqual([sent.users, sent.space, sent.replace], [["bob"], "site", true]);
  ws0.recv({ type: "watching", space: "site", users: [{ id: "bob", status: "online", last_seen_ms: 1 }], last: true, resync: true, ref: sent.ref });

  // Same scope: only what is new is asked for, and its answer is merged.
  assert.equal(contacts.add(["bob", "cy"]) instanceof Promise, true);
  sent = ws0.last("watch");
  assert.deepEqual([sent.users, sent.space, sent.replace, sent.friends], [["cy"], "site", undefined, false]);
  ws0.recv({ type: "watching", space: "site", users: [{ id: "cy", status: "offline", last_seen_ms: null }], last: true, resync: false, ref: sent.ref });
  assert.deepEqual(ids(contacts), ["bob", "cy"]);

  ws0.drop(1006);
  await w.advance(BACKOFF_CAP(0));
  const ws1 = w.sockets[1];
  await welcome(ws1);
  assert.deepEqual(ws1.types(), ["hello", "watch"]);
  sent = ws1.last("watch");
  assert.deepEqual([sent.users.sort(), sent.space, sent.replace, sent.friends], [["bob", "cy"], "site", true, false]);
  assert.equal(contacts.synced, false, "stale until the fresh picture");
  ws1.recv({ type: "watching", space: "site", users: [{ id: "bob", status: "offline", last_seen_ms: 3 }], last: true, resync: true, ref: sent.ref });
  assert.deepEqual(ids(contacts), ["bob"], "the fresh picture replaces the old map");
  assert.equal(contacts.synced, true);

  // Without the friend set, removing is an unwatch, and local at once.
  contacts.remove(["bob"]);
  assert.deepEqual(ws1.last("unwatch").users, ["bob"]);
  assert.equal(contacts.users.size, 0);
  // With it, the server decides who stays (a friend does): sent afresh.
  client.watch({ users: ["x"], friends: true, space: "site", replace: true });
  contacts.remove(["x"]);
  sent = ws1.last("watch");
  assert.deepEqual([sent.users, sent.friends, sent.replace], [[], true, true]);

  // Another scope starts afresh.
  client.watch({ users: ["zed"] });
  sent = ws1.last("watch");
  assert.deepEqual([sent.users, sent.space, sent.replace], [["zed"], undefined, true]);
  assert.equal(contacts.space, null);

  contacts.stop();
  assert.equal(ws1.last("unwatch").users, undefined, "unwatch without users: everything");
  assert.equal(contacts.active, false);
  ws1.recv({ type: "status", id: "zed", status: "online", last_seen_ms: 4 });
  assert.equal(contacts.users.size, 0, "what is still in flight is ignored");
  ws1.drop(1006);
  await w.advance(BACKOFF_CAP(0));
  await welcome(w.sockets[2]);
  assert.deepEqual(w.sockets[2].types(), ["hello"], "a stopped watch is not said again");
  client.close();
});

test("a refused watch is not said again; serverNow follows the server's clock", async () => {
  const w = world();
  const H = load(w);
  const client = new H.Client({ token: "t" }).connect();
  const contacts = client.watch({ friends: true });
  const errors = [];
  contacts.on("error", (e) => errors.push(e.code));
  await flush();
  const ahead = 90_000;
  await welcome(w.sockets[0], 10_000, { server_time_ms: Date.now() + ahead });
  assert.ok(Math.abs(client.serverNow() - Date.now() - ahead) < 1000, "welcome sets the offset");
  const sent = w.sockets[0].last("watch");
  w.sockets[0].recv({ type: "error", ref: sent.ref, code: "no-friend-set", message: "a guest" });
  await flush();
  assert.deepEqual(errors, ["no-friend-set"]);
  assert.equal(contacts.active, false);
  await assert.rejects(contacts.ready, (e) => e.code === "no-friend-set");

  w.sockets[0].recv({ type: "pong", server_time_ms: Date.now() - ahead });
  assert.ok(Math.abs(client.serverNow() - Date.now() + ahead) < 1000, "a pong moves it");
  w.sockets[0].drop(1006);
  await w.advance(BACKOFF_CAP(0));
  await welcome(w.sockets[1]);
  assert.deepEqual(w.sockets[1].types(), ["hello"]);
  client.close();
});
