/**
 * Presence for server-rendered sites: an Express/Connect middleware
 * `(req, res, next)` that heartbeats the request's user, or a guest by
 * cookie or IP address, without ever delaying or failing the request.
 *
 * - **Debounced**: at most one heartbeat per member per `intervalMs`
 *   (default 60 s, the server's default `online_ms`), remembered in a
 *   process-local map bounded by `maxMembers` (the member sent longest ago
 *   is forgotten first: at worst it is heartbeated again a little early).
 * - **Batched in the background**: `next()` is called at once; the sender
 *   gathers heartbeats for `flushDelayMs` (default 1 s) after the first one
 *   queued, or until a space has `batchSize` (default 10,000) waiting, and
 *   sends them as one `POST /v1/spaces/{space}/heartbeats` per space, one
 *   flush at a time. At most `maxPending` heartbeats wait; past that new
 *   ones are dropped (and retried at the member's next request).
 * - **Bounded shutdown**: `close()` sends what is waiting, but returns within
 *   `closeTimeoutMs` (default 1 s) even when herenow hangs: what it could
 *   not send is dropped and counted (its answer, and `stats.unsent`).
 * - **Guests** by IP address (the default), or by a first-party cookie the
 *   middleware sets (`guest: "cookie"`: random, HttpOnly, SameSite=Lax).
 * - **Drives on**: whatever goes wrong with herenow (down, slow, a refusal,
 *   a throwing `user` function), the request goes on; the problem is logged
 *   at most once per `intervalMs`, saying how many were not logged. A
 *   failed batch's members are heartbeated again at their next request.
 *
 * @module
 */

import { randomBytes } from "node:crypto";

import type { Herenow } from "./client.js";
import { HerenowError } from "./errors.js";
import type { HeartbeatInput, Kind, Meta } from "./types.js";
import { MAX_BATCH, memberIdProblem, metaProblem, spaceNameProblem } from "./validate.js";

/** The parts of a request the middleware reads (Node's `IncomingMessage`, Express's `Request`). */
export interface PresenceRequest {
  headers: { cookie?: string | string[] | undefined; [name: string]: unknown };
  /** Express's client address (honours `trust proxy`). */
  ip?: string | undefined;
  /** Express's "is this HTTPS" (honours `trust proxy`). */
  secure?: boolean | undefined;
  socket?: { remoteAddress?: string | undefined; encrypted?: boolean } | null | undefined;
}

/** The parts of a response the middleware touches, to set the guest cookie. */
export interface PresenceResponse {
  headersSent?: boolean;
  getHeader(name: string): unknown;
  setHeader(name: string, value: string | string[]): unknown;
}

/**
 * Who a request is: a user id (a number is taken as its decimal string), or
 * an id with metadata. `null`/`undefined`/`false`: not signed in.
 */
export type Identity = string | number | { id: string | number; meta?: Meta } | null | undefined | false;

/** Where the middleware writes the one line per interval it says about herenow's problems. */
export interface PresenceLogger {
  warn(message: string): void;
}

/** The guest cookie's attributes. */
export interface GuestCookieOptions {
  /** Default `herenow_guest`. */
  name?: string;
  /** Lifetime in seconds; default none: a session cookie. */
  maxAgeS?: number;
  /** Default `/`. */
  path?: string;
  domain?: string;
  /** Default `"auto"`: when the request came over HTTPS. */
  secure?: boolean | "auto";
  /** Default `Lax`. */
  sameSite?: "Strict" | "Lax" | "None";
}

