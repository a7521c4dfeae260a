// Unit tests of /client.js's connection logic with a scripted WebSocket and
// fake timers, for crates/herenow-server/tests/browser.rs:
//
//   node --test client_test.js
//
// The real server and browser are covered by two_users.js; these cover what
// a real network rarely shows on cue: reconnecting with backoff and jitter,
// restoring joins/subscriptions/invisibility, refreshing a refused token,
// noticing a dead socket, pinging when the tab becomes visible.
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

async function welcome(ws, ping = 10_000) {
  ws.open();
  await flush();
  ws.recv({ type: "welcome", conn: `c${ws.url.length}`, member: { kind: "user", id: "ann" }, ping_ms: ping });
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
  client.close();
  assert.equal(ws.closed, 1000, "close() says goodbye, so the server detaches at once");
});
