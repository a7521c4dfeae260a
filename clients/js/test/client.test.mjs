// The HTTP API, end to end: every method against a real `herenow serve`.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { readFileSync } from "node:fs";

import { Herenow, HerenowError, VERSION } from "../dist/index.js";
import { recordingFetch, startServer, unique } from "./helpers/server.mjs";

let server;
let herenow;

before(async () => {
  server = await startServer();
  herenow = new Herenow({ baseUrl: server.baseUrl });
});

after(async () => {
  await server?.stop();
});

describe("heartbeats and who's online", () => {
  test("a heartbeat makes the member listed online, with its metadata", async () => {
    const space = unique("lobby");
    const report = await herenow.heartbeat(space, { id: "ada", meta: { name: "Ada Lovelace" } });
    assert.deepEqual(report, { accepted: 1, joined: 1, stale: 0 });

    const page = await herenow.online(space);
    assert.equal(page.next_cursor, null);
    assert.equal(page.window_ms, 600_000);
    assert.equal(page.order, "recent");
    assert.equal(page.members.length, 1);
    const [ada] = page.members;
    assert.equal(ada.id, "ada");
    assert.equal(ada.kind, "user");
    assert.equal(ada.status, "online");
    assert.equal(typeof ada.last_seen_ms, "number");
    assert.deepEqual(ada.meta, { name: "Ada Lovelace" });

    // A second heartbeat is accepted but is no join.
    assert.deepEqual(await herenow.heartbeat(space, "ada"), { accepted: 1, joined: 0, stale: 0 });
  });

  test("a batch mixes users and guests; kind filters and counts tell them apart", async () => {
    const space = unique("lobby");
    const report = await herenow.heartbeats(space, ["grace", { id: "linus" }, { id: "10.0.0.7", kind: "guest" }]);
    assert.deepEqual(report, { accepted: 3, joined: 3, stale: 0 });

    const users = await herenow.online(space, { order: "id" });
    assert.deepEqual(users.members.map((m) => m.id), ["grace", "linus"]);
    assert.equal(users.order, "id");
    const guests = await herenow.online(space, { kind: "guests" });
    assert.deepEqual(guests.members.map((m) => [m.id, m.kind]), [["10.0.0.7", "guest"]]);
    const all = await herenow.online(space, { kind: "all", window: "5m" });
    assert.equal(all.members.length, 3);
    assert.equal(all.window_ms, 300_000);

    assert.deepEqual(await herenow.count(space), { users: 2, guests: 1, total: 3, window_ms: 600_000 });
    // A number is a window in ms.
    assert.equal((await herenow.count(space, { window: 90_000 })).window_ms, 90_000);
  });

  test("an explicit at_ms is recorded, and an older one is stale", async () => {
    const space = unique("import");
    const at = Date.now() - 5_000;
    assert.deepEqual(await herenow.heartbeat(space, { id: "old", at_ms: at }), { accepted: 1, joined: 1, stale: 0 });
    assert.equal((await herenow.member(space, "old")).last_seen_ms, at);
    const report = await herenow.heartbeat(space, { id: "old", at_ms: at - 1_000 });
    assert.equal(report.stale, 1);
    assert.equal((await herenow.member(space, "old")).last_seen_ms, at);
  });

  test("online pages follow next_cursor; onlineAll walks every page once", async () => {
    const space = unique("paged");
    const ids = Array.from({ length: 7 }, (_, i) => `m${i}`);
    await herenow.heartbeats(space, ids);
    const first = await herenow.online(space, { limit: 3, order: "id" });
    assert.deepEqual(first.members.map((m) => m.id), ["m0", "m1", "m2"]);
    assert.equal(typeof first.next_cursor, "string");
    const second = await herenow.online(space, { limit: 3, order: "id", cursor: first.next_cursor });
    assert.deepEqual(second.members.map((m) => m.id), ["m3", "m4", "m5"]);

    const seen = [];
    for await (const m of herenow.onlineAll(space, { limit: 3, order: "id" })) seen.push(m.id);
    assert.deepEqual(seen, ids);
  });

  test("leave takes members offline at once, remembering their last seen", async () => {
    const space = unique("bye");
    await herenow.heartbeats(space, ["ann", "bob"]);
    assert.equal(await herenow.leave(space, ["ann", { id: "nobody" }]), 1);
    assert.equal(await herenow.leave(space, "bob"), 1);
    assert.deepEqual((await herenow.online(space)).members, []);
    const ann = await herenow.member(space, "ann");
    assert.equal(ann.status, "offline");
    assert.equal(typeof ann.last_seen_ms, "number", "a leave remembers the last seen");
  });

  test("onlineAmong answers the online ones of an ad-hoc list, most recent first", async () => {
    const space = unique("among");
    // Explicit times: two calls can land in the same millisecond, and a
    // tie is ordered by id, not by arrival.
    const now = Date.now();
    await herenow.heartbeat(space, { id: "a", at_ms: now - 2000 });
    await herenow.heartbeat(space, { id: "b", at_ms: now - 1000 });
    const online = await herenow.onlineAmong(space, ["a", "b", "c", { id: "a", kind: "guest" }], { window: "10m", limit: 10 });
    assert.deepEqual(online.map((m) => m.id), ["b", "a"]);
    assert.ok(online.every((m) => m.status === "online"));
  });
});

