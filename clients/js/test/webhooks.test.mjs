// Receiving webhooks: Standard Webhooks verification (the specification's
// published test vector, tampering, freshness, malformed and oversized
// headers), the payload's types, deduplication, the Node request handler on
// a real node:http server, and a real delivery from `herenow serve`.

import assert from "node:assert/strict";
import { once } from "node:events";
import http from "node:http";
import { inspect } from "node:util";
import { describe, test } from "node:test";

import {
  Deduplicator,
  Herenow,
  HerenowError,
  WebhookPayloadError as RootPayloadError,
  WebhookVerifier as RootVerifier,
} from "../dist/index.js";
import {
  DEFAULT_TOLERANCE_MS,
  WebhookError,
  WebhookPayloadError,
  WebhookVerificationError,
  WebhookVerifier,
  isMemberEvent,
  parseWebhookBatch,
  signWebhook,
  webhookHandler,
} from "../dist/webhooks.js";
import { startServer, unique } from "./helpers/server.mjs";

// The Standard Webhooks specification's published test vector (the
// reference libraries' tests), as the Python client's tests use it.
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TIMESTAMP = 1614265330;
const PAYLOAD = Buffer.from('{"test": 2432232314}');
const SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const WRONG_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="; // the vector's, one bit off
const OTHER = "whsec_" + Buffer.from("the old secret, 24 bytes").toString("base64");

/** The vector's headers, some replaced. */
function headers(override = {}) {
  return { "webhook-id": MSG_ID, "webhook-timestamp": String(TIMESTAMP), "webhook-signature": SIGNATURE, ...override };
}

/** A verifier whose clock reads `now` (Unix seconds; default the vector's time). */
function verifier(secret = SECRET, { now = TIMESTAMP, ...options } = {}) {
  return new WebhookVerifier(secret, { now: () => now * 1000, ...options });
}

function refused(reason, hdrs, { body = PAYLOAD, secret = SECRET, ...options } = {}) {
  assert.throws(
    () => verifier(secret, options).verify(hdrs, body),
    (e) => {
      assert.ok(e instanceof WebhookVerificationError, String(e));
      assert.ok(e instanceof WebhookError && e instanceof HerenowError);
      assert.equal(e.reason, reason);
      assert.equal(e.code, reason);
      assert.equal(e.status, null);
      return true;
    },
  );
}

