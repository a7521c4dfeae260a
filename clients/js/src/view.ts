/**
 * Presence for rendering pages: queries that never stall or break a page.
 *
 * A page that shows who is online must not wait on herenow when herenow
 * hangs (an overloaded or partitioned server accepts connections and never
 * answers). {@link PresenceView}'s queries answer either what herenow said
 * or **unknown**, and they share a {@link CircuitBreaker} per herenow
 * server and process: after a failure or a timeout every query answers
 * unknown at once for `backoffMs` (default 30 s); then one query is let
 * through as a probe, and the breaker closes when it is answered. The log
 * says so once when the breaker opens and once when it closes, never per
 * call.
 *
 * Unknown renders as nothing (or the `unknownText` you choose), never as
 * "Nobody is online." or an empty last seen: every answer has `known`,
 * and `text` (also its `toString()`), so `${box}` in a template is safe.
 *
 * @module
 */

import type { Herenow } from "./client.js";
import { HerenowError } from "./errors.js";
import type { Counts, Duration, KindFilter, Meta, MemberStatus, PresenceStatus } from "./types.js";

/** Where the breaker writes its two lines per outage. */
export interface BreakerLogger {
  warn(message: string): void;
}

/** How a {@link CircuitBreaker} behaves. */
export interface CircuitBreakerOptions {
  /** How long it stays open after a failure before one probe goes through, in ms (default 30,000). */
  backoffMs?: number;
  /** Default `console`. */
  logger?: BreakerLogger;
  /** The clock, in ms (default `Date.now`). */
  now?: () => number;
  /** Named in its log lines (default `herenow`). */
  name?: string;
}

/** `closed`: calls go through; `open`: calls answer unknown at once; `probing`: one call is trying. */
export type BreakerState = "closed" | "open" | "probing";

/** Counters, for a metrics endpoint or a test. */
export interface BreakerStats {
  /** Times it opened from closed (an outage; failed probes are not counted again). */
  opened: number;
  /** Calls answered unknown at once because it was open. */
  shortCircuited: number;
  /** Failures seen (timeouts, connection failures, 5xx, 429), probes included. */
  failures: number;
}

/**
 * Remembers that herenow failed, so that the next calls do not wait for it.
 *
 * `allow()` before a call, then `success()` or `failure(e)` after it. While
 * closed every call is allowed; a failure opens it. While open, calls are
 * refused until `backoffMs` has passed since it opened; then exactly one is
 * allowed (the probe) and the others are refused until it ends: a success
 * closes the breaker, a failure opens it for another `backoffMs`.
 */
export class CircuitBreaker {
  readonly backoffMs: number;
  readonly stats: BreakerStats = { opened: 0, shortCircuited: 0, failures: 0 };
  private readonly logger: BreakerLogger;
  private readonly now: () => number;
  private readonly name: string;
  private openedAt: number | null = null;
  private outageStart: number | null = null;
  private probing = false;

  constructor(options: CircuitBreakerOptions = {}) {
    const b = options.backoffMs ?? 30_000;
    if (typeof b !== "number" || !Number.isFinite(b) || b < 0) {
      throw new RangeError(`herenow: backoffMs must be a non-negative finite number, got ${String(b)}`);
    }
    this.backoffMs = b;
    this.logger = options.logger ?? console;
    this.now = options.now ?? Date.now;
    this.name = options.name ?? "herenow";
  }

  /** Where it stands now. */
  get state(): BreakerState {
    if (this.openedAt === null) return "closed";
    return this.probing ? "probing" : "open";
  }

  /** Whether a call may go to herenow now; `true` while open means: this call is the probe. */
  allow(): boolean {
    if (this.openedAt === null) return true;
    const t = this.now();
    if (!this.probing && (t - this.openedAt >= this.backoffMs || t < this.openedAt)) {
      this.probing = true;
      return true;
    }
    this.stats.shortCircuited += 1;
    return false;
  }

  /** herenow answered (any answer, a 4xx too: it is up). */
  success(): void {
    if (this.openedAt === null) return;
    const down = this.outageStart === null ? 0 : Math.max(0, this.now() - this.outageStart);
    this.openedAt = null;
    this.outageStart = null;
    this.probing = false;
    this.say(`answers again after ${Math.round(down / 1000)} s; presence queries go to it again`);
  }

  /** herenow failed (no answer in time, unreachable, 5xx, 429): open, or stay open for another back-off. */
  failure(error?: unknown): void {
    this.stats.failures += 1;
    const t = this.now();
    const wasClosed = this.openedAt === null;
    this.openedAt = t;
    this.probing = false;
    if (wasClosed) {
      this.outageStart = t;
      this.stats.opened += 1;
      this.say(
        `presence is unknown for ${Math.round(this.backoffMs / 1000)} s, then one query tries again ` +
          `(${describe(error)}); pages go on without it, said once until it answers`,
      );
    }
  }

  /** A call that ended with neither an answer nor an outage (a bad argument): the next call may probe. */
  release(): void {
    this.probing = false;
  }

  /** Closes it and forgets the outage, quietly (tests, or after a deploy). */
  reset(): void {
    this.openedAt = null;
    this.outageStart = null;
    this.probing = false;
  }