describe("status and last seen", () => {
  test("a member never seen is offline with last_seen_ms null", async () => {
    const m = await herenow.member(unique("empty"), "ghost");
    assert.deepEqual(m, { id: "ghost", kind: "user", status: "offline", last_seen_ms: null });
    const g = await herenow.member(unique("empty"), "ghost", { kind: "guest" });
    assert.equal(g.kind, "guest");
  });

  test("the status batch answers in the order asked, users and guests apart", async () => {
    const space = unique("status");
    await herenow.heartbeats(space, [{ id: "x" }, { id: "y", kind: "guest" }]);
    const members = await herenow.status(space, ["nobody", { id: "y", kind: "guest" }, "x", "y"]);
    assert.deepEqual(
      members.map((m) => [m.id, m.kind, m.status]),
      [
        ["nobody", "user", "offline"],
        ["y", "guest", "online"],
        ["x", "user", "online"],
        ["y", "user", "offline"],
      ],
    );
    // Extra fields of a member object (say, one from an earlier answer) are not sent.
    const again = await herenow.status(space, members);
    assert.equal(again.length, 4);
  });

  test("ids that need escaping in a URL path go through unharmed", async () => {
    const space = unique("escape");
    const ids = ["a/b", "q?x=1#f", "100%", "é 漢字", "..", ".", "%2e%2e", "status"];
    await herenow.heartbeats(space, ids);
    for (const id of ids) {
      const m = await herenow.member(space, id);
      assert.equal(m.id, id);
      assert.equal(m.status, "online", `member ${JSON.stringify(id)}`);
    }
  });

  test("users: last seen anywhere, one or a batch, in the order asked", async () => {
    const alice = unique("alice");
    const space = unique("room");
    await herenow.heartbeat(space, alice);
    const one = await herenow.user(alice);
    assert.equal(one.id, alice);
    assert.equal(one.status, "online");
    assert.equal(one.space, space);
    assert.equal(typeof one.last_seen_ms, "number");

    const never = unique("never");
    const batch = await herenow.usersStatus([never, alice]);
    assert.deepEqual(batch[0], { id: never, status: "offline", last_seen_ms: null, space: null });
    assert.equal(batch[1].id, alice);
    assert.equal(batch[1].status, "online");

    // The user called "status" and the ids "." and ".." are users like any other.
    for (const id of ["status", ".."]) {
      await herenow.heartbeat(space, id);
      assert.equal((await herenow.user(id)).status, "online", id);
    }
  });

  test("erasing a user forgets it everywhere; erasing it again is all zeros", async () => {
    const user = unique("gone");
    const friend = unique("friend");
    await herenow.heartbeat(unique("s1"), user);
    await herenow.heartbeat(unique("s2"), user);
    await herenow.setFriends(user, [friend]);
    await herenow.setFriends(friend, [user]);

    const report = await herenow.eraseUser(user);
    assert.deepEqual(report, { presence: 2, remembered: 0, friend_set: true, listed_by: 1 });
    assert.deepEqual(await herenow.user(user), { id: user, status: "offline", last_seen_ms: null, space: null });
    assert.deepEqual(await herenow.friends(friend), []);
    assert.deepEqual(await herenow.eraseUser(user), { presence: 0, remembered: 0, friend_set: false, listed_by: 0 });
  });
});

