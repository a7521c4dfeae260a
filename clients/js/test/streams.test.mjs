// Server-Sent Events: the parser, and the two live streams against a real
// server, including resuming after a dropped connection.

import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { Herenow, HerenowError, SseParser } from "../dist/index.js";
import { startProxy, startServer, unique, within } from "./helpers/server.mjs";

/** Reads the next item of an async iterator, failing the test after 10 s. */
function next(it, what) {
  return within(it.next(), 10_000, what).then((r) => {
    assert.equal(r.done, false, `the stream ended while waiting for ${what}`);
    return r.value;
  });
}

/** Reads items until one satisfies `pred` (events of other members may come first); answers it. */
async function until(it, pred, what) {
  for (;;) {
    const item = await next(it, what);
    if (pred(item)) return item;
  }
}

describe("SseParser", () => {
  test("events, multi-line data, comments, and every kind of line end", () => {
    const p = new SseParser();
    assert.deepEqual(p.feed(": keep-alive\n\nevent: join\ndata: {\"a\":1}\n\n"), [{ event: "join", data: '{"a":1}', id: "" }]);
    assert.deepEqual(p.feed("data: one\r\ndata: two\r\n\r\n"), [{ event: "message", data: "one\ntwo", id: "" }]);
    assert.deepEqual(p.feed("id: 7\rdata:x\r\r"), [{ event: "message", data: "x", id: "7" }]);
    assert.deepEqual(p.feed("data\n\n"), [{ event: "message", data: "", id: "7" }], "a field without a colon");
    assert.deepEqual(p.feed("event: lonely\n\n"), [], "an event without data is not dispatched");
    assert.deepEqual(p.feed("retry: 100\nfoo: bar\ndata:  two spaces\n\n"), [{ event: "message", data: " two spaces", id: "7" }]);
  });

  test("chunks split anywhere, CRLF split between chunks, a BOM at the start", () => {
    const text = "\uFEFFevent: status\r\ndata: {\"id\":\"bob\"}\r\n\r\nevent: leave\r\ndata: x\r\n\r\n";
    for (let size = 1; size <= 7; size++) {
      const p = new SseParser();
      const out = [];
      for (let i = 0; i < text.length; i += size) out.push(...p.feed(text.slice(i, i + size)));
      assert.deepEqual(out, [
        { event: "status", data: '{"id":"bob"}', id: "" },
        { event: "leave", data: "x", id: "" },
      ], `chunks of ${size}`);
    }
  });

  test("an event larger than maxEventSize is stream-too-large, not unbounded memory", () => {
    const p = new SseParser(64);
    assert.throws(() => p.feed(`data: ${"x".repeat(100)}`), (e) => e instanceof HerenowError && e.code === "stream-too-large");
    const q = new SseParser(64);
    q.feed(`data: ${"x".repeat(40)}\n`);
    assert.throws(() => q.feed(`data: ${"y".repeat(40)}\n`), (e) => e.code === "stream-too-large", "data lines add up");
  });
});