  private say(message: string): void {
    try {
      this.logger.warn(`${this.name}: ${message}`);
    } catch {
      // A logger that throws must not break a page.
    }
  }
}

const shared = new Map<string, CircuitBreaker>();

/**
 * The process's breaker for one herenow server (by base URL), made with
 * `options` the first time it is asked for; later calls answer the same
 * one, whatever their options.
 */
export function sharedBreaker(baseUrl: string, options: CircuitBreakerOptions = {}): CircuitBreaker {
  let b = shared.get(baseUrl);
  if (!b) {
    b = new CircuitBreaker({ name: `herenow at ${baseUrl}`, ...options });
    shared.set(baseUrl, b);
  }
  return b;
}

/** Whether an error says herenow is down or overloaded (rather than refusing this one request). */
export function isOutage(e: unknown): boolean {
  if (!(e instanceof HerenowError)) return false;
  if (e.status === null) return true; // connection-failed, request-timeout
  return e.status >= 500 || e.status === 429;
}

/** An answer herenow did not give: renders as `text` (default empty). */
export interface Unknown {
  known: false;
  /** The caller's `unknownText` (default `""`). */
  text: string;
  toString(): string;
}

/** Who is online in a space: counts and the first members. */
export interface WhosOnline {
  known: true;
  counts: Counts;
  /** The first `limit` members, most recently seen first. */
  members: MemberStatus[];
  /** "2 users and 1 guest online", or "Nobody is online.". */
  text: string;
  toString(): string;
}

/** A member's status and last seen. */
export interface LastSeen {
  known: true;
  status: PresenceStatus;
  /** `null`: never seen (or forgotten). */
  last_seen_ms: number | null;
  meta?: Meta;
  /** "online", "away", "last seen 5 minutes ago" or "never seen". */
  text: string;
  toString(): string;
}

/** Whether a member is online. */
export interface OnlineFlag {
  known: true;
  online: boolean;
  /** "online" or "offline". */
  text: string;
  toString(): string;
}

/** A space's counts. */
export interface CountAnswer {
  known: true;
  counts: Counts;
  /** "2 users and 1 guest online", or "Nobody is online.". */
  text: string;
  toString(): string;
}

/** A user's friends online in a space. */
export interface FriendsOnline {
  known: true;
  members: MemberStatus[];
  /** "2 friends online", or "No friends online.". */
  text: string;
  toString(): string;
}

/** How a {@link PresenceView} queries. */
export interface PresenceViewOptions {
  /** The client to query with. */
  client: Herenow;
  /** Each query's timeout, in ms (default 2,000; the client's own is for other calls). */
  timeoutMs?: number;
  /** What unknown renders as (default `""`: nothing). */
  unknownText?: string;
  /** Default: the process's breaker for the client's base URL ({@link sharedBreaker}). */
  breaker?: CircuitBreaker;
  /** The shared breaker's back-off, when this view is the first to ask for it (default 30,000 ms). */
  backoffMs?: number;
  /** The shared breaker's logger, when this view is the first to ask for it (default `console`). */
  logger?: BreakerLogger;
  /** The clock for "last seen … ago" (default `Date.now`). */
  now?: () => number;
}

/**
 * Queries for rendering: each answers herenow's answer (`known: true`) or
 * unknown (`known: false`), never throws, and never waits on a herenow that
 * failed within the back-off.
 *
 * ```ts
 * const view = new PresenceView({ client: herenow });
 * app.get("/", async (req, res) => {
 *   const box = await view.whosOnline("site");              // box.known, box.counts, box.members
 *   const seen = await view.lastSeen("site", "ada");
 *   res.send(`<p>${box}</p><p>Ada: ${seen}</p>`);           // unknown renders as ""
 * });
 * ```
 */
export class PresenceView {
  readonly breaker: CircuitBreaker;
  readonly timeoutMs: number;
  readonly unknownText: string;
  private readonly client: Herenow;
  private readonly now: () => number;

  constructor(options: PresenceViewOptions) {
    if (!options || !options.client || typeof options.client.member !== "function") {
      throw new TypeError("herenow: a view needs a client (new Herenow({...}))");
    }
    this.client = options.client;
    const t = options.timeoutMs ?? 2_000;
    if (typeof t !== "number" || !Number.isFinite(t) || t <= 0) {
      throw new RangeError(`herenow: timeoutMs must be a positive number of ms, got ${String(t)}`);
    }
    this.timeoutMs = t;
    this.unknownText = options.unknownText ?? "";
    const breakerOptions: CircuitBreakerOptions = {};
    if (options.backoffMs !== undefined) breakerOptions.backoffMs = options.backoffMs;
    if (options.logger !== undefined) breakerOptions.logger = options.logger;
    this.breaker = options.breaker ?? sharedBreaker(this.client.baseUrl, breakerOptions);
    this.now = options.now ?? Date.now;
  }

  /** The unknown answer, with this view's text. */
  get unknown(): Unknown {
    return unknown(this.unknownText);
  }