describe("verification", () => {
  test("the published vector signs and verifies", () => {
    assert.equal(signWebhook(SECRET, MSG_ID, TIMESTAMP, PAYLOAD), SIGNATURE);
    assert.equal(signWebhook(SECRET, MSG_ID, TIMESTAMP, PAYLOAD.toString()), SIGNATURE);
    const out = verifier().verify(headers(), PAYLOAD);
    assert.ok(Buffer.isBuffer(out));
    assert.deepEqual(out, PAYLOAD);
    // The body as text or an ArrayBuffer; the secret without its prefix or as raw bytes.
    assert.deepEqual(verifier().verify(headers(), PAYLOAD.toString()), PAYLOAD);
    assert.deepEqual(verifier().verify(headers(), new Uint8Array(PAYLOAD).buffer), PAYLOAD);
    assert.deepEqual(verifier(SECRET.slice("whsec_".length)).verify(headers(), PAYLOAD), PAYLOAD);
    const raw = new Uint8Array(Buffer.from(SECRET.slice("whsec_".length), "base64"));
    assert.deepEqual(verifier(raw).verify(headers(), PAYLOAD), PAYLOAD);
    // The same classes at the package's root.
    assert.equal(RootVerifier, WebhookVerifier);
    assert.equal(RootPayloadError, WebhookPayloadError);
  });

  test("the published wrong signature is refused", () => {
    refused("no-matching-signature", headers({ "webhook-signature": WRONG_SIGNATURE }));
  });

  test("a tampered body, id or timestamp is refused, as is another secret", () => {
    refused("no-matching-signature", headers(), { body: '{"test": 2432232315}' });
    refused("no-matching-signature", headers(), { body: Buffer.concat([PAYLOAD, Buffer.from(" ")]) });
    refused("no-matching-signature", headers({ "webhook-id": "msg_other" }));
    // The timestamp is signed: moving it (within the tolerance) breaks it.
    refused("no-matching-signature", headers({ "webhook-timestamp": String(TIMESTAMP + 1) }));
    refused("no-matching-signature", headers(), { secret: "whsec_" + Buffer.from("another secret of 24 byte").toString("base64") });
  });

  test("several signatures, and several secrets while rotating", () => {
    const mixed = [
      "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
      "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
      "v1a,not-ours",
      "garbage",
      "v1,***not base64***",
      SIGNATURE,
    ].join(" ");
    assert.deepEqual(verifier().verify(headers({ "webhook-signature": mixed }), PAYLOAD), PAYLOAD);
    // Only other schemes or broken entries: nothing to match.
    refused("no-matching-signature", headers({ "webhook-signature": "v1a,abc v2,abc junk" }));
    // Only the first 32 entries count.
    const late = `${"v1,AAAA ".repeat(32)}${SIGNATURE}`;
    refused("no-matching-signature", headers({ "webhook-signature": late }));
    // Any one of the receiver's secrets may match.
    assert.deepEqual(verifier([OTHER, SECRET]).verify(headers(), PAYLOAD), PAYLOAD);
    refused("no-matching-signature", headers(), { secret: [OTHER] });
    // Signed under the old secret, verified while rotating to the new one.
    const sig = signWebhook(OTHER, MSG_ID, TIMESTAMP, PAYLOAD);
    assert.deepEqual(verifier([SECRET, OTHER]).verify(headers({ "webhook-signature": sig }), PAYLOAD), PAYLOAD);
    assert.deepEqual(verifier(SECRET).verify(headers({ "webhook-signature": `${sig} ${SIGNATURE}` }), PAYLOAD), PAYLOAD);
  });

  test("headers in any case and shape: objects, arrays, fetch Headers, pairs, Maps", () => {
    const v = verifier();
    const title = { "Webhook-Id": MSG_ID, "Webhook-Timestamp": String(TIMESTAMP), "Webhook-Signature": SIGNATURE };
    assert.deepEqual(v.verify(title, PAYLOAD), PAYLOAD);
    const upper = Object.fromEntries(Object.entries(headers()).map(([k, x]) => [k.toUpperCase(), x]));
    assert.deepEqual(v.verify(upper, PAYLOAD), PAYLOAD);
    // Node's string[] values: one value each, or the signatures split over several lines.
    const arrays = Object.fromEntries(Object.entries(headers()).map(([k, x]) => [k, [x]]));
    assert.deepEqual(v.verify(arrays, PAYLOAD), PAYLOAD);
    assert.deepEqual(v.verify(headers({ "webhook-signature": [WRONG_SIGNATURE, SIGNATURE] }), PAYLOAD), PAYLOAD);
    refused("missing-header", headers({ "webhook-id": [] }));
    // Two differing ids or timestamps are no single one.
    refused("no-matching-signature", headers({ "webhook-id": [MSG_ID, MSG_ID] }));
    refused("bad-header", headers({ "webhook-timestamp": [String(TIMESTAMP), String(TIMESTAMP)] }));
    assert.deepEqual(v.verify(new Headers(upper), PAYLOAD), PAYLOAD);
    assert.deepEqual(v.verify(Object.entries(title), PAYLOAD), PAYLOAD);
    assert.deepEqual(v.verify(new Map(Object.entries(title)), PAYLOAD), PAYLOAD);
    // Surrounding whitespace is no part of a value.
    assert.deepEqual(v.verify(headers({ "webhook-id": ` ${MSG_ID}\t`, "webhook-signature": `  ${SIGNATURE} ` }), PAYLOAD), PAYLOAD);
  });

  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    test(`a missing or empty ${name} is refused`, () => {
      const h = headers();
      delete h[name];
      refused("missing-header", h);
      refused("missing-header", headers({ [name]: "  " }));
      refused("missing-header", headers({ [name]: "" }));
      refused("missing-header", headers({ [name]: undefined }));
      refused("missing-header", new Headers(h));
    });
  }

  test("a timestamp that is not integer Unix seconds is refused", () => {
    for (const stamp of ["hello", "1614265330.0", "-1614265330", "+1614265330", "1e9", "0x60377dF2", "١٦١٤٢٦٥٣٣٠", "9".repeat(13), "1614265330 1"]) {
      refused("bad-header", headers({ "webhook-timestamp": stamp }));
    }
  });

  test("freshness: within the tolerance either way, refused past it", () => {
    assert.deepEqual(verifier(SECRET, { now: TIMESTAMP + 300 }).verify(headers(), PAYLOAD), PAYLOAD);
    assert.deepEqual(verifier(SECRET, { now: TIMESTAMP - 300 }).verify(headers(), PAYLOAD), PAYLOAD);
    refused("timestamp-too-old", headers(), { now: TIMESTAMP + 301 });
    refused("timestamp-too-new", headers(), { now: TIMESTAMP - 301 });
    // A stale request is refused even with a valid signature, and a tolerance of one's own applies.
    refused("timestamp-too-old", headers(), { now: TIMESTAMP + 11, toleranceMs: 10_000 });
    assert.deepEqual(verifier(SECRET, { now: TIMESTAMP + 10, toleranceMs: 10_000 }).verify(headers(), PAYLOAD), PAYLOAD);
    // Freshness comes before the signature: a stale forgery is "too old".
    refused("timestamp-too-old", headers({ "webhook-signature": WRONG_SIGNATURE }), { now: TIMESTAMP + 301 });
    // Without `now`, the clock: the vector (2021) is long stale.
    assert.equal(new WebhookVerifier(SECRET).toleranceMs, DEFAULT_TOLERANCE_MS);
    assert.throws(() => new WebhookVerifier(SECRET).verify(headers(), PAYLOAD), (e) => e.reason === "timestamp-too-old");
  });

  test("oversized headers are refused before any work", () => {
    refused("bad-header", headers({ "webhook-id": "m".repeat(257) }));
    assert.throws(() => verifier().verify(headers({ "webhook-id": "m".repeat(256) }), PAYLOAD), (e) => e.reason === "no-matching-signature");
    // 256 characters of two UTF-16 units each: counted as characters.
    assert.throws(() => verifier().verify(headers({ "webhook-id": "😀".repeat(256) }), PAYLOAD), (e) => e.reason === "no-matching-signature");
    refused("bad-header", headers({ "webhook-id": "😀".repeat(257) }));
    refused("bad-header", headers({ "webhook-signature": `${SIGNATURE} `.repeat(200) }));
    refused("bad-header", headers({ "webhook-signature": new Array(5000).fill(SIGNATURE) }));
    // Before the timestamp is even looked at.
    refused("bad-header", headers({ "webhook-id": "m".repeat(100_000) }), { now: 0 });
  });

  test("an unusable secret is a configuration error, at construction", () => {
    for (const bad of ["whsec_not base64!", "whsec_", "", "   ", "whsec_a", "whsec_abc-_def", new Uint8Array(0), 42, null, {}, []]) {
      assert.throws(() => new WebhookVerifier(bad), TypeError, `secret ${inspect(bad)}`);
    }
    assert.throws(() => new WebhookVerifier([SECRET, "whsec_!"]), TypeError);
    assert.throws(() => new WebhookVerifier(SECRET, { toleranceMs: -1 }), RangeError);
    assert.throws(() => new WebhookVerifier(SECRET, { toleranceMs: Number.NaN }), RangeError);
    // Unpadded base64 and surrounding whitespace are fine.
    assert.deepEqual(verifier(`  ${SECRET}\n`).verify(headers(), PAYLOAD), PAYLOAD);
    // Never shown.
    const v = new WebhookVerifier([SECRET, OTHER]);
    for (const text of [inspect(v, { showHidden: true, depth: 9 }), JSON.stringify(v), String(Object.keys(v))]) {
      assert.ok(!text.includes("MfKQ") && !text.includes("31 f2 90"), text);
    }
  });
});

