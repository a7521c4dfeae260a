/**
 * The core of `herenow-client/webhooks` (see webhooks.ts): verifying a
 * request's Standard Webhooks signature, reading its body as a typed batch,
 * and a bounded memory of event ids. No HTTP here.
 *
 * @module
 */

import { createHmac, timingSafeEqual } from "node:crypto";
import { inspect } from "node:util";

import { HerenowError } from "./errors.js";
import type { Kind, Meta, PresenceStatus, WebhookEvent as WebhookEventName } from "./types.js";

/** Default `toleranceMs`: how far a `webhook-timestamp` may be from now, either way. */
export const DEFAULT_TOLERANCE_MS = 5 * 60 * 1000;
/** How a Standard Webhooks secret is written. */
export const SECRET_PREFIX = "whsec_";
/** The body's `type`. */
export const WEBHOOK_BODY_TYPE = "presence.events";

// Bounds on what a request may make us parse: far above what herenow sends
// (one signature, a 36-byte id, a 10-digit timestamp), far below what would
// cost anything. The same as the Python client's.
const MAX_ID = 256;
const MAX_TIMESTAMP_DIGITS = 12;
const MAX_SIGNATURE_HEADER = 8 * 1024;
const MAX_SIGNATURES = 32;

// ---- errors -------------------------------------------------------------------

/** Why a request is not a genuine, fresh herenow webhook. */
export type WebhookVerificationReason = "missing-header" | "bad-header" | "timestamp-too-old" | "timestamp-too-new" | "no-matching-signature";

/** Base of the webhook receiver's errors (a {@link HerenowError} with `status: null`). */
export class WebhookError extends HerenowError {
  constructor(code: string, detail: string) {
    super({ code, status: null, detail });
    this.name = "WebhookError";
  }
}

/** The request is not a genuine, fresh herenow webhook: answer `401`, ignore its body. `reason` (also `code`) says why. */
export class WebhookVerificationError extends WebhookError {
  readonly reason: WebhookVerificationReason;
  constructor(reason: WebhookVerificationReason, detail: string) {
    super(reason, detail);
    this.name = "WebhookVerificationError";
    this.reason = reason;
  }
}

/** A correctly signed body that is not a `presence.events` batch (a newer server's, or a sender sharing the secret); `code` `bad-payload`. */
export class WebhookPayloadError extends WebhookError {
  constructor(detail: string) {
    super("bad-payload", detail);
    this.name = "WebhookPayloadError";
  }
}

// ---- the payload's types -----------------------------------------------------------

/** What happened: a member's `join` … `update`, or a space's `occupied` / `vacated`. */
export type WebhookEventType = WebhookEventName;

/** Why a member left: the Server-Sent Events' reasons, and `closed` (its last live connection closed). */
export type WebhookLeaveReason = "explicit" | "closed" | "timeout" | "expired";

/**
 * One event of a batch. Member events (`join`, `leave`, `away`, `back`,
 * `update`) carry `member`, `kind`, `status` (after the event),
 * `last_seen_ms`, `meta` when the member has some, `conn` when a live
 * connection caused it and, on `leave`, `reason`; `occupied` and `vacated`
 * have none. A newer server's event type is kept as its string; fields
 * absent (or `null`) in the body are absent here.
 */
export interface WebhookEvent {
  /** Unique; the same on every redelivery: deduplicate by it. */
  id: string;
  type: WebhookEventType | (string & {});
  space: string;
  /** When it happened, ms since the UNIX epoch. */
  at_ms: number;
  member?: string;
  kind?: Kind;
  status?: PresenceStatus;
  last_seen_ms?: number;
  meta?: Meta;
  conn?: string;
  reason?: WebhookLeaveReason | (string & {});
  /** The event as sent, fields this client does not know included. */
  raw: Record<string, unknown>;
}