  /** Counts and the `limit` (default 20) most recently seen members of `kind` (default users). */
  async whosOnline(space: string, options: { limit?: number; window?: Duration; kind?: KindFilter } = {}): Promise<WhosOnline | Unknown> {
    const { limit = 20, window, kind } = options;
    return this.ask(async (timeoutMs) => {
      const countOpts = window === undefined ? { timeoutMs } : { timeoutMs, window };
      const [counts, page] = await Promise.all([
        this.client.count(space, countOpts),
        this.client.online(space, { timeoutMs, limit, order: "recent", ...(window === undefined ? {} : { window }), ...(kind === undefined ? {} : { kind }) }),
      ]);
      return known({ counts, members: page.members }, countsText(counts));
    });
  }

  /** A member's status and last seen in a space. */
  async lastSeen(space: string, id: string, options: { kind?: "user" | "guest" } = {}): Promise<LastSeen | Unknown> {
    return this.ask(async (timeoutMs) => {
      const m = await this.client.member(space, id, { timeoutMs, ...(options.kind === undefined ? {} : { kind: options.kind }) });
      const out: Omit<LastSeen, "known" | "text" | "toString"> = { status: m.status, last_seen_ms: m.last_seen_ms };
      if (m.meta !== undefined) out.meta = m.meta;
      return known(out, seenText(m.status, m.last_seen_ms, this.now()));
    });
  }

  /** A user's status and newest last seen over every space. */
  async lastSeenAnywhere(id: string): Promise<LastSeen | Unknown> {
    return this.ask(async (timeoutMs) => {
      const u = await this.client.user(id, { timeoutMs });
      return known({ status: u.status, last_seen_ms: u.last_seen_ms }, seenText(u.status, u.last_seen_ms, this.now()));
    });
  }

  /** Whether a member is online in a space. */
  async isOnline(space: string, id: string, options: { kind?: "user" | "guest" } = {}): Promise<OnlineFlag | Unknown> {
    return this.ask(async (timeoutMs) => {
      const m = await this.client.member(space, id, { timeoutMs, ...(options.kind === undefined ? {} : { kind: options.kind }) });
      const online = m.status === "online";
      return known({ online }, online ? "online" : "offline");
    });
  }

  /** A space's counts. */
  async count(space: string, options: { window?: Duration } = {}): Promise<CountAnswer | Unknown> {
    return this.ask(async (timeoutMs) => {
      const counts = await this.client.count(space, options.window === undefined ? { timeoutMs } : { timeoutMs, window: options.window });
      return known({ counts }, countsText(counts));
    });
  }

  /** A user's friends online in a space (at most `limit`, default 100). */
  async onlineFriends(space: string, user: string, options: { limit?: number; window?: Duration } = {}): Promise<FriendsOnline | Unknown> {
    return this.ask(async (timeoutMs) => {
      const members = await this.client.onlineFriends(space, user, { timeoutMs, ...options });
      const n = members.length;
      return known({ members }, n === 0 ? "No friends online." : `${n} friend${n === 1 ? "" : "s"} online`);
    });
  }

  /** Runs one query through the breaker: its answer, or unknown. Never rejects. */
  private async ask<T>(query: (timeoutMs: number) => Promise<T>): Promise<T | Unknown> {
    if (!this.breaker.allow()) return this.unknown;
    try {
      const answer = await query(this.timeoutMs);
      this.breaker.success();
      return answer;
    } catch (e) {
      if (isOutage(e)) this.breaker.failure(e);
      else if (e instanceof HerenowError) this.breaker.success(); // it answered: a refusal, not an outage
      else this.breaker.release();
      return this.unknown;
    }
  }
}

function unknown(text: string): Unknown {
  return { known: false, text, toString: () => text };
}

function known<T extends object>(fields: T, text: string): T & { known: true; text: string; toString(): string } {
  return { known: true as const, ...fields, text, toString: () => text };
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** "2 users and 1 guest online", or "Nobody is online.". */
export function countsText(c: Counts): string {
  if (c.total === 0) return "Nobody is online.";
  const parts: string[] = [];
  if (c.users > 0) parts.push(plural(c.users, "user", "users"));
  if (c.guests > 0) parts.push(plural(c.guests, "guest", "guests"));
  return `${parts.join(" and ")} online`;
}

/** "online", "away", "last seen 5 minutes ago", or "never seen". */
export function seenText(status: PresenceStatus, lastSeenMs: number | null, now: number): string {
  if (status === "online" || status === "away") return status;
  if (lastSeenMs === null) return "never seen";
  return `last seen ${ago(Math.max(0, now - lastSeenMs))}`;
}

function ago(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return "just now";
  const units: Array<[number, string]> = [
    [86_400, "day"],
    [3_600, "hour"],
    [60, "minute"],
  ];
  for (const [size, name] of units) {
    if (s >= size) {
      const n = Math.floor(s / size);
      return `${n} ${name}${n === 1 ? "" : "s"} ago`;
    }
  }
  return "just now";
}

function describe(e: unknown): string {
  if (e instanceof HerenowError) return `${e.status === null ? "" : `${e.status} `}${e.code}: ${e.detail}`;
  if (e instanceof Error) return e.message;
  return e === undefined ? "failed" : String(e);
}
