// Errors: problems from a real server map to HerenowError with their code,
// status and Retry-After; transport failures and bad arguments are typed too.

import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { Herenow, HerenowError, parseRetryAfter } from "../dist/index.js";
import { closedPort, startServer, unique, within } from "./helpers/server.mjs";

/** Asserts `promise` rejects with a HerenowError of this code and status; answers it. */
async function rejectsWith(promise, code, status) {
  let caught;
  await assert.rejects(promise, (e) => {
    caught = e;
    return true;
  });
  assert.ok(caught instanceof HerenowError, `expected a HerenowError, got ${caught}`);
  assert.equal(caught.code, code, caught.message);
  assert.equal(caught.status, status, caught.message);
  return caught;
}

/** A throwaway HTTP server answering with `handler`; closed after the test. */
async function fakeServer(handler) {
  const srv = http.createServer(handler);
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    close: () => {
      srv.closeAllConnections?.();
      return new Promise((r) => srv.close(r));
    },
  };
}

describe("problems from the server", () => {
  let server;
  let herenow;
  before(async () => {
    server = await startServer();
    herenow = new Herenow({ baseUrl: server.baseUrl });
  });
  after(() => server?.stop());

  test("a 4xx problem maps to HerenowError with its code, status and document", async () => {
    const e = await rejectsWith(herenow.member("lobby", "x".repeat(300)), "bad-member-id", 400);
    assert.equal(e.retryAfter, null);
    assert.equal(e.retryable, false);
    assert.match(e.detail, /300 bytes/);
    assert.equal(e.problem.type, "https://herenow.dev/problems/bad-member-id");
    assert.equal(e.problem.code, "bad-member-id");
    assert.equal(e.problem.status, 400);
    assert.equal(e.method, "GET");
    assert.match(e.path, /^\/v1\/spaces\/lobby\/members\/x+$/);
    assert.ok(e instanceof Error);
    assert.equal(e.name, "HerenowError");
  });

  test("bad inputs each get the server's precise code", async () => {
    const space = unique("bad");
    await rejectsWith(herenow.heartbeats(space, []), "empty-batch", 400);
    await rejectsWith(herenow.heartbeats(space, Array.from({ length: 10_001 }, (_, i) => `u${i}`)), "batch-too-large", 400);
    await rejectsWith(herenow.heartbeat("no spaces allowed", "ann"), "bad-space-name", 400);
    await rejectsWith(herenow.heartbeat("x".repeat(129), "ann"), "bad-space-name", 400);
    await rejectsWith(herenow.heartbeat(space, "tab\there"), "bad-member-id", 400);
    await rejectsWith(herenow.heartbeat(space, { id: "ann", meta: { big: "x".repeat(2000) } }), "bad-metadata", 400);
    await rejectsWith(herenow.heartbeat(space, { id: "ann", at_ms: Date.now() + 3_600_000 }), "bad-time", 400);
    await rejectsWith(herenow.heartbeat(space, { id: "ann", kind: "robot" }), "bad-json", 400);
    await rejectsWith(herenow.online(space, { window: "10" }), "bad-duration", 400);
    await rejectsWith(herenow.online(space, { window: "ten minutes" }), "bad-duration", 400);
    await rejectsWith(herenow.online(space, { limit: 0 }), "bad-limit", 400);
    await rejectsWith(herenow.online(space, { limit: 1001 }), "bad-limit", 400);
    await rejectsWith(herenow.online(space, { kind: "robots" }), "bad-kind", 400);
    await rejectsWith(herenow.online(space, { order: "random" }), "bad-order", 400);
    await herenow.heartbeat(space, "someone"); // a cursor is checked against a populated space
    await rejectsWith(herenow.online(space, { cursor: "not-a-cursor" }), "bad-cursor", 400);
    await rejectsWith(herenow.member(space, "ann", { kind: "robot" }), "bad-kind", 400);
    await rejectsWith(herenow.usersStatus([]), "empty-batch", 400);
    const e = await rejectsWith(herenow.usersStatus(["ok", "x".repeat(257)]), "bad-member-id", 400);
    assert.match(e.detail, /ids\[1\]/, "the detail names the position");
    await rejectsWith(herenow.addFriends("ann", []), "empty-batch", 400);
    await rejectsWith(herenow.setFriends("ann", Array.from({ length: 5001 }, (_, i) => `f${i}`)), "too-many-friends", 400);
    await rejectsWith(herenow.setConfig(space, { online_ms: 0, away_ms: 1, window_ms: 1, retention_ms: 1 }), "bad-config", 400);
    await rejectsWith(herenow.createToken({ user: "ann", spaces: ["*", "room"] }), "bad-spaces", 400);
  });

  test("a stream refused with a 4xx ends the iteration with that error, not a retry", async () => {
    const stream = herenow.watch({ users: [] });
    const it = stream[Symbol.asyncIterator]();
    await rejectsWith(within(it.next(), 5000, "the refusal"), "nothing-to-watch", 400);
    assert.equal(stream.connections, 1, "a 4xx is not retried");
  });
});