// docs/API.md's example body.
const API_BODY = {
  type: "presence.events",
  timestamp: "2026-11-22T10:00:00.000Z",
  data: {
    events: [
      {
        id: "8c1f-17",
        type: "join",
        space: "lobby",
        at_ms: 1700000000000,
        member: "ann",
        kind: "user",
        status: "online",
        last_seen_ms: 1700000000000,
        meta: { page: "/" },
      },
      {
        id: "8c1f-18",
        type: "leave",
        space: "lobby",
        at_ms: 1700000090000,
        member: "bob",
        kind: "user",
        status: "offline",
        last_seen_ms: 1700000080000,
        reason: "closed",
        conn: "tab-1",
      },
      { id: "8c1f-19", type: "vacated", space: "lobby", at_ms: 1700000090000 },
    ],
  },
};

let counter = 0;
/** Headers signing `body` (an object is sent as JSON) at `now`, and the raw body. */
function signed(body, now = TIMESTAMP, secret = SECRET) {
  const raw = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
  const msg = `msg_${process.pid}_${++counter}`;
  return [{ "webhook-id": msg, "webhook-timestamp": String(now), "webhook-signature": signWebhook(secret, msg, now, raw) }, raw];
}

describe("the payload", () => {
  test("the documented body parses into typed events", () => {
    const [hdrs, raw] = signed(API_BODY);
    const batch = verifier().receive(hdrs, raw);
    assert.equal(batch.type, "presence.events");
    assert.equal(batch.timestamp, "2026-11-22T10:00:00.000Z");
    assert.equal(batch.webhookId, hdrs["webhook-id"]);
    const [join, leave, vacated] = batch.events;
    assert.equal(batch.events.length, 3);
    const { raw: joinRaw, ...joinFields } = join;
    assert.deepEqual(joinFields, API_BODY.data.events[0]);
    assert.deepEqual(joinRaw, API_BODY.data.events[0]);
    assert.equal(join.reason, undefined);
    assert.ok(isMemberEvent(join));
    const { raw: _r, ...leaveFields } = leave;
    assert.deepEqual(leaveFields, API_BODY.data.events[1]);
    assert.deepEqual([leave.type, leave.status, leave.reason, leave.conn], ["leave", "offline", "closed", "tab-1"]);
    assert.equal(vacated.type, "vacated");
    assert.equal(vacated.space, "lobby");
    assert.ok(!isMemberEvent(vacated));
    assert.deepEqual(Object.keys(vacated).sort(), ["at_ms", "id", "raw", "space", "type"]);
    // parseWebhookBatch alone: no webhookId.
    assert.equal("webhookId" in parseWebhookBatch(JSON.stringify(API_BODY)), false);
  });

  test("a newer server's event type and fields are kept; nulls and a missing timestamp read as absent", () => {
    const body = {
      type: "presence.events",
      data: { events: [{ id: "e1", type: "teleport", space: "s", at_ms: 1, colour: "red", member: null, meta: null, kind: null }] },
      extra: true,
    };
    const { events, timestamp } = parseWebhookBatch(Buffer.from(JSON.stringify(body)));
    assert.equal(timestamp, "");
    const [event] = events;
    assert.equal(event.type, "teleport");
    assert.equal(event.raw.colour, "red");
    assert.equal("colour" in event, false);
    assert.equal("member" in event || "meta" in event || "kind" in event, false);
    // An unknown reason is kept too (reasons are not checked, as in the Python client).
    const [leave] = parseWebhookBatch(JSON.stringify({ type: "presence.events", data: { events: [{ ...API_BODY.data.events[1], reason: "vanished" }] } })).events;
    assert.equal(leave.reason, "vanished");
    assert.deepEqual(parseWebhookBatch('{"type": "presence.events", "timestamp": 5, "data": {"events": []}}'), { type: "presence.events", timestamp: "", events: [] });
  });

  const oneEvent = (event) => `{"type": "presence.events", "data": {"events": [${event}]}}`;
  const notBatches = [
    Buffer.from("not json"),
    Buffer.from([0xff, 0xfe]),
    "[]",
    "null",
    '"presence.events"',
    '{"type": "something.else", "data": {"events": []}}',
    '{"type": "presence.events"}',
    '{"type": "presence.events", "data": []}',
    '{"type": "presence.events", "data": {"events": {}}}',
    '{"type": "presence.events", "data": {"events": [1]}}',
    '{"type": "presence.events", "data": {"events": [null]}}',
    oneEvent('{"type": "join", "space": "s", "at_ms": 1}'), // no id
    oneEvent('{"id": "e", "space": "s", "at_ms": 1}'), // no type
    oneEvent('{"id": "e", "type": "join", "at_ms": 1}'), // no space
    oneEvent('{"id": "e", "type": "join", "space": "s"}'), // no at_ms
    oneEvent('{"id": 7, "type": "join", "space": "s", "at_ms": 1}'),
    oneEvent('{"id": "e", "type": 3, "space": "s", "at_ms": 1}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": true}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": "1"}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1.5}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1, "kind": "robot"}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1, "status": "busy"}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1, "meta": []}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1, "meta": "x"}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1, "member": 5}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1, "last_seen_ms": "now"}'),
    oneEvent('{"id": "e", "type": "leave", "space": "s", "at_ms": 1, "reason": 1}'),
    oneEvent('{"id": "e", "type": "join", "space": "s", "at_ms": 1, "conn": false}'),
  ];
  test("a signed body that is not a batch is a payload error, not a verification error", () => {
    for (const body of notBatches) {
      const what = inspect(String(body));
      assert.throws(() => parseWebhookBatch(body), WebhookPayloadError, what);
      const [hdrs, raw] = signed(Buffer.from(body));
      assert.throws(
        () => verifier().receive(hdrs, raw),
        (e) => e instanceof WebhookPayloadError && !(e instanceof WebhookVerificationError) && e.code === "bad-payload" && e instanceof HerenowError,
        what,
      );
    }
    // A bad signature is checked first: a forged non-batch is a verification error.
    const [hdrs, raw] = signed("not json");
    assert.throws(() => verifier().receive(hdrs, Buffer.concat([raw, Buffer.from(" ")])), WebhookVerificationError);
  });
});