describe("friends", () => {
  test("set, add, remove and read a friend set; online friends of a user", async () => {
    const me = unique("me");
    const space = unique("site");
    assert.equal(await herenow.setFriends(me, ["b", "c"]), 2);
    assert.equal(await herenow.addFriends(me, ["d"]), 3);
    assert.equal(await herenow.removeFriends(me, ["b"]), 2);
    assert.deepEqual((await herenow.friends(me)).sort(), ["c", "d"]);

    await herenow.heartbeats(space, ["c", "stranger"]);
    const online = await herenow.onlineFriends(space, me, { window: "10m", limit: 10 });
    assert.deepEqual(online.map((m) => m.id), ["c"]);

    assert.equal(await herenow.setFriends(me, []), 0, "an empty list clears the set");
    assert.deepEqual(await herenow.friends(me), []);
  });
});

describe("spaces, config, history, tokens, operations", () => {
  test("a space's config reads and writes, within the server's bounds", async () => {
    const space = unique("cfg");
    const before = await herenow.config(space);
    assert.deepEqual(before, {
      online_ms: 60_000,
      away_ms: 300_000,
      window_ms: 600_000,
      retention_ms: 900_000,
      remember_ms: 2_592_000_000,
      remember_guests: false,
      grace_ms: 5_000,
      webhooks: [],
    });
    const next = await herenow.setConfig(space, { online_ms: 30_000, away_ms: 120_000, window_ms: 600_000, retention_ms: 900_000 });
    assert.equal(next.online_ms, 30_000);
    assert.equal(next.remember_ms, 2_592_000_000, "absent remember_ms keeps what the space has");
    const guests = await herenow.setConfig(space, { ...next, remember_ms: 0, remember_guests: true });
    assert.equal(guests.remember_ms, 0);
    assert.equal(guests.remember_guests, true);
    assert.equal(guests.grace_ms, 5_000, "absent grace_ms keeps what the space has");
    assert.deepEqual(await herenow.config(space), guests);
    const graceless = await herenow.setConfig(space, { ...guests, grace_ms: 0 });
    assert.equal(graceless.grace_ms, 0);
    await assert.rejects(
      herenow.setConfig(space, { ...guests, grace_ms: 300_001 }),
      (e) => e instanceof HerenowError && e.code === "bad-config" && e.status === 400,
    );

    await assert.rejects(
      herenow.setConfig(space, { online_ms: 200_000, away_ms: 100_000, window_ms: 600_000, retention_ms: 900_000 }),
      (e) => e instanceof HerenowError && e.code === "bad-config" && e.status === 400,
    );
  });

  test("spaces list the spaces holding members, paged by name", async () => {
    const prefix = unique("zz-list");
    const names = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
    for (const n of names) await herenow.heartbeats(n, ["u1", { id: "g1", kind: "guest" }]);
    const page = await herenow.spaces({ after: `${prefix}-a`, limit: 1 });
    assert.deepEqual(page, [{ space: `${prefix}-b`, members: { users: 1, guests: 1 } }]);

    const all = [];
    for await (const s of herenow.spacesAll({ limit: 2 })) all.push(s.space);
    for (const n of names) assert.ok(all.includes(n), `${n} listed`);
    assert.equal(new Set(all).size, all.length, "no space listed twice");
    assert.deepEqual([...all].sort(), all, "by name");
  });

  test("history answers samples at its interval", async () => {
    const h = await herenow.history(unique("hist"), { range: "1h" });
    assert.equal(h.interval_ms, 10_000);
    assert.ok(Array.isArray(h.samples));
    await assert.rejects(herenow.history("x", { range: "48h" }), (e) => e.code === "bad-range" && e.status === 400);
  });

  test("a WebSocket token is minted for a user and its spaces", async () => {
    const t = await herenow.createToken({ user: "ann", spaces: ["room:1", "room:2"], ttl_s: 60, watch: "any" });
    assert.match(t.token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.ok(t.expires_at_ms > Date.now() && t.expires_at_ms <= Date.now() + 61_000);
    const claims = JSON.parse(Buffer.from(t.token.split(".")[1], "base64url").toString());
    assert.equal(claims.sub, "ann");
    assert.deepEqual(claims.spaces, ["room:1", "room:2"]);
    assert.equal(claims.watch, "any");
    await assert.rejects(herenow.createToken({ user: "ann", spaces: ["room"], ttl_s: 0 }), (e) => e.code === "bad-ttl");
    await assert.rejects(herenow.createToken({ user: "ann", spaces: [] }), (e) => e.code === "bad-spaces");
  });

  test("health, readiness, metrics and the OpenAPI document", async () => {
    assert.equal(await herenow.healthy(), true);
    assert.equal(await herenow.ready(), true);
    const metrics = await herenow.metrics();
    assert.match(metrics, /^herenow_heartbeats_total\{store="memory"\} \d+$/m);
    const doc = await herenow.openapi();
    assert.equal(doc.info.title, "herenow");
    assert.ok(doc.paths["/v1/spaces/{space}/heartbeats"]);
  });

  test("the client covers every operation of the OpenAPI document", async () => {
    // Each path and method the server documents, and the client method that calls it.
    const covered = {
      "post /v1/spaces/{space}/heartbeat": "heartbeat",
      "post /v1/spaces/{space}/heartbeats": "heartbeats",
      "post /v1/spaces/{space}/leave": "leave",
      "get /v1/spaces/{space}/members/{id}": "member",
      "post /v1/spaces/{space}/status": "status",
      "get /v1/spaces/{space}/online": "online",
      "get /v1/spaces/{space}/count": "count",
      "post /v1/spaces/{space}/online-among": "onlineAmong",
      "put /v1/friends/{user}": "setFriends",
      "post /v1/friends/{user}/add": "addFriends",
      "post /v1/friends/{user}/remove": "removeFriends",
      "get /v1/friends/{user}": "friends",
      "get /v1/spaces/{space}/friends/{user}/online": "onlineFriends",
      "get /v1/spaces/{space}/config": "config",
      "put /v1/spaces/{space}/config": "setConfig",
      "get /v1/spaces": "spaces",
      "get /v1/spaces/{space}/history": "history",
      "get /v1/users/{id}": "user",
      "post /v1/users/status": "usersStatus",
      "delete /v1/users/{id}": "eraseUser",
      // The user called `status`: the same calls, a path of its own.
      "get /v1/users/status": "user",
      "delete /v1/users/status": "eraseUser",
      "post /v1/tokens": "createToken",
      "get /v1/spaces/{space}/events": "events",
      "post /v1/watch": "watch",
      "get /v1/webhooks": "webhooks",
    };
    const doc = await herenow.openapi();
    const documented = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of ["get", "put", "post", "delete", "patch"]) if (item[method]) documented.push(`${method} ${path}`);
    }
    assert.deepEqual(documented.filter((op) => !(op in covered)), [], "operations without a client method");
    for (const name of Object.values(covered)) assert.equal(typeof herenow[name], "function", name);
  });

  test("one client reuses its connections: requests in a row share sockets", async () => {
    const net = await import("node:net");
    // Count TCP connections the client opens through a tiny counting proxy.
    const target = new URL(server.baseUrl);
    let connections = 0;
    const proxy = net.createServer((c) => {
      connections += 1;
      const up = net.connect(Number(target.port), target.hostname);
      c.pipe(up);
      up.pipe(c);
      c.on("error", () => up.destroy());
      up.on("error", () => c.destroy());
    });
    await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const c = new Herenow({ baseUrl: `http://127.0.0.1:${proxy.address().port}` });
      const space = unique("reuse");
      for (let i = 0; i < 20; i++) await c.heartbeat(space, `u${i}`);
      assert.equal((await c.count(space)).users, 20);
      // undici may open a second socket while the first one's answer is
      // still being released to the pool; never one per call.
      assert.ok(connections >= 1 && connections <= 2, `21 sequential calls used ${connections} connections`);
    } finally {
      proxy.close();
      proxy.unref();
    }
  });

  test("the User-Agent's version is the package's", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    assert.equal(VERSION, pkg.version);
  });

  test("the API key goes in Authorization, with the client's headers", async () => {
    const f = recordingFetch();
    const seen = [];
    const spy = (url, init) => {
      seen.push(init.headers);
      return f(url, init);
    };
    const c = new Herenow({ baseUrl: server.baseUrl, apiKey: "k123", headers: { "x-request-id": "r1" }, fetch: spy });
    await c.count(unique("hdr"));
    assert.equal(seen[0].authorization, "Bearer k123");
    assert.equal(seen[0]["x-request-id"], "r1");
    assert.match(seen[0]["user-agent"], /^herenow-client-js\//);
    assert.equal(f.calls[0].method, "GET");
  });
});
