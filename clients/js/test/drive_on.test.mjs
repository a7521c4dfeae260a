// Driving on when herenow hangs (issue 36), against a real `herenow serve`
// this file starts, stops with SIGSTOP (a hung server: connections are
// accepted, nothing is answered) and then resumes and stops by pid:
//
// - a page with every query and the middleware adds at most 50 ms (median)
//   over the same page with herenow healthy, from the second request on;
//   the first pays at most one query timeout; unknown renders as nothing;
// - the breaker lets one probe through after its back-off, and closes when
//   herenow answers again; it logs once per outage;
// - close() returns within its deadline, dropping and counting;
// - the sender gathers 100 heartbeats sent over 0.5 s into one POST.
//
// Timings are printed as "measured: …" lines (the test report shows them).

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import { CircuitBreaker, Herenow, Presence, PresenceView, herenowPresence } from "../dist/index.js";
import { heartbeatsTotal, recordingFetch, startServer, unique, within } from "./helpers/server.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function logger() {
  const lines = [];
  return { lines, warn: (m) => lines.push(m) };
}

/**
 * SIGSTOP the server process by its pid, and return once it is stopped.
 *
 * `kill()` returns when the signal is queued, not when it has taken effect:
 * each thread of a busy multi-threaded process stops when it next enters
 * the kernel, so a request sent at once could still be answered by a thread
 * that has not stopped yet. Linux shows each thread's state in
 * /proc/PID/task/TID/stat (the field after the name in parentheses): wait
 * until every one of them is `T` (stopped).
 */
async function hang(server) {
  const pid = server.child.pid;
  process.kill(pid, "SIGSTOP");
  const deadline = performance.now() + 5000;
  while (performance.now() < deadline) {
    let tasks;
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      await sleep(100); // no /proc (not Linux): give it time
      return;
    }
    const stopped = tasks.every((tid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2).startsWith("T");
      } catch {
        return true; // the thread ended
      }
    });
    if (stopped) return;
    await sleep(1);
  }
  throw new Error(`herenow (pid ${pid}) did not stop within 5 s of SIGSTOP`);
}
/** SIGCONT the server process by its pid. */
function resume(server) {
  process.kill(server.child.pid, "SIGCONT");
}