/** {@link WebhookEvent}'s name at the package's root, where `WebhookEvent` names the event types an endpoint may want. */
export type WebhookBatchEvent = WebhookEvent;

/** One webhook request's body: up to 100 events, each member's in order. */
export interface WebhookBatch {
  /** Always `presence.events`. */
  type: typeof WEBHOOK_BODY_TYPE;
  /** When the batch was made (RFC 3339), `""` when absent. */
  timestamp: string;
  events: WebhookEvent[];
  /** The `webhook-id` header, when known: the same on every retry of this batch. */
  webhookId?: string;
}

const KINDS: ReadonlySet<string> = new Set(["user", "guest"]);
const STATUSES: ReadonlySet<string> = new Set(["online", "away", "offline"]);

/** Whether `event` is a member's (it names a `member`), not a space's. */
export function isMemberEvent(event: WebhookEvent): event is WebhookEvent & { member: string } {
  return event.member !== undefined;
}

// ---- secrets and signatures ------------------------------------------------------

/** A webhook secret: `whsec_` and base64 (the prefix may be left out), or the key's raw bytes. */
export type WebhookSecret = string | Uint8Array;

/** The request's body, exactly as received. */
export type WebhookBody = Uint8Array | ArrayBuffer | string;

/**
 * A request's headers, names in any case: Node's `req.headers` (a value may
 * be a `string[]`; its items count as one space-separated value), a fetch
 * `Headers`, or a list of `[name, value]` pairs.
 */
export type WebhookHeaders =
  | { get(name: string): string | null | undefined }
  | Iterable<readonly [string, string]>
  | { readonly [name: string]: string | readonly string[] | number | undefined | null };

/** Standard base64 (no URL alphabet), padding optional when `pad`; `null` when not base64. */
function base64(text: string, pad: boolean): Buffer | null {
  const padded = pad ? text + "=".repeat((4 - (text.length % 4)) % 4) : text;
  if (padded.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(padded)) return null;
  return Buffer.from(padded, "base64");
}

function secretKey(secret: unknown): Buffer {
  let key: Buffer | null;
  if (secret instanceof Uint8Array) {
    key = Buffer.from(secret);
  } else if (typeof secret === "string") {
    let text = secret.trim();
    if (text.startsWith(SECRET_PREFIX)) text = text.slice(SECRET_PREFIX.length);
    key = base64(text, true);
    if (key === null) throw new TypeError("herenow: a webhook secret is whsec_ and base64; what follows whsec_ is not base64");
  } else {
    throw new TypeError(`herenow: a webhook secret is a string or a Uint8Array, not ${secret === null ? "null" : typeof secret}`);
  }
  if (key.length === 0) throw new TypeError("herenow: the webhook secret is empty");
  return key;
}

/** @internal The body's bytes (shared with the HTTP handler; not exported by the package). */
export function bytesOf(body: WebhookBody): Buffer {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  throw new TypeError("herenow: a webhook body is a Uint8Array, an ArrayBuffer or a string (the raw body, before any JSON parsing)");
}

function digest(key: Buffer, msgId: string, timestamp: string, body: Buffer): Buffer {
  return createHmac("sha256", key).update(`${msgId}.${timestamp}.`, "utf8").update(body).digest();
}

/**
 * The `webhook-signature` value herenow would send, `v1,<base64>`: for
 * tests of a receiver. `timestamp` in Unix seconds.
 */
export function signWebhook(secret: WebhookSecret, msgId: string, timestamp: number, body: WebhookBody): string {
  return `v1,${digest(secretKey(secret), msgId, String(Math.trunc(timestamp)), bytesOf(body)).toString("base64")}`;
}

// ---- headers ---------------------------------------------------------------------

/** Whether `s` has more than `max` code points (as Python counts a str's length). */
function longer(s: string, max: number): boolean {
  if (s.length <= max) return false;
  if (s.length > 2 * max) return true;
  let n = 0;
  for (const _ of s) if (++n > max) return true;
  return false;
}