/** How {@link Presence} heartbeats and batches. */
export interface PresenceOptions<Req extends PresenceRequest = PresenceRequest> {
  /** The client to send heartbeats with. */
  client: Herenow;
  /** The space the site's visitors are present in, or a function of the request (`null`: do not track it). */
  space: string | ((req: Req) => string | null | undefined);
  /**
   * The request's user: its id (or `{id, meta}`), or `null`/`undefined` for
   * a visitor who is not signed in. May return a promise (then the guest
   * cookie cannot be set for that request if the response went out).
   */
  user?: (req: Req) => Identity | Promise<Identity>;
  /**
   * Visitors not signed in: as guests by IP address (`"ip"`, the default),
   * by a first-party cookie the middleware sets when a guest has none
   * (`"cookie"`: 128 random bits, HttpOnly, SameSite=Lax, so two browsers
   * behind one address are two guests), by an id you derive, or not at all
   * (`false`).
   */
  guest?: "cookie" | "ip" | false | ((req: Req) => string | null | undefined);
  /** The guest cookie's attributes. */
  cookie?: GuestCookieOptions;
  /** Requests not to track at all (health checks, assets). */
  skip?: (req: Req) => boolean;
  /** At most one heartbeat per member per this many ms (default 60,000). */
  intervalMs?: number;
  /** Members remembered for the debounce (default 100,000). */
  maxMembers?: number;
  /** Heartbeats waiting to be sent, at most (default 10,000). */
  maxPending?: number;
  /** How long the sender gathers heartbeats after the first one queued, in ms (default 1,000). */
  flushDelayMs?: number;
  /** A space with this many waiting is sent at once, without waiting for `flushDelayMs` (1 to 10,000; default 10,000). */
  batchSize?: number;
  /** The longest `close()` takes by default, in ms (default 1,000). */
  closeTimeoutMs?: number;
  /** Default `console`. */
  logger?: PresenceLogger;
  /** The clock, in ms: inject one in tests (default `Date.now`). */
  now?: () => number;
}

/** Counters, for a metrics endpoint or a test. */
export interface PresenceStats {
  /** Heartbeats the server accepted. */
  sent: number;
  /** Heartbeats in batches that failed. */
  failed: number;
  /** Heartbeats dropped because `maxPending` were waiting. */
  dropped: number;
  /** Members or spaces refused before sending (bad id, bad metadata, a throwing function). */
  refused: number;
  /** Requests sent. */
  batches: number;
  /** Heartbeats `close()` dropped: not sent by its deadline, or failed. */
  unsent: number;
}

/** What {@link Presence.close} did with the heartbeats waiting or in flight when it was called. */
export interface CloseReport {
  /** Sent and accepted. */
  sent: number;
  /** Dropped: herenow did not accept them by the deadline (also added to `stats.unsent`). */
  unsent: number;
  /** Whether the deadline ended it (rather than every send settling). */
  timedOut: boolean;
}

const GUEST_ID = /^[A-Za-z0-9_-]{16,64}$/;
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

interface Pending {
  beat: HeartbeatInput;
  /** The debounce time recorded for it, to undo exactly that record on failure. */
  at: number;
}

function count(v: number | undefined, dflt: number, what: string): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new RangeError(`herenow: ${what} must be a non-negative finite number, got ${String(v)}`);
  }
  return v;
}

/**
 * The debounce and the background batching behind the middleware; use it
 * directly to heartbeat from anything that is not an HTTP request.
 */
export class Presence<Req extends PresenceRequest = PresenceRequest> {
  readonly intervalMs: number;
  readonly maxMembers: number;
  readonly maxPending: number;
  readonly flushDelayMs: number;
  readonly batchSize: number;
  readonly closeTimeoutMs: number;
  readonly stats: PresenceStats = { sent: 0, failed: 0, dropped: 0, refused: 0, batches: 0, unsent: 0 };

  private readonly client: Herenow;
  private readonly options: PresenceOptions<Req>;
  private readonly logger: PresenceLogger;
  private readonly now: () => number;
  private readonly cookieName: string;
  /** Debounce: member key → when its heartbeat was queued; insertion order is age. */
  private readonly lastSent = new Map<string, number>();
  /** Waiting heartbeats: space → member key → heartbeat. */
  private pending = new Map<string, Map<string, Pending>>();
  private pendingCount = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** The flush being sent; at most one at a time, so waiting heartbeats stay within maxPending. */
  private inFlight: Promise<void> | null = null;
  private lastLogAt: number | null = null;
  private unsaid = 0;
  private closed = false;
  private closing: Promise<CloseReport> | null = null;
  /** Aborts the send in flight when close() gives up. */
  private readonly abort = new AbortController();
  /** Heartbeats of the send in flight whose request has not settled. */
  private inFlightLeft = 0;
  /** Heartbeats in requests that succeeded, ever. */
  private delivered = 0;