/** Serves `page(req, res)` behind `middleware`; `get()` answers {ms, status, body}. */
async function site(middleware, page) {
  const srv = http.createServer((req, res) => {
    middleware(req, res, () => {
      Promise.resolve(page(req, res)).catch((e) => {
        res.statusCode = 500;
        res.end(String(e));
      });
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return {
    async get(user) {
      const t0 = performance.now();
      const res = await fetch(`${base}/`, { headers: user ? { "x-user": user } : {} });
      const body = await res.text();
      return { ms: performance.now() - t0, status: res.status, body };
    },
    close() {
      srv.closeAllConnections?.();
      return new Promise((r) => srv.close(r));
    },
  };
}

describe("herenow hung (SIGSTOP): pages drive on", () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    if (server) {
      try {
        resume(server);
      } catch {
        // already gone
      }
      await server.stop();
    }
  });

  test("a page with every query adds at most 50 ms (median) from the second request on; the first pays at most one timeout", async () => {
    const client = new Herenow({ baseUrl: server.baseUrl });
    const space = unique("page");
    await client.heartbeats(space, [{ id: "ada", meta: { name: "Ada" } }, "bob", { id: "10.0.0.9", kind: "guest" }]);
    await client.setFriends("ada", ["bob", "cy"]);
    await client.leave(space, ["cy"]).catch(() => 0);

    const log = logger();
    const timeoutMs = 1000;
    // The process's shared breaker for this server (default back-off, 30 s), logging to `log`.
    const view = new PresenceView({ client, timeoutMs, logger: log });
    assert.equal(view.breaker.backoffMs, 30_000);
    const presence = herenowPresence({ client, space, user: (req) => req.headers["x-user"] ?? null, logger: logger() });
    // The page: the middleware, then every query a page may make, one after the other.
    const web = await site(presence, async (req, res) => {
      const box = await view.whosOnline(space);
      const count = await view.count(space);
      const seen = await view.lastSeen(space, "ada");
      const never = await view.lastSeen(space, "nobody");
      const anywhere = await view.lastSeenAnywhere("ada");
      const online = await view.isOnline(space, "bob");
      const friends = await view.onlineFriends(space, "ada");
      const names = box.known ? box.members.map((m) => m.meta?.name ?? m.id).join(",") : "";
      res.end(
        `<p id=box>${box}</p><p id=names>${names}</p><p id=count>${count}</p><p id=seen>${seen}</p><p id=never>${never}</p>` +
          `<p id=anywhere>${anywhere}</p><p id=online>${online}</p><p id=friends>${friends}</p>`,
      );
    });
    try {
      // Healthy: the page shows what herenow says.
      const first = await web.get("ada");
      assert.equal(first.status, 200);
      assert.match(first.body, /<p id=box>2 users and 1 guest online<\/p>/);
      assert.match(first.body, /<p id=seen>online<\/p>/);
      assert.match(first.body, /<p id=never>never seen<\/p>/);
      assert.match(first.body, /<p id=online>online<\/p>/);
      assert.match(first.body, /<p id=friends>1 friend online<\/p>/);
      const healthy = [];
      for (let i = 0; i < 11; i++) healthy.push((await web.get("ada")).ms);
      const healthyP50 = median(healthy);

      await hang(server);
      const firstHung = await web.get("ada");
      assert.equal(firstHung.status, 200);
      const hung = [];
      const bodies = [];
      for (let i = 0; i < 11; i++) {
        const r = await web.get(i % 2 ? "ada" : null);
        assert.equal(r.status, 200);
        hung.push(r.ms);
        bodies.push(r.body);
      }
      const hungP50 = median(hung);
      console.log(
        `measured: page with every query, healthy p50 ${healthyP50.toFixed(1)} ms; herenow hung: first request ${firstHung.ms.toFixed(0)} ms ` +
          `(query timeout ${timeoutMs} ms), then p50 ${hungP50.toFixed(1)} ms (max ${Math.max(...hung).toFixed(1)} ms), ` +
          `overhead p50 ${(hungP50 - healthyP50).toFixed(1)} ms`,
      );
      assert.ok(hungP50 - healthyP50 <= 50, `hung page p50 ${hungP50} ms vs healthy ${healthyP50} ms: more than 50 ms added`);
      assert.ok(firstHung.ms <= timeoutMs + healthyP50 + 250, `the first hung page took ${firstHung.ms} ms: more than one timeout`);

      // Unknown renders as nothing: never "Nobody is online." nor an empty last seen.
      for (const body of [firstHung.body, ...bodies]) {
        assert.equal(
          body,
          "<p id=box></p><p id=names></p><p id=count></p><p id=seen></p><p id=never></p><p id=anywhere></p><p id=online></p><p id=friends></p>",
        );
      }
      const breakerLines = log.lines;
      assert.equal(breakerLines.length, 1, `the breaker says so once, not per call: ${breakerLines.join(" | ")}`);
      assert.match(breakerLines[0], /presence is unknown for 30 s, then one query tries again/);
      assert.match(breakerLines[0], /request-timeout/);
      assert.equal(view.breaker.state, "open");
      assert.equal(view.breaker.stats.opened, 1);
      assert.ok(view.breaker.stats.shortCircuited >= 6 + 11 * 7, "every later query answered at once");
      // Another view of the same server shares the breaker (one per process and server).
      const other = new PresenceView({ client: new Herenow({ baseUrl: server.baseUrl }) });
      assert.equal(other.breaker, view.breaker);
      const t0 = performance.now();
      assert.equal((await other.count(space)).known, false);
      assert.ok(performance.now() - t0 < 50);
    } finally {
      const report = await presence.presence.close();
      assert.ok(report.unsent >= 0);
      await web.close();
      resume(server);
      view.breaker.reset();
    }
  });

  test("after the back-off one probe goes through while the others answer at once; herenow back closes the breaker", async () => {
    const client = new Herenow({ baseUrl: server.baseUrl });
    const space = unique("probe");
    await client.heartbeat(space, "ada");
    const log = logger();
    const breaker = new CircuitBreaker({ backoffMs: 400, logger: log });
    const view = new PresenceView({ client, timeoutMs: 500, breaker, unknownText: "(presence unavailable)" });
    assert.equal(String(await view.isOnline(space, "ada")), "online");

    await hang(server);
    try {
      let t0 = performance.now();
      const a = await view.isOnline(space, "ada");
      const firstMs = performance.now() - t0;
      assert.equal(a.known, false);
      assert.equal(`${a}`, "(presence unavailable)", "the caller's text");
      assert.ok(firstMs >= 450 && firstMs < 1000, `the first call waited its timeout: ${firstMs} ms`);
      t0 = performance.now();
      assert.equal((await view.isOnline(space, "ada")).known, false);
      assert.ok(performance.now() - t0 < 50, "open: at once");

      await sleep(450); // past the back-off: one probe, the others at once meanwhile
      t0 = performance.now();
      const probe = view.isOnline(space, "ada");
      assert.equal(breaker.state, "probing");
      const others = await Promise.all([view.count(space), view.lastSeen(space, "ada")]);
      assert.ok(performance.now() - t0 < 50, "during the probe the others answer at once");
      assert.deepEqual(others.map((o) => o.known), [false, false]);
      assert.equal((await probe).known, false, "the probe timed out");
      assert.equal(breaker.state, "open", "a failed probe opens it for another back-off");
      assert.equal(log.lines.length, 1, "a failed probe says nothing more");
    } finally {
      resume(server);
    }
    await sleep(450);
    const back = await view.lastSeen(space, "ada");
    assert.equal(back.known, true);
    assert.equal(back.status, "online");
    assert.equal(breaker.state, "closed");
    assert.equal(log.lines.length, 2);
    assert.match(log.lines[1], /answers again after \d+ s/);
    assert.equal((await view.count(space)).known, true);
  });

  test("close() returns within its deadline (default 1 s) against a hung herenow, dropping and counting what it could not send", async () => {
    const client = new Herenow({ baseUrl: server.baseUrl }); // the client's own timeout: 10 s
    const space = unique("close");
    const log = logger();
    const presence = new Presence({ client, space, logger: log, flushDelayMs: 60_000 });
    assert.equal(presence.closeTimeoutMs, 1000);
    await hang(server);
    try {
      for (let i = 0; i < 5; i++) presence.seen(space, { id: `a${i}` });
      const inFlight = presence.flush(); // hangs: herenow does not answer
      await sleep(50);
      for (let i = 0; i < 3; i++) presence.seen(space, { id: `b${i}` }); // waits behind it
      assert.equal(presence.waiting, 3);
      const t0 = performance.now();
      const report = await within(presence.close(), 5000, "close()");
      const ms = performance.now() - t0;
      console.log(`measured: close() against a hung herenow: ${ms.toFixed(0)} ms (deadline 1000 ms), ${report.unsent} heartbeats dropped`);
      assert.ok(ms >= 950 && ms <= 1250, `close() took ${ms} ms`);
      assert.deepEqual(report, { sent: 0, unsent: 8, timedOut: true });
      assert.equal(presence.stats.unsent, 8);
      assert.equal(await presence.close(), await presence.close(), "closing again answers the same");
      await within(inFlight, 1000, "the aborted flush");
      assert.equal(presence.waiting, 0);
      assert.equal(presence.seen(space, { id: "late" }), false, "closed: takes nothing more");
      assert.match(log.lines.join("\n"), /close\(\) gave up after 1000 ms: 8 heartbeat\(s\) dropped unsent/);

      // A shorter deadline, per call.
      const quick = new Presence({ client, space, logger: logger(), closeTimeoutMs: 5000 });
      quick.seen(space, { id: "q" });
      const t1 = performance.now();
      const r2 = await quick.close({ timeoutMs: 200 });
      const ms2 = performance.now() - t1;
      assert.ok(ms2 < 450, `close({timeoutMs: 200}) took ${ms2} ms`);
      assert.deepEqual(r2, { sent: 0, unsent: 1, timedOut: true });
    } finally {
      resume(server);
    }
    // Healthy: close() sends what waits and says so.
    const healthy = new Presence({ client, space, logger: logger(), flushDelayMs: 60_000 });
    healthy.seen(space, { id: "c1" });
    healthy.seen(space, { id: "c2" });
    assert.deepEqual(await healthy.close(), { sent: 2, unsent: 0, timedOut: false });
    assert.equal((await client.member(space, "c2")).status, "online");
  });
});

describe("batching as documented", () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(() => server?.stop());

  test("100 heartbeats over 0.5 s are one POST: the sender gathers for flushDelayMs after the first", async () => {
    const f = recordingFetch();
    const client = new Herenow({ baseUrl: server.baseUrl, fetch: f });
    const space = unique("batch");
    const presence = new Presence({ client, space, logger: logger() }); // flushDelayMs: the default, 1 s
    assert.equal(presence.flushDelayMs, 1000);
    const before = await heartbeatsTotal(server.baseUrl);
    const t0 = performance.now();
    for (let i = 0; i < 100; i++) {
      assert.equal(presence.seen(space, { id: `u${i}` }), true);
      const next = t0 + (i + 1) * 5;
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
    }
    const spread = performance.now() - t0;
    const posts = () => f.calls.filter((c) => c.method === "POST" && c.path.endsWith("/heartbeats"));
    // Wait (bounded) for the timer's flush to be sent and answered.
    const deadline = Date.now() + 5000;
    while ((presence.stats.sent < 100 || posts().length === 0) && Date.now() < deadline) await sleep(20);
    const firstPostAt = performance.now() - t0;
    await sleep(200);
    console.log(`measured: 100 heartbeats queued over ${spread.toFixed(0)} ms were ${posts().length} POST(s), sent about ${firstPostAt.toFixed(0)} ms after the first`);
    assert.ok(spread < 1000, `queuing took ${spread} ms, past the flush delay: the machine is too slow for this test`);
    assert.equal(posts().length, 1, "one batch");
    assert.equal(posts()[0].body.heartbeats.length, 100);
    assert.equal(presence.stats.batches, 1);
    assert.equal(await heartbeatsTotal(server.baseUrl), before + 100, "the server recorded 100 heartbeats");
    await presence.close();
  });

  test("a space with batchSize waiting is sent at once", async () => {
    const f = recordingFetch();
    const client = new Herenow({ baseUrl: server.baseUrl, fetch: f });
    const space = unique("size");
    const presence = new Presence({ client, space, logger: logger(), batchSize: 10, flushDelayMs: 60_000 });
    for (let i = 0; i < 10; i++) presence.seen(space, { id: `s${i}` });
    const deadline = Date.now() + 5000;
    while (presence.stats.sent < 10 && Date.now() < deadline) await sleep(10);
    assert.equal(presence.stats.sent, 10);
    assert.equal(f.calls.length, 1);
    assert.throws(() => new Presence({ client, space, batchSize: 0 }), RangeError);
    assert.throws(() => new Presence({ client, space, batchSize: 10_001 }), RangeError);
    await presence.close();
  });
});