function headerValue(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (Array.isArray(value)) {
    let length = 0;
    for (const v of value) {
      length += String(v).length + 1;
      if (length > 2 * MAX_SIGNATURE_HEADER) throw new WebhookVerificationError("bad-header", "a webhook header is too long");
    }
    return value.length === 0 ? null : value.map(String).join(" ");
  }
  return String(value);
}

function header(headers: WebhookHeaders, name: string): string | null {
  if (headers === null || typeof headers !== "object") {
    throw new TypeError("herenow: webhook headers are an object (req.headers), a Headers or a list of [name, value]");
  }
  const h = headers as Record<string | symbol, unknown>;
  if (typeof h["get"] === "function") {
    const v = headerValue((h["get"] as (n: string) => unknown).call(headers, name));
    if (v !== null || typeof h[Symbol.iterator] !== "function") return v;
  }
  if (typeof h[Symbol.iterator] === "function") {
    for (const pair of headers as Iterable<readonly [unknown, unknown]>) {
      if (Array.isArray(pair) && typeof pair[0] === "string" && pair[0].toLowerCase() === name) return headerValue(pair[1]);
    }
    return null;
  }
  if (Object.prototype.hasOwnProperty.call(h, name)) return headerValue(h[name]);
  for (const k of Object.keys(h)) if (k.toLowerCase() === name) return headerValue(h[k]);
  return null;
}

function required(headers: WebhookHeaders, name: string): string {
  const value = header(headers, name)?.trim();
  if (!value) throw new WebhookVerificationError("missing-header", `no ${name} header`);
  return value;
}

// ---- verification ------------------------------------------------------------------

/** Options of a {@link WebhookVerifier}. */
export interface WebhookVerifierOptions {
  /** How far the `webhook-timestamp` may be from now, either way, in ms (default 5 minutes). */
  toleranceMs?: number;
  /** The clock, in ms since the UNIX epoch: inject one in tests (default `Date.now`). */
  now?: () => number;
}

/**
 * Verifies herenow's webhook requests under an endpoint's secret, or several
 * while rotating it (any one may match).
 *
 * ```ts
 * const verifier = new WebhookVerifier(process.env.HERENOW_WEBHOOK_SECRET!);
 * const batch = verifier.receive(req.headers, rawBody); // throws WebhookError
 * ```
 */
export class WebhookVerifier {
  readonly toleranceMs: number;
  readonly #keys: readonly Buffer[];
  readonly #now: () => number;