describe("space events", () => {
  let server;
  let herenow;
  before(async () => {
    server = await startServer();
    herenow = new Herenow({ baseUrl: server.baseUrl });
  });
  after(() => server?.stop());

  test("a snapshot, then join, update and leave events as they happen", async () => {
    const space = unique("live");
    await herenow.heartbeat(space, { id: "early", meta: { n: 1 } });
    const stream = herenow.events(space);
    const it = stream[Symbol.asyncIterator]();
    try {
      const snapshot = await next(it, "the snapshot");
      assert.equal(snapshot.type, "snapshot");
      assert.equal(snapshot.space, space);
      assert.equal(snapshot.resync, false);
      assert.equal(snapshot.omitted, 0);
      assert.deepEqual(snapshot.members.map((m) => m.id), ["early"]);
      assert.equal(snapshot.config.online_ms, 60_000);
      assert.equal(stream.synced, true);
      assert.ok(stream.members.has("user:early"));

      await herenow.heartbeat(space, { id: "bob", kind: "guest" });
      const join = await next(it, "bob's join");
      assert.equal(join.type, "join");
      assert.equal(join.id, "bob");
      assert.equal(join.kind, "guest");
      assert.equal(join.status, "online");
      assert.equal(join.space, space);
      assert.ok(stream.members.has("guest:bob"));

      await herenow.heartbeat(space, { id: "early", meta: { n: 2 } });
      const update = await next(it, "early's update");
      assert.equal(update.type, "update");
      assert.deepEqual(update.meta, { n: 2 });
      assert.deepEqual(stream.members.get("user:early").meta, { n: 2 });

      await herenow.leave(space, [{ id: "bob", kind: "guest" }]);
      const leave = await next(it, "bob's leave");
      assert.equal(leave.type, "leave");
      assert.equal(leave.reason, "explicit");
      assert.equal(leave.status, "offline");
      assert.equal(stream.members.has("guest:bob"), false);
      assert.equal(stream.connections, 1);
    } finally {
      stream.close();
    }
    assert.deepEqual(await it.next(), { done: true, value: undefined }, "a closed stream ends");
  });

  test("the kept members are bounded by maxMembers; the items flow all the same", async () => {
    const space = unique("big");
    await herenow.heartbeats(space, ["a", "b"]);
    const stream = herenow.events(space, { maxMembers: 2 });
    const it = stream[Symbol.asyncIterator]();
    try {
      await next(it, "the snapshot");
      assert.equal(stream.members.size, 2);
      assert.equal(stream.truncated, false);
      await herenow.heartbeat(space, "c");
      assert.equal((await next(it, "c's join")).id, "c");
      assert.equal(stream.members.size, 2);
      assert.equal(stream.truncated, true);
    } finally {
      stream.close();
    }
  });

  test("close() ends a pending next() at once, and break ends the stream too", async () => {
    const space = unique("quiet");
    const stream = herenow.events(space);
    const it = stream[Symbol.asyncIterator]();
    await next(it, "the snapshot");
    const pending = it.next();
    stream.close();
    assert.deepEqual(await within(pending, 5000, "the end"), { done: true, value: undefined });

    const ac = new AbortController();
    let count = 0;
    for await (const ev of herenow.events(space, { signal: ac.signal })) {
      assert.equal(ev.type, "snapshot");
      count += 1;
      ac.abort();
    }
    assert.equal(count, 1);
    assert.throws(() => stream[Symbol.asyncIterator](), TypeError, "a stream is iterated once");
  });

  test("a dropped connection is resumed: a resync snapshot holds what happened meanwhile", async () => {
    const proxy = await startProxy(server.baseUrl);
    const viaProxy = new Herenow({ baseUrl: proxy.baseUrl });
    const space = unique("resume");
    const retries = [];
    const stream = viaProxy.events(space, { minDelayMs: 10, maxDelayMs: 50, onRetry: (e) => retries.push(e.code) });
    const it = stream[Symbol.asyncIterator]();
    try {
      assert.deepEqual((await next(it, "the snapshot")).members, []);
      await herenow.heartbeat(space, "before");
      assert.equal((await next(it, "before's join")).id, "before");

      proxy.cut(); // the network drops the stream
      await herenow.heartbeat(space, "during"); // nobody can tell this stream

      const resync = await until(it, (e) => e.type === "snapshot", "the resync snapshot");
      assert.equal(resync.resync, true, "a reconnect's snapshot replaces what the reader knew");
      assert.deepEqual(resync.members.map((m) => m.id).sort(), ["before", "during"]);
      assert.deepEqual([...stream.members.keys()].sort(), ["user:before", "user:during"]);
      assert.ok(stream.connections >= 2);
      assert.ok(retries.length >= 1);

      await herenow.heartbeat(space, "after");
      assert.equal((await until(it, (e) => e.type === "join", "after's join")).id, "after", "events flow again");
    } finally {
      stream.close();
      await proxy.close();
    }
  });

  test("a stream that goes silent past idleTimeoutMs is reopened", async () => {
    // A server that sends a snapshot and then nothing, not even keep-alives.
    let opened = 0;
    const silent = http.createServer((req, res) => {
      opened += 1;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`event: snapshot\ndata: {"space":"s","members":[],"omitted":0,"config":{}}\n\n`);
    });
    await new Promise((r) => silent.listen(0, "127.0.0.1", r));
    const c = new Herenow({ baseUrl: `http://127.0.0.1:${silent.address().port}` });
    const codes = [];
    const stream = c.events("s", { idleTimeoutMs: 300, minDelayMs: 5, maxDelayMs: 10, onRetry: (e) => codes.push(e.code) });
    const it = stream[Symbol.asyncIterator]();
    try {
      assert.equal((await next(it, "the first snapshot")).resync, false);
      const second = await next(it, "the snapshot after the idle timeout");
      assert.equal(second.resync, true);
      assert.equal(opened, 2);
      assert.deepEqual(codes, ["request-timeout"]);
    } finally {
      stream.close();
      silent.closeAllConnections?.();
      silent.close();
    }
  });
});