describe("circuit breaker, on an injected clock", () => {
  test("opens on a failure, logs once, probes once after the back-off, closes on an answer", () => {
    let t = 0;
    const log = logger();
    const b = new CircuitBreaker({ backoffMs: 30_000, now: () => t, logger: log });
    assert.equal(b.allow(), true);
    b.success();
    assert.deepEqual(log.lines, []);
    b.failure(new Error("boom"));
    assert.equal(b.state, "open");
    for (let i = 0; i < 100; i++) assert.equal(b.allow(), false);
    t = 29_999;
    assert.equal(b.allow(), false);
    t = 30_000;
    assert.equal(b.allow(), true, "the probe");
    assert.equal(b.allow(), false, "only one probe at a time");
    b.failure(new Error("still down"));
    assert.equal(b.allow(), false);
    t = 60_000;
    assert.equal(b.allow(), true);
    b.success();
    assert.equal(b.state, "closed");
    assert.equal(b.allow(), true);
    assert.equal(log.lines.length, 2, log.lines.join("\n"));
    assert.match(log.lines[0], /unknown for 30 s.*boom/);
    assert.match(log.lines[1], /answers again after 60 s/);
    assert.deepEqual(b.stats, { opened: 1, shortCircuited: 103, failures: 2 });
    assert.throws(() => new CircuitBreaker({ backoffMs: -1 }), RangeError);
  });
});