  /** @throws TypeError when a secret is unusable (a configuration error), RangeError for a bad tolerance. */
  constructor(secrets: WebhookSecret | readonly WebhookSecret[], options: WebhookVerifierOptions = {}) {
    const list: unknown[] = Array.isArray(secrets) ? secrets : [secrets];
    if (list.length === 0) throw new TypeError("herenow: no webhook secret given");
    this.#keys = list.map(secretKey);
    const tolerance = options.toleranceMs ?? DEFAULT_TOLERANCE_MS;
    if (typeof tolerance !== "number" || !Number.isFinite(tolerance) || tolerance < 0) {
      throw new RangeError(`herenow: toleranceMs must be a non-negative finite number, got ${String(tolerance)}`);
    }
    this.toleranceMs = tolerance;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Checks a request's signature and answers its body's bytes, exactly as
   * signed. `body` is the raw body, before any JSON parsing.
   *
   * @throws WebhookVerificationError a header missing or malformed, a
   *   timestamp out of tolerance, or no `v1` signature matching.
   */
  verify(headers: WebhookHeaders, body: WebhookBody): Buffer {
    const data = bytesOf(body);
    const msgId = required(headers, "webhook-id");
    const stamp = required(headers, "webhook-timestamp");
    const signatures = required(headers, "webhook-signature");
    if (longer(msgId, MAX_ID)) throw new WebhookVerificationError("bad-header", "webhook-id is too long");
    if (stamp.length > MAX_TIMESTAMP_DIGITS || !/^[0-9]+$/.test(stamp)) {
      throw new WebhookVerificationError("bad-header", "webhook-timestamp is not integer Unix seconds");
    }
    if (longer(signatures, MAX_SIGNATURE_HEADER)) throw new WebhookVerificationError("bad-header", "webhook-signature is too long");

    // Freshness first: an old request is refused whoever signed it.
    const atMs = Number(stamp) * 1000;
    const nowMs = this.#now();
    if (atMs < nowMs - this.toleranceMs) {
      throw new WebhookVerificationError("timestamp-too-old", `webhook-timestamp is ${Math.trunc((nowMs - atMs) / 1000)} s old`);
    }
    if (atMs > nowMs + this.toleranceMs) {
      throw new WebhookVerificationError("timestamp-too-new", `webhook-timestamp is ${Math.trunc((atMs - nowMs) / 1000)} s ahead`);
    }

    const offered: Buffer[] = [];
    for (const entry of signatures.split(/\s+/).slice(0, MAX_SIGNATURES)) {
      const comma = entry.indexOf(",");
      if (comma < 0 || entry.slice(0, comma) !== "v1") continue; // another scheme (v1a: asymmetric), or noise
      const decoded = base64(entry.slice(comma + 1), false);
      if (decoded !== null) offered.push(decoded);
    }
    if (offered.length === 0) throw new WebhookVerificationError("no-matching-signature", "no v1 signature in the request");
    let matched = false;
    for (const key of this.#keys) {
      const expected = digest(key, msgId, stamp, data);
      for (const candidate of offered) {
        // Constant time, and every candidate compared: how many matched, or which, is not timed.
        const same = candidate.length === expected.length && timingSafeEqual(candidate, expected);
        matched = same || matched;
      }
    }
    if (!matched) throw new WebhookVerificationError("no-matching-signature", "no signature matches the secret");
    return data;
  }

  /**
   * {@link verify}, then {@link parseWebhookBatch}: the request's typed events.
   *
   * @throws WebhookVerificationError, or WebhookPayloadError for a signed body that is not a batch.
   */
  receive(headers: WebhookHeaders, body: WebhookBody): WebhookBatch {
    const data = this.verify(headers, body);
    return parseWebhookBatch(data, header(headers, "webhook-id")?.trim());
  }

  /** Never shows the secrets. */
  [inspect.custom](): string {
    return `WebhookVerifier { secrets: ${this.#keys.length}, toleranceMs: ${this.toleranceMs} }`;
  }

  toJSON(): { secrets: number; toleranceMs: number } {
    return { secrets: this.#keys.length, toleranceMs: this.toleranceMs };
  }
}

// ---- the payload ----------------------------------------------------------------

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

// A JSON `null` counts as absent, as in the Python client. (One difference:
// JavaScript reads `1.0` as the integer 1, where Python keeps a float.)
function field(obj: Json, name: string, kind: "string" | "integer" | "object", optional: boolean): unknown {
  const v = obj[name];
  if (v === undefined || v === null) {
    if (optional) return undefined;
    throw new WebhookPayloadError(`an event has no ${JSON.stringify(name)}`);
  }
  const ok = kind === "string" ? typeof v === "string" : kind === "integer" ? Number.isSafeInteger(v) : isObject(v);
  if (!ok) throw new WebhookPayloadError(`${JSON.stringify(name)} is not ${kind === "integer" ? "an integer" : `a JSON ${kind}`}`);
  return v;
}

/** An event's optional fields: what each must be, and the values allowed, if limited. */
const OPTIONAL: ReadonlyArray<readonly [keyof WebhookEvent, "string" | "integer" | "object", ReadonlySet<string>?]> = [
  ["member", "string"],
  ["kind", "string", KINDS],
  ["status", "string", STATUSES],
  ["last_seen_ms", "integer"],
  ["meta", "object"],
  ["conn", "string"],
  ["reason", "string"], // not checked, as in the Python client
];

function event(obj: unknown): WebhookEvent {
  if (!isObject(obj)) throw new WebhookPayloadError("an event is not a JSON object");
  const out: WebhookEvent = {
    id: field(obj, "id", "string", false) as string,
    type: field(obj, "type", "string", false) as string, // an unknown type (a newer server's) is kept
    space: field(obj, "space", "string", false) as string,
    at_ms: field(obj, "at_ms", "integer", false) as number,
    raw: obj,
  };
  for (const [name, kind, allowed] of OPTIONAL) {
    const v = field(obj, name, kind, true);
    if (v === undefined) continue;
    if (allowed && !allowed.has(v as string)) throw new WebhookPayloadError(`${JSON.stringify(name)} is ${JSON.stringify(v)}`);
    (out as unknown as Json)[name] = v;
  }
  return out;
}

/**
 * Reads a verified body as a {@link WebhookBatch}.
 *
 * @throws WebhookPayloadError not UTF-8 JSON, or not a `presence.events` batch.
 */
export function parseWebhookBatch(body: WebhookBody, webhookId?: string): WebhookBatch {
  let doc: unknown;
  try {
    const text = typeof body === "string" ? body : new TextDecoder("utf-8", { fatal: true }).decode(bytesOf(body));
    doc = JSON.parse(text);
  } catch (e) {
    throw new WebhookPayloadError(`the body is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!isObject(doc)) throw new WebhookPayloadError("the body is not a JSON object");
  if (doc["type"] !== WEBHOOK_BODY_TYPE) {
    throw new WebhookPayloadError(`the body's type is ${JSON.stringify(doc["type"]) ?? "absent"}, not "${WEBHOOK_BODY_TYPE}"`);
  }
  const data = doc["data"];
  const events = isObject(data) ? data["events"] : undefined;
  if (!Array.isArray(events)) throw new WebhookPayloadError("the body has no data.events list");
  const timestamp = doc["timestamp"];
  const batch: WebhookBatch = {
    type: WEBHOOK_BODY_TYPE,
    timestamp: typeof timestamp === "string" ? timestamp : "",
    events: events.map(event),
  };
  if (webhookId !== undefined) batch.webhookId = webhookId;
  return batch;
}

// ---- at least once -------------------------------------------------------------------

/**
 * Remembers the ids of the last `maxEntries` events handled (default
 * 100,000), so a redelivered event is recognised within one process; the
 * oldest id is forgotten first.
 *
 * ```ts
 * const seen = new Deduplicator();
 * for (const event of seen.fresh(batch.events)) handle(event);
 * ```
 */
export class Deduplicator {
  readonly maxEntries: number;
  readonly #ids = new Map<string, true>();

  constructor(options: { maxEntries?: number } = {}) {
    const max = options.maxEntries ?? 100_000;
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`herenow: maxEntries must be an integer >= 1, got ${String(max)}`);
    this.maxEntries = max;
  }

  /** True the first time `eventId` is seen (and remembers it). */
  firstTime(eventId: string): boolean {
    if (this.#ids.has(eventId)) {
      this.#ids.delete(eventId); // seen again: now the newest
      this.#ids.set(eventId, true);
      return false;
    }
    this.#ids.set(eventId, true);
    while (this.#ids.size > this.maxEntries) this.#ids.delete(this.#ids.keys().next().value as string);
    return true;
  }

  /** The events not seen before, in order. */
  fresh<E extends { id: string }>(events: Iterable<E>): E[] {
    const out: E[] = [];
    for (const e of events) if (this.firstTime(e.id)) out.push(e);
    return out;
  }

  /** Ids remembered now (at most `maxEntries`). */
  get size(): number {
    return this.#ids.size;
  }
}