describe("API keys", () => {
  let server;
  before(async () => {
    server = await startServer(["--api-key", "writer-key-1:write", "--api-key", "reader-key-1:read"]);
  });
  after(() => server?.stop());

  test("a missing key is 401 missing-api-key; an unknown one 401 unknown-api-key", async () => {
    await rejectsWith(new Herenow({ baseUrl: server.baseUrl }).count("lobby"), "missing-api-key", 401);
    await rejectsWith(new Herenow({ baseUrl: server.baseUrl, apiKey: "nope-nope-nope" }).count("lobby"), "unknown-api-key", 401);
  });

  test("a read key reads but a write is 403 insufficient-scope; the write key writes", async () => {
    const reader = new Herenow({ baseUrl: server.baseUrl, apiKey: "reader-key-1" });
    const writer = new Herenow({ baseUrl: server.baseUrl, apiKey: "writer-key-1" });
    const space = unique("keys");
    await rejectsWith(reader.heartbeat(space, "ann"), "insufficient-scope", 403);
    await rejectsWith(reader.eraseUser("ann"), "insufficient-scope", 403);
    assert.equal((await writer.heartbeat(space, "ann")).accepted, 1);
    assert.equal((await reader.count(space)).users, 1);
    assert.equal((await reader.status(space, ["ann"]))[0].status, "online", "the status batch is a read");
    // Operations need no key.
    assert.equal(await new Herenow({ baseUrl: server.baseUrl }).ready(), true);
  });
});

describe("503 with Retry-After", () => {
  let server;
  before(async () => {
    server = await startServer(["--max-event-streams", "1"]);
  });
  after(() => server?.stop());

  test("too-many-streams is a 503 whose Retry-After becomes retryAfter (seconds)", async () => {
    const herenow = new Herenow({ baseUrl: server.baseUrl });
    const first = herenow.events(unique("busy"));
    const it = first[Symbol.asyncIterator]();
    const snapshot = await within(it.next(), 5000, "the first stream's snapshot");
    assert.equal(snapshot.value.type, "snapshot");

    const second = herenow.events(unique("busy"), { maxRetries: 0 });
    const e = await rejectsWith(within(second[Symbol.asyncIterator]().next(), 5000, "the refusal"), "too-many-streams", 503);
    assert.equal(e.retryAfter, 5);
    assert.equal(e.retryable, true);

    // With retries, the stream waits for Retry-After and gets in once the slot is free.
    const retries = [];
    let refused;
    const firstRefusal = new Promise((r) => (refused = r));
    const third = herenow.events(unique("busy"), {
      onRetry: (err, attempt, delay) => {
        retries.push([err.code, attempt, delay]);
        refused();
      },
    });
    const next = third[Symbol.asyncIterator]().next();
    await within(firstRefusal, 5000, "the third stream's first refusal");
    await it.return(); // frees the slot
    const got = await within(next, 15_000, "the third stream after Retry-After");
    assert.equal(got.value.type, "snapshot");
    assert.equal(got.value.resync, false, "the first picture the reader gets replaces nothing");
    assert.equal(retries[0][0], "too-many-streams");
    assert.equal(retries[0][1], 1);
    assert.ok(retries[0][2] >= 5000, `waited ${retries[0][2]} ms, at least Retry-After`);
    third.close();
  });
});