  constructor(options: PresenceOptions<Req>) {
    if (!options || typeof options !== "object") throw new TypeError("herenow: presence options are required");
    if (!options.client || typeof options.client.heartbeats !== "function") {
      throw new TypeError("herenow: presence needs a client (new Herenow({...}))");
    }
    if (typeof options.space === "string") {
      const problem = spaceNameProblem(options.space);
      if (problem) throw new TypeError(`herenow: ${problem}`);
    } else if (typeof options.space !== "function") {
      throw new TypeError("herenow: presence needs a space (a name, or a function of the request)");
    }
    if (options.user !== undefined && typeof options.user !== "function") throw new TypeError("herenow: user must be a function");
    const guest = options.guest ?? "ip";
    if (guest !== "cookie" && guest !== "ip" && guest !== false && typeof guest !== "function") {
      throw new TypeError('herenow: guest must be "cookie", "ip", false or a function');
    }
    this.options = options;
    this.client = options.client;
    this.intervalMs = count(options.intervalMs, 60_000, "intervalMs");
    this.maxMembers = Math.floor(count(options.maxMembers, 100_000, "maxMembers"));
    this.maxPending = Math.floor(count(options.maxPending, 10_000, "maxPending"));
    this.flushDelayMs = count(options.flushDelayMs, 1_000, "flushDelayMs");
    this.batchSize = Math.floor(count(options.batchSize, MAX_BATCH, "batchSize"));
    if (this.batchSize < 1 || this.batchSize > MAX_BATCH) {
      throw new RangeError(`herenow: batchSize must be 1 to ${MAX_BATCH}, got ${String(options.batchSize)}`);
    }
    this.closeTimeoutMs = count(options.closeTimeoutMs, 1_000, "closeTimeoutMs");
    this.logger = options.logger ?? console;
    this.now = options.now ?? Date.now;
    this.cookieName = options.cookie?.name ?? "herenow_guest";
    if (!COOKIE_NAME.test(this.cookieName)) throw new TypeError(`herenow: ${JSON.stringify(this.cookieName)} is not a cookie name`);
  }

  /** Members remembered for the debounce now (at most `maxMembers`). */
  get tracked(): number {
    return this.lastSent.size;
  }

  /** Heartbeats waiting to be sent now (at most `maxPending`). */
  get waiting(): number {
    return this.pendingCount;
  }

  /**
   * The member is here: queues its heartbeat unless one was queued within
   * `intervalMs`. Answers whether it was queued. Never throws for bad
   * input: it is logged (once per interval) and counted in `stats.refused`.
   */
  seen(space: string, member: { id: string; kind?: Kind; meta?: Meta }): boolean {
    if (this.closed) return false;
    const problem =
      spaceNameProblem(space) ?? memberIdProblem(member?.id) ?? (member.meta === undefined ? null : metaProblem(member.meta));
    if (problem) {
      this.stats.refused += 1;
      this.say(`a heartbeat was not sent: ${problem}`);
      return false;
    }
    const kind: Kind = member.kind === "guest" ? "guest" : "user";
    const key = `${space}\u0000${kind}\u0000${member.id}`;
    const t = this.now();
    const last = this.lastSent.get(key);
    // A clock that went back counts as due, rather than silencing the member.
    if (last !== undefined && t >= last && t - last < this.intervalMs) return false;
    if (this.pendingCount >= this.maxPending) {
      this.stats.dropped += 1;
      this.say(`a heartbeat was dropped: ${this.maxPending} are already waiting to be sent`);
      return false;
    }
    this.lastSent.delete(key);
    this.lastSent.set(key, t);
    while (this.lastSent.size > this.maxMembers) {
      const oldest = this.lastSent.keys().next().value as string;
      this.lastSent.delete(oldest);
    }
    let batch = this.pending.get(space);
    if (!batch) {
      batch = new Map();
      this.pending.set(space, batch);
    }
    const beat: HeartbeatInput = kind === "guest" ? { id: member.id, kind } : { id: member.id };
    if (member.meta !== undefined) beat.meta = member.meta;
    if (!batch.has(key)) this.pendingCount += 1;
    batch.set(key, { beat, at: t });
    if (batch.size >= this.batchSize && !this.inFlight) void this.flush();
    else this.schedule();
    return true;
  }

