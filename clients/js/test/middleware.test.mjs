// The presence middleware, in a real Node HTTP server, sending to a real
// herenow: debounce by an injected clock (no sleeping), batching, guests,
// bounds, and driving on when herenow is down.

import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { Herenow, Presence, herenowPresence, readCookie } from "../dist/index.js";
import * as middlewareEntry from "../dist/middleware.js";
import { closedPort, heartbeatsTotal, recordingFetch, startServer, unique, within } from "./helpers/server.mjs";

/** A clock the test moves by hand. */
function clock(start = 1_700_000_000_000) {
  let t = start;
  const now = () => t;
  now.advance = (ms) => {
    t += ms;
  };
  return now;
}

/** A logger that keeps its lines. */
function logger() {
  const lines = [];
  return { lines, warn: (m) => lines.push(m) };
}

/**
 * A site: a Node HTTP server whose every request goes through the
 * middleware `(req, res, next)` and then answers "ok" (or what `handler`
 * says). The user is named by the `x-user` header.
 */
async function site(middleware, handler = (req, res) => res.end("ok")) {
  const srv = http.createServer((req, res) => {
    middleware(req, res, (err) => {
      if (err) {
        res.statusCode = 500;
        res.end(String(err));
        return;
      }
      handler(req, res);
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return {
    /** GET / as `user` (or anonymously), with optional extra headers. */
    async get(user, headers = {}) {
      const res = await fetch(`${base}/`, { headers: { ...(user ? { "x-user": user } : {}), ...headers } });
      return { status: res.status, body: await res.text(), setCookie: res.headers.get("set-cookie") };
    },
    close() {
      srv.closeAllConnections?.();
      return new Promise((r) => srv.close(r));
    },
  };
}

const userFromHeader = (req) => req.headers["x-user"] ?? null;

/** The heartbeat batches a recording fetch saw. */
const batches = (f) => f.calls.filter((c) => c.method === "POST" && c.path.endsWith("/heartbeats"));

describe("middleware against a real herenow", () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(() => server?.stop());

  test("one heartbeat per member per interval, batched into one request, whatever the request count", async () => {
    const f = recordingFetch();
    const client = new Herenow({ baseUrl: server.baseUrl, fetch: f });
    const now = clock();
    const space = unique("site");
    const log = logger();
    const mw = herenowPresence({ client, space, user: userFromHeader, intervalMs: 60_000, now, logger: log, flushDelayMs: 60_000 });
    const web = await site(mw);
    try {
      const before = await heartbeatsTotal(server.baseUrl);
      for (let i = 0; i < 10; i++) {
        assert.equal((await web.get("ann")).body, "ok");
        assert.equal((await web.get("bob")).body, "ok");
      }
      now.advance(30_000);
      for (let i = 0; i < 5; i++) await web.get("ann");
      await mw.presence.flush();

      assert.equal(batches(f).length, 1, "one request for the lot");
      assert.deepEqual(batches(f)[0].body, { heartbeats: [{ id: "ann" }, { id: "bob" }] });
      assert.equal(batches(f)[0].path, `/v1/spaces/${space}/heartbeats`);
      assert.equal(await heartbeatsTotal(server.baseUrl), before + 2, "the server recorded two heartbeats, not 25");
      const online = await client.online(space, { order: "id" });
      assert.deepEqual(online.members.map((m) => m.id), ["ann", "bob"]);

      // Still within ann's interval (59.999 s after her heartbeat): nothing.
      now.advance(29_999);
      await web.get("ann");
      await mw.presence.flush();
      assert.equal(batches(f).length, 1);

      // The interval has passed: ann again, once.
      now.advance(1);
      await web.get("ann");
      await web.get("ann");
      await mw.presence.flush();
      assert.equal(batches(f).length, 2);
      assert.deepEqual(batches(f)[1].body, { heartbeats: [{ id: "ann" }] });
      assert.equal(await heartbeatsTotal(server.baseUrl), before + 3);
      assert.deepEqual(mw.presence.stats, { sent: 3, failed: 0, dropped: 0, refused: 0, batches: 2, unsent: 0 });
      assert.deepEqual(log.lines, []);
    } finally {
      await mw.presence.close();
      await web.close();
    }
  });

  test("the response does not wait for herenow, even one that never answers", async () => {
    // A herenow that takes heartbeats in and never answers.
    let received;
    const inFlight = new Promise((r) => (received = r));
    const stuck = http.createServer((req) => received(req.url));
    await new Promise((r) => stuck.listen(0, "127.0.0.1", r));
    const client = new Herenow({ baseUrl: `http://127.0.0.1:${stuck.address().port}`, timeoutMs: 30_000 });
    const mw = herenowPresence({ client, space: "site", user: userFromHeader, now: clock(), logger: logger(), flushDelayMs: 0 });
    const web = await site(mw);
    try {
      assert.equal((await web.get("u1")).body, "ok");
      // The heartbeat is now in flight, unanswered...
      assert.equal(await within(inFlight, 5000, "the heartbeat request"), "/v1/spaces/site/heartbeats");
      // ...and requests are answered all the same.
      for (let i = 2; i <= 5; i++) assert.equal((await web.get(`u${i}`)).body, "ok");
      assert.equal(mw.presence.stats.sent, 0, "no heartbeat has been answered");
      assert.ok(mw.presence.waiting >= 1, "the later heartbeats wait for the one in flight, not in a queue of requests");
    } finally {
      // herenow goes away: the flush in flight fails, the rest is refused, close() returns.
      stuck.close();
      stuck.closeAllConnections?.();
      await within(mw.presence.close(), 10_000, "close");
      await web.close();
    }
  });

  test("guests by cookie: the first visit sets one, later visits reuse it", async () => {
    const f = recordingFetch();
    const client = new Herenow({ baseUrl: server.baseUrl, fetch: f });
    const space = unique("guests");
    const mw = herenowPresence({ client, space, user: userFromHeader, guest: "cookie", now: clock(), logger: logger(), cookie: { maxAgeS: 1800 } });
    const web = await site(mw, (req, res) => {
      res.setHeader("set-cookie", [...[].concat(res.getHeader("set-cookie") ?? []), "theme=dark"]);
      res.end("ok");
    });
    try {
      const first = await web.get(null);
      assert.equal(first.status, 200);
      assert.match(first.setCookie, /herenow_guest=[\w-]{22}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=1800/);
      assert.match(first.setCookie, /theme=dark/, "the site's own cookies are kept");
      const id = readCookie(first.setCookie.split(",")[0], "herenow_guest");

      const second = await web.get(null, { cookie: `a=1; herenow_guest=${id}; b=2` });
      assert.doesNotMatch(second.setCookie ?? "", /herenow_guest/, "a known guest gets no new cookie");
      // A signed-in user is a user, not the guest of its cookie.
      await web.get("carol", { cookie: `herenow_guest=${id}` });
      // A forged cookie value is not trusted as an id: a fresh one is set.
      const forged = await web.get(null, { cookie: "herenow_guest=x" });
      assert.match(forged.setCookie, /herenow_guest=[\w-]{22};/);

      await mw.presence.flush();
      const sent = batches(f).flatMap((b) => b.body.heartbeats);
      assert.deepEqual(sent.filter((h) => h.id === id), [{ id, kind: "guest" }], "the guest once");
      assert.ok(sent.some((h) => h.id === "carol" && h.kind === undefined));
      const guests = await client.online(space, { kind: "guests" });
      assert.ok(guests.members.some((m) => m.id === id && m.kind === "guest"));
    } finally {
      await mw.presence.close();
      await web.close();
    }
  });

  test("two anonymous browsers behind one address: one guest by IP (the default), two with guest: \"cookie\"", async () => {
    const client = new Herenow({ baseUrl: server.baseUrl });
    const byIp = unique("by-ip");
    const byCookie = unique("by-cookie");
    const ipMw = herenowPresence({ client, space: byIp, user: userFromHeader, now: clock(), logger: logger() });
    const cookieMw = herenowPresence({ client, space: byCookie, user: userFromHeader, guest: "cookie", now: clock(), logger: logger() });
    const ipSite = await site(ipMw);
    const cookieSite = await site(cookieMw);
    try {
      // Two browsers, both from 127.0.0.1, each sending back the cookie it was given.
      const a = await ipSite.get(null);
      const b = await ipSite.get(null);
      assert.equal(a.setCookie, null, "by IP: no cookie is set");
      assert.equal(b.setCookie, null);
      const jar = [];
      for (let browser = 0; browser < 2; browser++) {
        const first = await cookieSite.get(null);
        const set = first.setCookie;
        // The cookie's attributes: random id (128 bits, base64url), HttpOnly, SameSite=Lax, no Secure over http.
        assert.match(set, /^herenow_guest=[A-Za-z0-9_-]{22}; Path=\/; HttpOnly; SameSite=Lax$/);
        const id = readCookie(set.split(";")[0], "herenow_guest");
        jar.push(id);
        const again = await cookieSite.get(null, { cookie: `herenow_guest=${id}` });
        assert.equal(again.setCookie, null, "a browser with its cookie keeps its id");
      }
      assert.notEqual(jar[0], jar[1]);
      await ipMw.presence.flush();
      await cookieMw.presence.flush();
      assert.equal((await client.count(byIp)).guests, 1, "by IP: one guest");
      assert.equal((await client.count(byCookie)).guests, 2, "by cookie: two guests");
      const guests = await client.online(byCookie, { kind: "guests", order: "id" });
      assert.deepEqual(guests.members.map((m) => m.id), [...jar].sort());
      // Over HTTPS (Express's req.secure) the cookie is Secure too.
      const res = { headers: {}, getHeader: (n) => res.headers[n], setHeader: (n, v) => (res.headers[n] = v) };
      const p = new Presence({ client, space: byCookie, guest: "cookie", now: clock(), logger: logger(), flushDelayMs: 60_000 });
      p.middleware()({ headers: {}, secure: true }, res, () => {});
      assert.match(res.headers["set-cookie"][0], /; HttpOnly; SameSite=Lax; Secure$/);
      await p.close();
    } finally {
      await ipMw.presence.close();
      await cookieMw.presence.close();
      await ipSite.close();
      await cookieSite.close();
    }
  });

  test("guests by IP address, metadata from the user function, requests to skip", async () => {
    const client = new Herenow({ baseUrl: server.baseUrl });
    const space = unique("ip");
    const mw = herenowPresence({
      client,
      space,
      guest: "ip",
      user: (req) => {
        const u = req.headers["x-user"];
        if (u === "42") return 42; // a numeric id from a database
        return u ? { id: u, meta: { plan: "pro" } } : null;
      },
      skip: (req) => req.headers["x-health"] === "1",
      now: clock(),
      logger: logger(),
    });
    const web = await site(mw);
    try {
      await web.get(null);
      await web.get("dora");
      await web.get("skipped", { "x-health": "1" });
      await web.get("42");
      await mw.presence.flush();
      const all = await client.online(space, { kind: "all", order: "id" });
      assert.deepEqual(all.members.map((m) => [m.id, m.kind]), [["127.0.0.1", "guest"], ["42", "user"], ["dora", "user"]]);
      assert.deepEqual((await client.member(space, "dora")).meta, { plan: "pro" });
    } finally {
      await mw.presence.close();
      await web.close();
    }
  });

  test("an async user function, and a space per request", async () => {
    const client = new Herenow({ baseUrl: server.baseUrl });
    const a = unique("room-a");
    const b = unique("room-b");
    const mw = herenowPresence({
      client,
      space: (req) => (req.headers["x-room"] === "b" ? b : a),
      user: async (req) => req.headers["x-user"],
      now: clock(),
      logger: logger(),
    });
    const web = await site(mw);
    try {
      await web.get("eli", { "x-room": "a" });
      await web.get("eli", { "x-room": "b" });
      await within(new Promise((r) => setImmediate(r)), 1000, "the user promise");
      await mw.presence.flush();
      assert.equal((await client.member(a, "eli")).status, "online");
      assert.equal((await client.member(b, "eli")).status, "online", "the debounce is per space");
    } finally {
      await mw.presence.close();
      await web.close();
    }
  });

  test("bad ids, bad metadata and a throwing user function never fail a request, nor poison the batch", async () => {
    const f = recordingFetch();
    const client = new Herenow({ baseUrl: server.baseUrl, fetch: f });
    const space = unique("bad");
    const log = logger();
    const now = clock();
    const mw = herenowPresence({
      client,
      space,
      user: (req) => {
        const u = req.headers["x-user"];
        if (u === "throw") throw new Error("session store down");
        if (u === "long") return "x".repeat(300);
        if (u === "fat") return { id: "fat", meta: { blob: "y".repeat(2000) } };
        return u;
      },
      now,
      logger: log,
    });
    const web = await site(mw);
    try {
      for (const u of ["throw", "long", "fat", "good"]) assert.equal((await web.get(u)).body, "ok", u);
      await mw.presence.flush();
      assert.deepEqual(batches(f).map((b) => b.body), [{ heartbeats: [{ id: "good" }] }]);
      assert.equal(mw.presence.stats.refused, 3);
      assert.equal(log.lines.length, 1, "one line for three problems within the interval");
      assert.match(log.lines[0], /session store down/);

      now.advance(60_000);
      await web.get("long");
      assert.equal(log.lines.length, 2);
      assert.match(log.lines[1], /256/);
      assert.match(log.lines[1], /2 more problem\(s\) since the last line/);
    } finally {
      await mw.presence.close();
      await web.close();
    }
  });
});

describe("middleware when herenow is down", () => {
  test("requests still succeed; one log line per interval; members are retried when it returns", async () => {
    const port = await closedPort();
    const f = recordingFetch();
    const client = new Herenow({ baseUrl: `http://127.0.0.1:${port}`, fetch: f, timeoutMs: 2000 });
    const now = clock();
    const log = logger();
    const mw = herenowPresence({ client, space: "site", user: userFromHeader, now, logger: log, intervalMs: 60_000 });
    const web = await site(mw);
    try {
      for (let round = 0; round < 3; round++) {
        for (const u of ["ann", "bob", "cy"]) {
          const res = await web.get(u);
          assert.equal(res.status, 200);
          assert.equal(res.body, "ok");
        }
        await mw.presence.flush();
        now.advance(10_000);
      }
      assert.equal(batches(f).length, 3, "each flush tried once: the failed members were queued again");
      assert.equal(mw.presence.stats.failed, 9);
      assert.equal(log.lines.length, 1, "one line within the interval, however many failures");
      assert.match(log.lines[0], /3 heartbeat\(s\) for space site were not sent: connection-failed/);
      assert.match(log.lines[0], /requests go on/);

      now.advance(30_000); // 60 s after the first line
      await web.get("ann");
      await mw.presence.flush();
      assert.equal(log.lines.length, 2, "a second line once the interval has passed");
      assert.match(log.lines[1], /2 more problem\(s\) since the last line/);
    } finally {
      await mw.presence.close();
      await web.close();
    }

    // herenow comes back on that port: the members that failed are sent at their next request.
    const server = await startServer([], { port });
    try {
      const mw2 = mw.presence; // closed: takes nothing more
      assert.equal(mw2.seen("site", { id: "late" }), false);
      const again = herenowPresence({ client, space: "site", user: userFromHeader, now, logger: log });
      const web2 = await site(again);
      try {
        await web2.get("ann");
        await again.presence.flush();
        assert.equal((await client.member("site", "ann")).status, "online");
        assert.equal(log.lines.length, 2, "nothing more to say");
      } finally {
        await again.presence.close();
        await web2.close();
      }
    } finally {
      await server.stop();
    }
  });

  test("a refusal (4xx) is logged the same way, and the request goes on", async () => {
    const server = await startServer(["--api-key", "writer-key-1:write"]);
    try {
      const log = logger();
      const client = new Herenow({ baseUrl: server.baseUrl }); // no key: 401
      const mw = herenowPresence({ client, space: "site", user: userFromHeader, now: clock(), logger: log });
      const web = await site(mw);
      try {
        assert.equal((await web.get("ann")).body, "ok");
        await mw.presence.flush();
        assert.equal(log.lines.length, 1);
        assert.match(log.lines[0], /401 missing-api-key/);
      } finally {
        await mw.presence.close();
        await web.close();
      }
    } finally {
      await server.stop();
    }
  });
});

describe("bounds", () => {
  const offline = new Herenow({ baseUrl: "http://127.0.0.1:9" });

  test("the debounce map holds at most maxMembers, forgetting the member sent longest ago", () => {
    const now = clock();
    const p = new Presence({ client: offline, space: "s", maxMembers: 3, maxPending: 100, now, logger: logger(), flushDelayMs: 3_600_000 });
    for (const id of ["a", "b", "c", "d"]) assert.equal(p.seen("s", { id }), true);
    assert.equal(p.tracked, 3);
    assert.equal(p.seen("s", { id: "d" }), false, "d is remembered");
    assert.equal(p.seen("s", { id: "b" }), false, "b is remembered");
    assert.equal(p.seen("s", { id: "a" }), true, "a was forgotten: heartbeated again");
    assert.equal(p.tracked, 3);
  });

  test("at most maxPending wait; more are dropped, counted, and retried at their next request", () => {
    const now = clock();
    const log = logger();
    const p = new Presence({ client: offline, space: "s", maxPending: 2, now, logger: log, flushDelayMs: 3_600_000 });
    assert.equal(p.seen("s", { id: "a" }), true);
    assert.equal(p.seen("s", { id: "b" }), true);
    assert.equal(p.seen("s", { id: "c" }), false);
    assert.equal(p.waiting, 2);
    assert.equal(p.stats.dropped, 1);
    assert.equal(log.lines.length, 1);
    assert.match(log.lines[0], /dropped/);
    assert.equal(p.tracked, 2, "a dropped member is not remembered, so its next request tries again");
  });

  test("a clock that goes back does not silence a member", () => {
    const now = clock();
    const p = new Presence({ client: offline, space: "s", now, logger: logger(), flushDelayMs: 3_600_000 });
    assert.equal(p.seen("s", { id: "a" }), true);
    now.advance(-5_000);
    assert.equal(p.seen("s", { id: "a" }), true);
  });

  test("options are checked", () => {
    assert.throws(() => new Presence({ space: "s" }), TypeError);
    assert.throws(() => new Presence({ client: offline, space: "bad space" }), TypeError);
    assert.throws(() => new Presence({ client: offline }), TypeError);
    assert.throws(() => new Presence({ client: offline, space: "s", intervalMs: -1 }), RangeError);
    assert.throws(() => new Presence({ client: offline, space: "s", guest: "mac" }), TypeError);
    assert.throws(() => new Presence({ client: offline, space: "s", cookie: { name: "bad name" } }), TypeError);
  });

  test("the middleware is also its own entry point, herenow-client/middleware", () => {
    assert.equal(middlewareEntry.herenowPresence, herenowPresence);
    assert.equal(middlewareEntry.Presence, Presence);
  });
});