describe("Deduplicator", () => {
  test("bounded, and forgets the oldest first", () => {
    const batch = parseWebhookBatch(JSON.stringify(API_BODY));
    const seen = new Deduplicator({ maxEntries: 3 });
    assert.deepEqual(seen.fresh(batch.events).map((e) => e.id), ["8c1f-17", "8c1f-18", "8c1f-19"]);
    assert.deepEqual(seen.fresh(batch.events), []); // a redelivery
    assert.equal(seen.firstTime("new"), true); // 8c1f-17 is now forgotten…
    assert.equal(seen.size, 3);
    assert.equal(seen.firstTime("8c1f-17"), true); // …and so seen as new again
    assert.equal(seen.firstTime("new"), false);
    assert.equal(seen.size, 3);
    // Seeing an id again makes it the newest: 8c1f-17 and new stay, 8c1f-19 goes.
    assert.equal(seen.firstTime("another"), true);
    assert.equal(seen.firstTime("new"), false);
    assert.equal(seen.firstTime("8c1f-17"), false);
    assert.equal(new Deduplicator().maxEntries, 100_000);
    for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => new Deduplicator({ maxEntries: bad }), RangeError);
    // Many ids, memory stays bounded.
    const big = new Deduplicator({ maxEntries: 1000 });
    for (let i = 0; i < 10_000; i++) big.firstTime(`e${i}`);
    assert.equal(big.size, 1000);
    assert.equal(big.firstTime("e9999"), false);
    assert.equal(big.firstTime("e0"), true);
  });
});

