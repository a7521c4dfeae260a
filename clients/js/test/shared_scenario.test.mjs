// The shared client scenario (clients/SCENARIO.md): the same steps and
// answers as the Python and Go clients' shared_scenario tests.
//
// It runs against a server of its own, so the /metrics deltas of the
// debounce step are the scenario's alone. The middleware runs on an
// injected clock and is flushed by hand: nothing here sleeps for state.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { Herenow, HerenowError, herenowPresence } from "../dist/index.js";
import { closedPort, heartbeatsTotal, startServer } from "./helpers/server.mjs";

const PAGE = "hello from the site";

/** A clock the test moves by hand. */
function clock(start = 1_700_000_000_000) {
  let t = start;
  const now = () => t;
  now.advance = (ms) => {
    t += ms;
  };
  return now;
}

/** A Node HTTP site behind the middleware; the `x-user` header names the user. */
async function site(middleware) {
  const srv = http.createServer((req, res) => {
    middleware(req, res, (err) => {
      res.statusCode = err ? 500 : 200;
      res.end(err ? String(err) : PAGE);
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return {
    async get(user) {
      const res = await fetch(`${base}/`, { headers: { "x-user": user } });
      return { status: res.status, body: await res.text() };
    },
    close() {
      srv.closeAllConnections?.();
      return new Promise((r) => srv.close(r));
    },
  };
}

const userFromHeader = (req) => req.headers["x-user"] ?? null;

/** Asserts `promise` rejects with a HerenowError of this status and code. */
async function rejectsWith(promise, status, code) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof HerenowError, `a HerenowError, not ${e}`);
    assert.equal(e.status, status);
    assert.equal(e.code, code);
    assert.equal(e.problem?.code, code);
    assert.equal(e.retryAfter, null, "a 4xx carries no Retry-After");
    return true;
  });
}