describe("transport failures", () => {
  test("an unreachable server is connection-failed, with no status, retryable", async () => {
    const herenow = new Herenow({ baseUrl: `http://127.0.0.1:${await closedPort()}` });
    const e = await rejectsWith(herenow.count("lobby"), "connection-failed", null);
    assert.equal(e.retryable, true);
    assert.match(e.detail, /ECONNREFUSED/);
    assert.ok(e.cause, "the network error is kept as the cause");
    assert.equal(await herenow.ready(), false);
    assert.equal(await herenow.healthy(), false);
  });

  test("no answer within timeoutMs is request-timeout, for the client or one call", async () => {
    const silent = await fakeServer(() => {}); // never answers
    try {
      const herenow = new Herenow({ baseUrl: silent.url, timeoutMs: 150 });
      const started = Date.now();
      const e = await rejectsWith(herenow.count("lobby"), "request-timeout", null);
      assert.ok(Date.now() - started < 5000);
      assert.equal(e.retryable, true);
      await rejectsWith(new Herenow({ baseUrl: silent.url }).count("lobby", { timeoutMs: 100 }), "request-timeout", null);
    } finally {
      await silent.close();
    }
  });

  test("a body that stalls after the headers times out too", async () => {
    const stall = await fakeServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"users": 1,');
    });
    try {
      await rejectsWith(new Herenow({ baseUrl: stall.url, timeoutMs: 150 }).count("lobby"), "request-timeout", null);
    } finally {
      await stall.close();
    }
  });

  test("the caller's AbortSignal cancels a call with its own reason", async () => {
    const silent = await fakeServer(() => {});
    try {
      const herenow = new Herenow({ baseUrl: silent.url });
      const ac = new AbortController();
      const call = herenow.count("lobby", { signal: ac.signal });
      const reason = new Error("user navigated away");
      ac.abort(reason);
      await assert.rejects(call, (e) => e === reason);
      await assert.rejects(herenow.count("lobby", { signal: AbortSignal.abort("early") }), (e) => e === "early");
    } finally {
      await silent.close();
    }
  });

  test("an error page that is not a problem is unexpected-status, with Retry-After as a date", async () => {
    const when = new Date(Date.now() + 30_000).toUTCString();
    const proxy = await fakeServer((req, res) => {
      res.writeHead(502, { "content-type": "text/html", "retry-after": when });
      res.end("<html><body><h1>502 Bad Gateway</h1></body></html>");
    });
    try {
      const e = await rejectsWith(new Herenow({ baseUrl: proxy.url }).count("lobby"), "unexpected-status", 502);
      assert.ok(e.retryAfter >= 28 && e.retryAfter <= 31, `retryAfter ${e.retryAfter}`);
      assert.equal(e.retryable, true);
      assert.match(e.detail, /502 Bad Gateway/);
      assert.equal(e.problem, null);
    } finally {
      await proxy.close();
    }
  });

  test("a 2xx that is not JSON is bad-response", async () => {
    const odd = await fakeServer((req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("hello");
    });
    try {
      await rejectsWith(new Herenow({ baseUrl: odd.url }).count("lobby"), "bad-response", 200);
    } finally {
      await odd.close();
    }
  });
});

describe("arguments that cannot be sent", () => {
  const herenow = new Herenow({ baseUrl: "http://127.0.0.1:9" });

  test("path segments: empty, dot segments, non-strings are TypeErrors before any request", async () => {
    await assert.rejects(herenow.online(""), TypeError);
    await assert.rejects(herenow.online(".."), /cannot be sent in a URL path/);
    await assert.rejects(herenow.online("."), TypeError);
    await assert.rejects(herenow.eraseUser(".."), TypeError);
    await assert.rejects(herenow.friends(""), TypeError);
    await assert.rejects(herenow.online(42), TypeError);
    await assert.rejects(herenow.member("lobby", ""), TypeError);
    assert.throws(() => herenow.events(".."), TypeError, "a stream throws at once");
  });

  test("members, lists and durations of the wrong type are TypeError / RangeError", async () => {
    await assert.rejects(herenow.heartbeat("lobby", { name: "no id" }), TypeError);
    await assert.rejects(herenow.heartbeats("lobby", "ann"), TypeError);
    await assert.rejects(herenow.status("lobby", [null]), TypeError);
    await assert.rejects(herenow.usersStatus(["ok", 7]), TypeError);
    await assert.rejects(herenow.online("lobby", { window: -1 }), RangeError);
    await assert.rejects(herenow.online("lobby", { window: Number.NaN }), RangeError);
    await assert.rejects(herenow.count("lobby", { window: {} }), TypeError);
    await assert.rejects(herenow.count("lobby", { timeoutMs: 0 }), RangeError);
    await assert.rejects(herenow.setConfig("lobby", null), TypeError);
    assert.throws(() => herenow.watch(null), TypeError);
  });

  test("client options are checked at construction", () => {
    assert.throws(() => new Herenow({ baseUrl: "ftp://example.com" }), TypeError);
    assert.throws(() => new Herenow({ baseUrl: "not a url" }), TypeError);
    assert.throws(() => new Herenow({ baseUrl: "http://h/?q=1" }), TypeError);
    assert.throws(() => new Herenow({ timeoutMs: -5 }), RangeError);
    assert.throws(() => new Herenow({ timeoutMs: Infinity }), RangeError);
    assert.throws(() => new Herenow({ apiKey: "" }), TypeError);
    assert.throws(() => herenow.events("lobby", { idleTimeoutMs: 0 }), RangeError);
    assert.throws(() => herenow.events("lobby", { maxRetries: -1 }), RangeError);
    assert.equal(new Herenow({ baseUrl: "http://h:1/prefix/" }).baseUrl, "http://h:1/prefix");
  });
});

describe("parseRetryAfter", () => {
  test("seconds, HTTP dates, and nonsense", () => {
    assert.equal(parseRetryAfter("5"), 5);
    assert.equal(parseRetryAfter(" 0 "), 0);
    assert.equal(parseRetryAfter(null), null);
    assert.equal(parseRetryAfter(""), null);
    assert.equal(parseRetryAfter("-3"), null);
    assert.equal(parseRetryAfter("soon"), null);
    assert.equal(parseRetryAfter("1.5"), null);
    const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
    assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:28:30 GMT", now), 30);
    assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:27:00 GMT", now), 0, "a date in the past: retry now");
  });
});