describe("watching users", () => {
  let server;
  let herenow;
  before(async () => {
    server = await startServer();
    herenow = new Herenow({ baseUrl: server.baseUrl });
  });
  after(() => server?.stop());

  test("a friend set's states, then status changes, additions and removals as they happen", async () => {
    const ann = unique("ann");
    const bob = unique("bob");
    const cy = unique("cy");
    const space = unique("site");
    await herenow.setFriends(ann, [bob]);
    const stream = herenow.watch({ friends_of: ann });
    const it = stream[Symbol.asyncIterator]();
    try {
      const first = await next(it, "the first watching page");
      assert.equal(first.type, "watching");
      assert.equal(first.space, null);
      assert.equal(first.last, true);
      assert.equal(first.resync, false);
      assert.deepEqual(first.users, [{ id: bob, status: "offline", last_seen_ms: null }]);
      assert.equal(stream.synced, true);

      await herenow.heartbeat(space, bob);
      const online = await until(it, (e) => e.type === "status", "bob online");
      assert.equal(online.id, bob);
      assert.equal(online.status, "online");
      assert.equal(online.space, space);
      assert.equal(stream.users.get(bob).status, "online");

      await herenow.addFriends(ann, [cy]);
      const added = await until(it, (e) => e.type === "watching", "cy's page");
      assert.equal(added.resync, false);
      assert.deepEqual(added.users.map((u) => u.id), [cy]);
      assert.deepEqual([...stream.users.keys()].sort(), [bob, cy].sort());

      await herenow.removeFriends(ann, [bob]);
      const gone = await until(it, (e) => e.type === "unwatched", "bob unwatched");
      assert.deepEqual(gone.users, [bob]);
      assert.deepEqual([...stream.users.keys()], [cy]);

      await herenow.leave(space, [bob]);
      await herenow.heartbeat(space, cy);
      const cyOnline = await until(it, (e) => e.type === "status", "cy online");
      assert.equal(cyOnline.id, cy, "no status for a user no longer watched");
    } finally {
      stream.close();
    }
  });

  test("users by id, within one space; a user never seen is offline with null", async () => {
    const space = unique("room");
    const dee = unique("dee");
    const nobody = unique("nobody");
    await herenow.heartbeat(space, dee);
    const stream = herenow.watch({ users: [dee, nobody], space });
    const it = stream[Symbol.asyncIterator]();
    try {
      const page = await next(it, "the page");
      assert.equal(page.space, space);
      const byId = Object.fromEntries(page.users.map((u) => [u.id, u]));
      assert.equal(byId[dee].status, "online");
      assert.deepEqual(byId[nobody], { id: nobody, status: "offline", last_seen_ms: null });

      await herenow.leave(space, [dee]);
      const off = await until(it, (e) => e.type === "status", "dee offline");
      assert.equal(off.status, "offline");
      assert.equal(typeof off.last_seen_ms, "number", "remembered after the leave");
    } finally {
      stream.close();
    }
  });

  test("a dropped watch is resumed with a fresh picture marked resync", async () => {
    const proxy = await startProxy(server.baseUrl);
    const viaProxy = new Herenow({ baseUrl: proxy.baseUrl });
    const eve = unique("eve");
    const fay = unique("fay");
    const space = unique("site");
    const stream = viaProxy.watch({ users: [eve, fay] }, { minDelayMs: 10, maxDelayMs: 50 });
    const it = stream[Symbol.asyncIterator]();
    try {
      const first = await next(it, "the first page");
      assert.equal(first.resync, false);
      assert.ok(first.users.every((u) => u.status === "offline"));

      proxy.cut();
      await herenow.heartbeat(space, eve); // while the stream is down

      const again = await until(it, (e) => e.type === "watching", "the picture after the reconnect");
      assert.equal(again.resync, true, "the reconnect's first pages replace the map");
      assert.equal(again.last, true);
      const byId = Object.fromEntries(again.users.map((u) => [u.id, u.status]));
      assert.deepEqual(byId, { [eve]: "online", [fay]: "offline" });
      assert.equal(stream.users.get(eve).status, "online");
      assert.ok(stream.connections >= 2);

      await herenow.heartbeat(space, fay);
      assert.equal((await until(it, (e) => e.type === "status", "fay online")).id, fay);
    } finally {
      stream.close();
      await proxy.close();
    }
  });
});