  /**
   * Sends every waiting heartbeat now; resolves when they (and any flush
   * before) are done. Never rejects: failures are logged.
   */
  flush(): Promise<void> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    // One flush at a time: what arrives meanwhile waits in `pending`
    // (bounded), not in a queue of batches behind a slow herenow.
    if (this.inFlight) return this.inFlight.then(() => this.flush());
    if (this.pending.size === 0) return Promise.resolve();
    const work = this.pending;
    this.pending = new Map();
    this.pendingCount = 0;
    this.inFlight = this.send(work).finally(() => {
      this.inFlight = null;
      if (this.pendingCount > 0 && !this.closed) this.schedule();
    });
    return this.inFlight;
  }

  /**
   * Stops taking heartbeats and sends those waiting, for at most
   * `timeoutMs` (default `closeTimeoutMs`, 1 s): then the request in flight
   * is aborted and what was not sent is dropped, counted in the answer and
   * in `stats.unsent`. Never rejects; calling it again answers the same.
   */
  close(options: { timeoutMs?: number } = {}): Promise<CloseReport> {
    if (this.closing) return this.closing;
    const limit = count(options.timeoutMs, this.closeTimeoutMs, "timeoutMs");
    this.closed = true;
    const queued = this.pendingCount + this.inFlightLeft;
    const before = this.delivered;
    this.closing = (async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<false>((r) => {
        timer = setTimeout(() => r(false), limit);
      });
      const finished = await Promise.race([this.flush().then(() => true as const), expired]);
      clearTimeout(timer);
      if (!finished) {
        // herenow hangs: give up on the request in flight and on what waits.
        this.pending = new Map();
        this.pendingCount = 0;
        this.abort.abort(new Error(`the sender was closed after ${limit} ms`));
      }
      const sent = Math.min(queued, this.delivered - before);
      const unsent = queued - sent;
      this.stats.unsent += unsent;
      if (!finished) this.say(`close() gave up after ${limit} ms: ${unsent} heartbeat(s) dropped unsent`);
      return { sent, unsent, timedOut: !finished };
    })();
    return this.closing;
  }

  /** The Express/Connect middleware: `app.use(presence.middleware())`. */
  middleware(): (req: Req, res: PresenceResponse, next: (err?: unknown) => void) => void {
    return (req, res, next) => {
      try {
        this.observe(req, res);
      } catch (e) {
        this.stats.refused += 1;
        this.say(`a request could not be tracked: ${describe(e)}`);
      }
      next();
    };
  }

  // ---- internals ------------------------------------------------------------

  private observe(req: Req, res: PresenceResponse): void {
    if (this.closed) return;
    if (this.options.skip?.(req)) return;
    const space = typeof this.options.space === "function" ? this.options.space(req) : this.options.space;
    if (space === null || space === undefined) return;
    const who = this.options.user ? this.options.user(req) : null;
    if (isThenable(who)) {
      who.then(
        (identity) => this.identified(space, identity, req, res),
        (e: unknown) => {
          this.stats.refused += 1;
          this.say(`the user function failed: ${describe(e)}`);
        },
      );
      return;
    }
    this.identified(space, who, req, res);
  }

  private identified(space: string, who: Identity, req: Req, res: PresenceResponse): void {
    if (typeof who === "string" || typeof who === "number") {
      this.seen(space, { id: idString(who) });
      return;
    }
    if (who && typeof who === "object") {
      const id = idString(who.id);
      this.seen(space, who.meta === undefined ? { id } : { id, meta: who.meta });
      return;
    }
    const id = this.guestId(req, res);
    if (id) this.seen(space, { id, kind: "guest" });
  }

  private guestId(req: Req, res: PresenceResponse): string | null {
    const guest = this.options.guest ?? "ip";
    if (guest === false) return null;
    if (typeof guest === "function") return guest(req) ?? null;
    if (guest === "ip") return req.ip ?? req.socket?.remoteAddress ?? null;
    // "cookie": a first-party cookie of 128 random bits, set when the guest has none.
    const known = readCookie(req.headers.cookie, this.cookieName);
    if (known !== null && GUEST_ID.test(known)) return known;
    if (res.headersSent) return null;
    const id = randomBytes(16).toString("base64url");
    appendSetCookie(res, this.setCookie(id, req));
    return id;
  }

  private setCookie(id: string, req: Req): string {
    const c = this.options.cookie ?? {};
    const parts = [`${this.cookieName}=${id}`, `Path=${c.path ?? "/"}`, "HttpOnly", `SameSite=${c.sameSite ?? "Lax"}`];
    if (c.maxAgeS !== undefined) parts.push(`Max-Age=${Math.floor(c.maxAgeS)}`);
    if (c.domain !== undefined) parts.push(`Domain=${c.domain}`);
    const secure = c.secure ?? "auto";
    if (secure === true || (secure === "auto" && (req.secure === true || req.socket?.encrypted === true))) parts.push("Secure");
    return parts.join("; ");
  }

  private schedule(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // A flush in flight schedules the next one when it is done.
      if (!this.inFlight) void this.flush();
    }, this.flushDelayMs);
    // A pending flush must not keep the process alive; close() sends it.
    this.timer.unref?.();
  }

  private async send(work: Map<string, Map<string, Pending>>): Promise<void> {
    for (const batch of work.values()) this.inFlightLeft += batch.size;
    for (const [space, batch] of work) {
      const items = [...batch.entries()];
      for (let i = 0; i < items.length; i += this.batchSize) {
        const chunk = items.slice(i, i + this.batchSize);
        this.stats.batches += 1;
        try {
          const report = await this.client.heartbeats(
            space,
            chunk.map(([, p]) => p.beat),
            { signal: this.abort.signal },
          );
          this.stats.sent += report.accepted;
          this.delivered += chunk.length;
        } catch (e) {
          this.stats.failed += chunk.length;
          // Undo the debounce, so each member is heartbeated again at its
          // next request: presence comes back as soon as herenow does.
          for (const [key, p] of chunk) if (this.lastSent.get(key) === p.at) this.lastSent.delete(key);
          this.say(`${chunk.length} heartbeat(s) for space ${space} were not sent: ${describe(e)}`);
        } finally {
          this.inFlightLeft -= chunk.length;
        }
      }
    }
  }

  /** Logs at most one line per interval, counting the lines it held back. */
  private say(message: string): void {
    const t = this.now();
    if (this.lastLogAt !== null && t >= this.lastLogAt && t - this.lastLogAt < this.intervalMs) {
      this.unsaid += 1;
      return;
    }
    const held = this.unsaid > 0 ? ` (${this.unsaid} more problem(s) since the last line)` : "";
    this.lastLogAt = t;
    this.unsaid = 0;
    try {
      this.logger.warn(`herenow: ${message}${held}; requests go on, said at most once per ${Math.round(this.intervalMs / 1000)} s`);
    } catch {
      // A logger that throws must not fail the request either.
    }
  }
}