describe("shared scenario", () => {
  let server;
  let hn;
  let P;
  before(async () => {
    server = await startServer();
    hn = new Herenow({ baseUrl: server.baseUrl });
  });
  after(() => server?.stop());

  test("shared_scenario: heartbeats, paging, count, status, friends, leave, erase, typed problems", async () => {
    P = `sc${randomBytes(4).toString("hex")}`;
    const S = `${P}-space`;
    const u = (name) => `${P}-${name}`;
    const [ada, nobody, zed] = [u("ada"), u("nobody"), u("zed")];
    const ms = Array.from({ length: 24 }, (_, i) => u(`m${String(i).padStart(2, "0")}`));
    const guest = { id: "10.0.0.7", kind: "guest" };

    // 1. A single heartbeat.
    assert.deepEqual(await hn.heartbeat(S, { id: ada, meta: { name: "Ada" } }), { accepted: 1, joined: 1, stale: 0 });
    let m = await hn.member(S, ada);
    assert.equal(m.status, "online");
    assert.ok(Number.isInteger(m.last_seen_ms));
    assert.deepEqual(m.meta, { name: "Ada" });

    // 2. Batches.
    assert.deepEqual(await hn.heartbeats(S, [...ms, guest]), { accepted: 25, joined: 25, stale: 0 });
    const again = await hn.heartbeats(S, [ada, ms[0]]);
    assert.equal(again.accepted, 2);
    assert.equal(again.joined, 0);

    // 3. Online, paged to the end: 10 + 10 + 5, every user once, in id order.
    const everyone = [ada, ...ms].sort();
    const pages = [];
    let cursor;
    for (;;) {
      const page = await hn.online(S, { order: "id", limit: 10, ...(cursor ? { cursor } : {}) });
      assert.equal(page.window_ms, 600_000);
      pages.push(page.members.map((x) => x.id));
      if (page.next_cursor === null) break;
      cursor = page.next_cursor;
      assert.ok(pages.length < 10, "paging never ends");
    }
    assert.deepEqual(pages.map((p) => p.length), [10, 10, 5]);
    assert.deepEqual(pages.flat(), everyone);
    const all = [];
    for await (const x of hn.onlineAll(S, { order: "id", limit: 10 })) all.push(x.id);
    assert.deepEqual(all, everyone);

    // 4. Count.
    assert.deepEqual(await hn.count(S), { users: 25, guests: 1, total: 26, window_ms: 600_000 });

    // 5. Status: unknown is not an error; the batch keeps the order asked.
    m = await hn.member(S, nobody);
    assert.equal(m.status, "offline");
    assert.equal(m.last_seen_ms, null);
    const got = await hn.status(S, [{ id: ada }, { id: nobody }, guest]);
    assert.deepEqual(
      got.map((x) => [x.id, x.kind, x.status]),
      [
        [ada, "user", "online"],
        [nobody, "user", "offline"],
        ["10.0.0.7", "guest", "online"],
      ],
    );
    assert.ok(Number.isInteger(got[0].last_seen_ms));
    assert.equal(got[1].last_seen_ms, null);

    // 6. Last seen anywhere.
    const [a, n] = await hn.usersStatus([ada, nobody]);
    assert.equal(a.id, ada);
    assert.equal(a.status, "online");
    assert.equal(a.space, S);
    assert.ok(Number.isInteger(a.last_seen_ms));
    assert.deepEqual(n, { id: nobody, status: "offline", last_seen_ms: null, space: null });

    // 7. Friends and online friends.
    assert.equal(await hn.setFriends(ada, [ms[0], ms[1], zed]), 3);
    assert.equal(await hn.addFriends(ada, [ms[2]]), 4);
    assert.equal(await hn.removeFriends(ada, [ms[1]]), 3);
    assert.deepEqual(new Set(await hn.friends(ada)), new Set([ms[0], ms[2], zed]));
    assert.deepEqual(new Set((await hn.onlineFriends(S, ada)).map((x) => x.id)), new Set([ms[0], ms[2]]));

    // 8. Leave: offline at once, last seen remembered.
    assert.equal(await hn.leave(S, [{ id: ms[0] }, { id: nobody }]), 1);
    m = await hn.member(S, ms[0]);
    assert.equal(m.status, "offline");
    assert.ok(Number.isInteger(m.last_seen_ms));
    assert.equal((await hn.count(S)).users, 24);
    assert.deepEqual((await hn.onlineFriends(S, ada)).map((x) => x.id), [ms[2]]);

    // 9. Erase.
    assert.deepEqual(await hn.eraseUser(ada), { presence: 1, remembered: 0, friend_set: true, listed_by: 0 });
    assert.deepEqual(await hn.user(ada), { id: ada, status: "offline", last_seen_ms: null, space: null });
    assert.deepEqual(await hn.friends(ada), []);

    // 10. The server's 4xx problems are typed errors.
    await rejectsWith(hn.member(S, "x".repeat(300)), 400, "bad-member-id");
    await rejectsWith(hn.online(S, { cursor: "not-a-cursor" }), 400, "bad-cursor");
  });

  test("shared_scenario debounce: 1,000 requests from 10 users are at most 10 heartbeats at the server", async () => {
    const S2 = `${P ?? "sc"}-site-${randomBytes(3).toString("hex")}`;
    const users = Array.from({ length: 10 }, (_, i) => `${S2}-v${i}`);
    const now = clock();
    const lines = [];
    const mw = herenowPresence({
      client: new Herenow({ baseUrl: server.baseUrl }),
      space: S2,
      user: userFromHeader,
      intervalMs: 60_000,
      flushDelayMs: 3_600_000, // sent by flush(), not by a timer
      now,
      logger: { warn: (l) => lines.push(l) },
    });
    const web = await site(mw);
    try {
      const h0 = await heartbeatsTotal(server.baseUrl);
      for (let i = 0; i < 1000; i++) {
        assert.deepEqual(await web.get(users[i % 10]), { status: 200, body: PAGE });
        now.advance(50); // 50 s in all: one interval
      }
      await mw.presence.flush();
      const h1 = await heartbeatsTotal(server.baseUrl);
      assert.ok(h1 - h0 <= 10, `${h1 - h0} heartbeats for 1,000 requests`);
      assert.equal(h1 - h0, 10);
      const online = [];
      for await (const x of hn.onlineAll(S2)) online.push(x.id);
      assert.deepEqual(online.sort(), [...users].sort());

      now.advance(60_000); // the next interval: each user once more
      for (const user of users) assert.equal((await web.get(user)).status, 200);
      await mw.presence.flush();
      assert.equal((await heartbeatsTotal(server.baseUrl)) - h1, 10);
      assert.deepEqual(mw.presence.stats, { sent: 20, failed: 0, dropped: 0, refused: 0, batches: 2, unsent: 0 });
      assert.deepEqual(lines, []);
    } finally {
      await mw.presence.close();
      await web.close();
    }
  });

  test("shared_scenario server down: every request still answers, one log line per interval", async () => {
    const port = await closedPort();
    const now = clock();
    const lines = [];
    const mw = herenowPresence({
      client: new Herenow({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 2000 }),
      space: "site",
      user: userFromHeader,
      intervalMs: 60_000,
      flushDelayMs: 3_600_000,
      now,
      logger: { warn: (l) => lines.push(l) },
    });
    const web = await site(mw);
    try {
      for (let i = 0; i < 20; i++) {
        assert.deepEqual(await web.get(`w${i}`), { status: 200, body: PAGE });
        await mw.presence.flush(); // fails, and does not reject
      }
      assert.equal(lines.length, 1);
      now.advance(60_000);
      assert.deepEqual(await web.get("late"), { status: 200, body: PAGE });
      await mw.presence.flush();
      assert.equal(lines.length, 2);
      assert.equal(mw.presence.stats.failed, 21);
      assert.equal(mw.presence.stats.sent, 0);
    } finally {
      await mw.presence.close();
      await web.close();
    }
  });
});