/** A real node:http server running `handler`, and a way to POST to it. */
async function serve(handler) {
  const srv = http.createServer((req, res) => {
    handler(req, res);
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const url = `http://127.0.0.1:${srv.address().port}/hooks/presence`;
  return {
    url,
    async post(hdrs, body, method = "POST") {
      const res = await fetch(url, { method, headers: hdrs, body: method === "GET" ? undefined : body });
      return { status: res.status, text: await res.text(), allow: res.headers.get("allow") };
    },
    close() {
      srv.closeAllConnections?.();
      return new Promise((r) => srv.close(r));
    },
  };
}

/** A raw HTTP/1.1 request with a chunked body (no Content-Length): its answer's status. */
function postChunked(url, hdrs, chunks) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers: { ...hdrs, "transfer-encoding": "chunked" } }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on("error", reject);
    for (const c of chunks) req.write(c);
    req.end();
  });
}

describe("webhookHandler on a node:http server", () => {
  test("answers 204, 401, 400, 405, 413 and 500 as documented", async () => {
    const now = Math.floor(Date.now() / 1000);
    const batches = [];
    const errors = [];
    let fail = null;
    const handler = webhookHandler(
      new WebhookVerifier(SECRET),
      async (batch, req) => {
        if (fail === "throw") throw new Error("the database is down");
        if (fail === "reject") return Promise.reject(new Error("rejected"));
        assert.equal(req.method, "POST");
        batches.push(batch);
      },
      { maxBodyBytes: 4096, onError: (e) => errors.push(e) },
    );
    const site = await serve(handler);
    try {
      // A genuine batch: 204, handled once, typed.
      const [hdrs, raw] = signed(API_BODY, now);
      assert.deepEqual(await site.post(hdrs, raw), { status: 204, text: "", allow: null });
      assert.equal(batches.length, 1);
      assert.equal(batches[0].webhookId, hdrs["webhook-id"]);
      assert.deepEqual(batches[0].events.map((e) => e.type), ["join", "leave", "vacated"]);

      // Chunked, no Content-Length: read the same.
      const [h2, raw2] = signed(API_BODY, now);
      assert.equal(await postChunked(site.url, h2, [raw2.subarray(0, 10), raw2.subarray(10)]), 204);
      assert.equal(batches.length, 2);

      // 401: a forged signature, a stale or missing timestamp; onBatch never called.
      assert.equal((await site.post({ ...hdrs, "webhook-signature": WRONG_SIGNATURE }, raw)).status, 401);
      const stale = signed(API_BODY, now - 301);
      const res = await site.post(...stale);
      assert.deepEqual([res.status, res.text], [401, "timestamp-too-old\n"]);
      const { "webhook-timestamp": _t, ...noStamp } = hdrs;
      assert.equal((await site.post(noStamp, raw)).status, 401);
      assert.equal((await site.post(hdrs, Buffer.concat([raw, Buffer.from(" ")]))).status, 401);
      assert.equal(batches.length, 2);

      // 400: signed, but no batch.
      assert.deepEqual(await site.post(...signed('{"type": "other"}', now)), { status: 400, text: "bad-payload\n", allow: null });

      // 405: not a POST.
      for (const method of ["GET", "PUT"]) {
        const r = await site.post(hdrs, raw, method);
        assert.equal(r.status, 405);
        assert.equal(r.allow, "POST");
      }

      // 413: a body past maxBodyBytes, declared or streamed.
      const big = Buffer.alloc(5000, 0x20);
      assert.equal((await site.post(...signed(big, now))).status, 413);
      assert.equal(await postChunked(site.url, signed(big, now)[0], [big.subarray(0, 3000), big.subarray(3000)]), 413);
      assert.equal(batches.length, 2);

      // 500 when onBatch throws or rejects, so herenow retries; the error is reported.
      fail = "throw";
      assert.equal((await site.post(...signed(API_BODY, now))).status, 500);
      fail = "reject";
      assert.equal((await site.post(...signed(API_BODY, now))).status, 500);
      assert.deepEqual(errors.map((e) => e.message), ["the database is down", "rejected"]);
      fail = null;
      assert.equal((await site.post(...signed(API_BODY, now))).status, 204);
    } finally {
      await site.close();
    }
  });

  test("the default limit is 1 MiB", async () => {
    const now = Math.floor(Date.now() / 1000);
    let handled = 0;
    const site = await serve(webhookHandler(new WebhookVerifier(SECRET), () => void handled++));
    try {
      const events = [];
      // herenow's own bound is 256 KiB: a body of about 300 KiB is fine.
      for (let i = 0; events.length < 1500; i++) events.push({ ...API_BODY.data.events[0], id: `e${i}`, meta: { page: "/".padEnd(100, "x") } });
      const body = JSON.stringify({ ...API_BODY, data: { events } });
      assert.ok(body.length > 256 * 1024 && body.length < 1024 * 1024);
      assert.equal((await site.post(...signed(body, now))).status, 204);
      assert.equal((await site.post(...signed(Buffer.alloc(1024 * 1024 + 1, 0x20), now))).status, 413);
      assert.equal(handled, 1);
    } finally {
      await site.close();
    }
  });

  test("a body already read raw (express.raw) is used; a parsed one is a 500, not a 401", async () => {
    const now = Math.floor(Date.now() / 1000);
    const batches = [];
    const errors = [];
    const handler = webhookHandler(new WebhookVerifier(SECRET), (b) => void batches.push(b), { onError: (e) => errors.push(e) });
    // In front of it, a body parser: raw bytes, a string, or JSON (the wrong one).
    const site = await serve(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const raw = Buffer.concat(chunks);
      const mode = req.headers["x-mode"];
      req.body = mode === "raw" ? raw : mode === "text" ? raw.toString() : JSON.parse(raw.toString());
      await handler(req, res);
    });
    try {
      const [hdrs, raw] = signed(API_BODY, now);
      assert.equal((await site.post({ ...hdrs, "x-mode": "raw" }, raw)).status, 204);
      assert.equal((await site.post({ ...hdrs, "x-mode": "text" }, raw)).status, 204);
      assert.equal(batches.length, 2);
      const r = await site.post({ ...hdrs, "x-mode": "json" }, raw);
      assert.deepEqual([r.status, r.text], [500, "no-raw-body\n"]);
      assert.equal(errors.length, 1);
      assert.ok(errors[0] instanceof TypeError);
    } finally {
      await site.close();
    }
  });

  test("refuses to be made without a verifier or a function", () => {
    assert.throws(() => webhookHandler({ verify() {} }, () => {}), TypeError);
    assert.throws(() => webhookHandler(new WebhookVerifier(SECRET), null), TypeError);
    assert.throws(() => webhookHandler(new WebhookVerifier(SECRET), () => {}, { maxBodyBytes: -1 }), RangeError);
  });
});