/** Numeric user ids (common from databases) as their decimal form; anything else is checked by `seen`. */
function idString(id: unknown): string {
  return typeof id === "number" && Number.isSafeInteger(id) ? String(id) : (id as string);
}

function isThenable(v: unknown): v is PromiseLike<Identity> {
  return typeof v === "object" && v !== null && typeof (v as PromiseLike<unknown>).then === "function";
}

function describe(e: unknown): string {
  if (e instanceof HerenowError) return `${e.status === null ? "" : `${e.status} `}${e.code}: ${e.detail}`;
  if (e instanceof Error) return e.message;
  return String(e);
}

/** The value of cookie `name` in a `Cookie` header, or `null`. */
export function readCookie(header: string | string[] | undefined, name: string): string | null {
  if (header === undefined) return null;
  const all = Array.isArray(header) ? header.join("; ") : header;
  for (const part of all.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    let v = part.slice(eq + 1).trim();
    if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
    return v;
  }
  return null;
}

function appendSetCookie(res: PresenceResponse, cookie: string): void {
  const prev = res.getHeader("set-cookie");
  const list = prev === undefined || prev === null ? [] : Array.isArray(prev) ? prev.map(String) : [String(prev)];
  res.setHeader("set-cookie", [...list, cookie]);
}

/** Middleware with its {@link Presence} attached, to flush or close at shutdown. */
export interface PresenceMiddleware<Req extends PresenceRequest = PresenceRequest> {
  (req: Req, res: PresenceResponse, next: (err?: unknown) => void): void;
  /** The debounce and batching behind it. */
  presence: Presence<Req>;
}

/**
 * An Express/Connect middleware that heartbeats each request's user (or
 * guest), debounced and batched in the background:
 *
 * ```ts
 * const presence = herenowPresence({ client, space: "site", user: (req) => req.user?.id });
 * app.use(presence);
 * process.on("SIGTERM", () => presence.presence.close()); // at most 1 s
 * ```
 */
export function herenowPresence<Req extends PresenceRequest = PresenceRequest>(options: PresenceOptions<Req>): PresenceMiddleware<Req> {
  const presence = new Presence<Req>(options);
  const handler = presence.middleware() as PresenceMiddleware<Req>;
  handler.presence = presence;
  return handler;
}