describe("webhooks state (GET /v1/webhooks)", () => {
  test("a server without webhooks says so; one with an endpoint names it, typed, and never its secret", async (t) => {
    const plain = await startServer();
    try {
      const hn = new Herenow({ baseUrl: plain.baseUrl });
      let state;
      try {
        state = await hn.webhooks();
      } catch (e) {
        if (e instanceof HerenowError && e.status === 404) return t.skip("this herenow binary predates webhooks");
        throw e;
      }
      assert.deepEqual(state, { enabled: false, consumer: null, endpoints: [], outbox: null });
    } finally {
      await plain.stop();
    }

    const receiver = http.createServer((req, res) => {
      req.resume();
      res.statusCode = 204;
      res.end();
    });
    await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
    const hook = `http://127.0.0.1:${receiver.address().port}/hooks`;
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const server = await startServer(["--webhook", `${hook},events=join,leave,spaces=room:*`, "--webhook-secret", secret]);
    try {
      const state = await new Herenow({ baseUrl: server.baseUrl }).webhooks();
      assert.equal(state.enabled, true);
      assert.equal(typeof state.consumer, "string");
      assert.equal(state.endpoints.length, 1);
      const [e] = state.endpoints;
      assert.equal(e.url, hook);
      assert.equal(e.spaces, "room:*");
      assert.deepEqual([...e.events].sort(), ["join", "leave"]);
      assert.ok(["ok", "retrying", "failing"].includes(e.state));
      assert.equal(e.queue.limit, 10_000);
      assert.equal(typeof state.outbox.depth, "number");
      assert.ok(!JSON.stringify(state).includes("MfKQ9r8"), "the secret is never shown");
    } finally {
      await server.stop();
      receiver.closeAllConnections?.();
      await new Promise((r) => receiver.close(r));
    }
  });
});