describe("a real server's webhooks", () => {
  test("herenow serve --webhook delivers batches that verify and parse", async () => {
    // A receiver: every batch herenow sends, verified by the handler.
    const batches = [];
    let arrived = () => {};
    const errors = [];
    const handler = webhookHandler(
      new WebhookVerifier(SECRET),
      (batch) => {
        batches.push(batch);
        arrived();
      },
      { onError: (e) => errors.push(e) },
    );
    const statuses = [];
    const receiver = await serve(async (req, res) => {
      res.on("finish", () => statuses.push(res.statusCode));
      await handler(req, res);
    });
    const server = await startServer(["--webhook", receiver.url, "--webhook-secret", SECRET]);
    const space = unique("wh");
    const mine = () => batches.flatMap((b) => b.events).filter((e) => e.space === space);
    /** Resolves once `pred()` holds, checked as each batch arrives; fails past `ms`. */
    const until = async (pred, ms, what) => {
      const deadline = Date.now() + ms;
      while (!pred()) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${inspect(mine())}, statuses ${statuses}`);
        let timer;
        await new Promise((resolve) => {
          arrived = resolve;
          timer = setTimeout(resolve, left);
        });
        clearTimeout(timer);
      }
    };
    try {
      const hn = new Herenow({ baseUrl: server.baseUrl });
      await hn.heartbeat(space, { id: "ann", meta: { page: "/" } });
      await until(() => mine().some((e) => e.type === "join"), 20_000, "ann's join");
      await hn.leave(space, ["ann"]);
      const types = ["occupied", "join", "leave", "vacated"];
      await until(() => types.every((t) => mine().some((e) => e.type === t)), 20_000, "occupied, join, leave, vacated");

      const events = mine();
      const join = events.find((e) => e.type === "join");
      const leave = events.find((e) => e.type === "leave");
      assert.deepEqual([join.member, join.kind, join.status, join.meta], ["ann", "user", "online", { page: "/" }]);
      assert.ok(isMemberEvent(join));
      assert.equal(typeof join.last_seen_ms, "number");
      assert.deepEqual([leave.member, leave.status, leave.reason], ["ann", "offline", "explicit"]);
      assert.ok(leave.at_ms >= join.at_ms);
      assert.ok(events.indexOf(join) < events.indexOf(leave)); // ann's events in order
      assert.equal(new Set(events.map((e) => e.id)).size, events.length);
      for (const e of events.filter((x) => x.type === "occupied" || x.type === "vacated")) assert.ok(!isMemberEvent(e));
      for (const b of batches) assert.match(b.webhookId, /^msg_[0-9a-f]{32}$/);
      assert.ok(statuses.length > 0 && statuses.every((s) => s === 204), String(statuses));
      assert.deepEqual(errors, []);

      // The server's own view of the endpoint.
      const state = await hn.webhooks();
      assert.equal(state.enabled, true);
      assert.equal(state.endpoints.length, 1);
      assert.equal(state.endpoints[0].url, receiver.url);
    } finally {
      await server.stop();
      await receiver.close();
    }
  });
});
