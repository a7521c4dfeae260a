/**
 * The two Server-Sent Event streams as async iterators that survive a
 * dropped connection: `GET /v1/spaces/{space}/events` ({@link EventStream})
 * and `POST /v1/watch` ({@link WatchStream}).
 *
 * A stream that ends or breaks (the server restarted, a proxy cut it, no
 * byte for `idleTimeoutMs` although the server sends a keep-alive every
 * 15 s, a watch's `error` event) is opened again with exponential backoff
 * and full jitter, honouring `Retry-After`. Nothing is replayed on the wire,
 * so the fresh stream's first picture (a `snapshot`, or the first
 * `watching` pages) is marked `resync: true`: it replaces what the reader
 * knew, exactly as after a server-side `lagged`. A refusal that will not get
 * better (a `4xx` such as `bad-space-name`, `401`, `403`) ends the iteration
 * with that {@link HerenowError}.
 *
 * Each stream also keeps the picture up to date as it is read: `members`
 * (present members by `kind:id`) and `users` (watched users by id), with
 * resync pages applied only once complete, so nobody blinks out between
 * pages.
 *
 * @module
 */

import { HerenowError } from "./errors.js";
import { Deadline, errorFromBody, type Transport } from "./http.js";
import { DEFAULT_MAX_EVENT_SIZE, readSse, type SseMessage } from "./sse.js";
import type {
  MemberStatus,
  SpaceConfig,
  PresenceEvent,
  SpaceEvent,
  StatusEvent,
  UnwatchedEvent,
  WatchedUser,
  WatchEvent,
  WatchingEvent,
} from "./types.js";

/** How a stream opens, waits and comes back. */
export interface StreamOptions {
  /** Stops the stream: the iteration ends (without an error). */
  signal?: AbortSignal;
  /**
   * Reconnections in a row (without an event in between) before the last
   * error is thrown; default `Infinity`. `0`: never reconnect.
   */
  maxRetries?: number;
  /** The backoff's first cap, in ms (default 500). */
  minDelayMs?: number;
  /** The backoff's largest cap, in ms (default 30,000). */
  maxDelayMs?: number;
  /** A stream with no byte for this long is dead, in ms (default 45,000: three keep-alives). */
  idleTimeoutMs?: number;
  /** Longest wait for the answer's headers, in ms (default: the client's `timeoutMs`). */
  connectTimeoutMs?: number;
  /** Bound on one event's size, in characters (default 32 Mi). */
  maxEventSize?: number;
  /** Told of each failure before the stream tries again (logging, metrics). */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
  /**
   * Events: most members kept in `members` (default 100,000); past it new
   * members are not kept and `truncated` says so. The items are yielded
   * all the same.
   */
  maxMembers?: number;
}

interface Resolved {
  maxRetries: number;
  minDelayMs: number;
  maxDelayMs: number;
  idleTimeoutMs: number;
  connectTimeoutMs: number;
  maxEventSize: number;
}

function positive(v: number | undefined, dflt: number, what: string, allowZero = false): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || Number.isNaN(v) || v < 0 || (!allowZero && v === 0)) {
    throw new RangeError(`herenow: ${what} must be a ${allowZero ? "non-negative" : "positive"} number, got ${String(v)}`);
  }
  return v;
}

/** Where a stream's request goes. */
interface Endpoint {
  method: "GET" | "POST";
  path: string;
  body?: unknown;
}

/** The failures a stream gives up on at once: the request itself is refused. */
function isFatal(e: unknown): boolean {
  return e instanceof HerenowError && e.status !== null && e.status >= 400 && e.status < 500 && e.status !== 429 && e.status !== 408;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** The common machinery: open, read, convert, reconnect. */
abstract class ResumableStream<T> implements AsyncIterable<T> {
  /** Connections opened so far (the first included). */
  connections = 0;
  private readonly opts: Resolved;
  private readonly stop = new AbortController();
  private readonly onRetry: StreamOptions["onRetry"];
  private iterating = false;
  /** Whether an item was read: a later connection's first picture then replaces it. */
  private delivered = false;

  constructor(
    private readonly transport: Transport,
    private readonly endpoint: Endpoint,
    options: StreamOptions,
  ) {
    this.opts = {
      maxRetries: positive(options.maxRetries, Infinity, "maxRetries", true),
      minDelayMs: positive(options.minDelayMs, 500, "minDelayMs"),
      maxDelayMs: positive(options.maxDelayMs, 30_000, "maxDelayMs"),
      idleTimeoutMs: positive(options.idleTimeoutMs, 45_000, "idleTimeoutMs"),
      connectTimeoutMs: positive(options.connectTimeoutMs, transport.timeoutMs, "connectTimeoutMs"),
      maxEventSize: positive(options.maxEventSize, DEFAULT_MAX_EVENT_SIZE, "maxEventSize"),
    };
    this.onRetry = options.onRetry;
    const outer = options.signal;
    if (outer) {
      if (outer.aborted) this.stop.abort();
      else outer.addEventListener("abort", () => this.close(), { once: true });
    }
  }

  /** Ends the stream: a pending `next()` resolves with `done`. */
  close(): void {
    this.stop.abort();
  }

  /** Whether {@link close} was called (or the caller's signal aborted). */
  get closed(): boolean {
    return this.stop.signal.aborted;
  }

  /** Converts one wire message; `undefined` skips it. `error` events throw to reconnect. */
  protected abstract convert(message: SseMessage, fresh: boolean): T | undefined;

  /** Called as each connection opens; `fresh` once an earlier connection delivered items. */
  protected opened(_fresh: boolean): void {}

  /** Updates the kept picture with an item about to be yielded. */
  protected abstract apply(item: T): void;

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.iterating) throw new TypeError("herenow: a stream can be iterated once");
    this.iterating = true;
    return this.run();
  }

  private async *run(): AsyncGenerator<T, void, undefined> {
    let failures = 0;
    try {
      while (!this.closed) {
        const fresh = this.delivered;
        let error: unknown;
        try {
          for await (const item of this.connect(fresh)) {
            failures = 0;
            this.delivered = true;
            this.apply(item);
            yield item;
          }
        } catch (e) {
          error = e;
        }
        if (this.closed) return;
        if (error !== undefined && isFatal(error)) throw error;
        failures += 1;
        const cause = error ?? new HerenowError({ code: "connection-failed", status: null, detail: "the server ended the stream", method: this.endpoint.method, path: this.endpoint.path });
        if (failures > this.opts.maxRetries) throw cause;
        const cap = Math.min(this.opts.maxDelayMs, this.opts.minDelayMs * 2 ** Math.min(failures - 1, 30));
        let delay = Math.random() * cap;
        const retryAfter = cause instanceof HerenowError ? cause.retryAfter : null;
        if (retryAfter !== null) delay = Math.max(delay, retryAfter * 1000);
        this.onRetry?.(cause, failures, delay);
        await pause(delay, this.stop.signal);
      }
    } finally {
      this.stop.abort();
    }
  }

  /** One connection: its items, until it ends or fails. */
  private async *connect(fresh: boolean): AsyncGenerator<T, void, undefined> {
    const { method, path, body } = this.endpoint;
    const deadline = new Deadline(this.stop.signal, this.opts.connectTimeoutMs);
    this.connections += 1;
    let res: Response;
    try {
      res = await this.transport.send({ method, path, body, accept: "text/event-stream" }, deadline);
      if (!res.ok) {
        let text = "";
        try {
          text = await res.text();
        } catch {
          // the status says enough
        }
        throw errorFromBody(res, text, { method, path });
      }
      if (!res.body) {
        throw new HerenowError({ code: "bad-response", status: res.status, detail: "the event stream has no body", method, path });
      }
    } finally {
      // The connect timeout covers the answer's headers only; the idle
      // timer below watches the body.
      deadline.dispose();
    }
    this.opened(fresh);
    // Ends this connection: when it goes quiet for too long, or when the
    // stream is closed, even while the consumer is not reading.
    const conn = new AbortController();
    let idle = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = setTimeout(() => {
        idle = true;
        conn.abort();
      }, this.opts.idleTimeoutMs);
    };
    const onStop = () => {
      if (timer !== undefined) clearTimeout(timer);
      conn.abort();
    };
    this.stop.signal.addEventListener("abort", onStop, { once: true });
    arm();
    const quiet = () =>
      new HerenowError({ code: "request-timeout", status: null, detail: `no byte for ${this.opts.idleTimeoutMs} ms on the event stream`, method, path });
    try {
      for await (const message of readSse(res.body, this.opts.maxEventSize, arm, conn.signal)) {
        const item = this.convert(message, fresh);
        if (item !== undefined) yield item;
      }
      if (idle) throw quiet();
    } catch (e) {
      if (this.closed) return;
      if (idle) throw quiet();
      if (e instanceof HerenowError) throw e;
      throw new HerenowError({ code: "connection-failed", status: null, detail: `the event stream broke: ${String((e as Error)?.message ?? e)}`, method, path, cause: e });
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      this.stop.signal.removeEventListener("abort", onStop);
      conn.abort();
    }
  }
}

function parse(message: SseMessage, path: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(message.data);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new HerenowError({ code: "bad-response", status: null, detail: `a ${message.event} event's data is not a JSON object`, method: "GET", path });
}

const PRESENCE_TYPES = new Set(["join", "away", "back", "leave", "update", "connect", "disconnect"]);

/** The key of a member in {@link EventStream.members}: `kind:id`. */
export function memberKey(m: { kind: string; id: string }): string {
  return `${m.kind}:${m.id}`;
}

/**
 * A space's presence, live: `snapshot`, then `join` / `away` / `back` /
 * `leave` / `update` / `connect` / `disconnect`; `lagged` and a resync
 * `snapshot` when the reader fell behind; a resync `snapshot` after a
 * reconnect. Iterate it with `for await`; `close()` (or the `signal`) ends it.
 */
export class EventStream extends ResumableStream<SpaceEvent> {
  /** The members present, by `kind:id`, as of the last item read (at most `maxMembers`). */
  members = new Map<string, MemberStatus>();
  /** Whether a snapshot has been read, and no `lagged` since. */
  synced = false;
  /** Whether present members are missing from `members`: the snapshot's `omitted`, or `maxMembers` reached. */
  truncated = false;
  private readonly maxMembers: number;

  constructor(
    transport: Transport,
    readonly space: string,
    path: string,
    options: StreamOptions = {},
  ) {
    super(transport, { method: "GET", path }, options);
    const max = options.maxMembers ?? 100_000;
    if (typeof max !== "number" || !(max >= 0)) throw new RangeError(`herenow: maxMembers must be a non-negative number, got ${String(max)}`);
    this.maxMembers = max;
  }

  protected convert(message: SseMessage, fresh: boolean): SpaceEvent | undefined {
    const path = `/v1/spaces/${this.space}/events`;
    if (message.event === "snapshot") {
      const d = parse(message, path);
      return {
        type: "snapshot",
        space: String(d.space),
        members: (d.members as MemberStatus[] | undefined) ?? [],
        omitted: typeof d.omitted === "number" ? d.omitted : 0,
        config: d.config as SpaceConfig,
        resync: d.resync === true || fresh,
      };
    }
    if (message.event === "lagged") {
      const d = parse(message, path);
      return { type: "lagged", missed: typeof d.missed === "number" ? d.missed : 0 };
    }
    if (PRESENCE_TYPES.has(message.event)) {
      const d = parse(message, path);
      return { ...(d as unknown as PresenceEvent), type: message.event as PresenceEvent["type"] };
    }
    return undefined; // an event type this client does not know yet
  }

  protected apply(item: SpaceEvent): void {
    switch (item.type) {
      case "snapshot":
        this.members = new Map(item.members.slice(0, this.maxMembers).map((m) => [memberKey(m), m]));
        this.truncated = item.omitted > 0 || item.members.length > this.maxMembers;
        this.synced = true;
        break;
      case "lagged":
        this.synced = false;
        break;
      case "leave":
        this.members.delete(memberKey(item));
        break;
      default: {
        const key = memberKey(item);
        const old = this.members.get(key);
        if (!old && this.members.size >= this.maxMembers) {
          this.truncated = true;
          break;
        }
        const m: MemberStatus = {
          id: item.id,
          kind: item.kind,
          status: item.status,
          last_seen_ms: item.last_seen_ms,
        };
        // A connection's event carries that connection's metadata, not the member's.
        const meta = item.conn === undefined && item.type !== "disconnect" ? item.meta : old?.meta;
        if (meta !== undefined) m.meta = meta;
        this.members.set(key, m);
      }
    }
  }
}

/**
 * Users' status, live, wherever they are (or in one space): `watching`
 * pages, then `status` whenever a watched user goes online, away, back or
 * offline, `unwatched` when followed friends leave the set. Iterate it with
 * `for await`; `close()` (or the `signal`) ends it.
 */
export class WatchStream extends ResumableStream<WatchEvent> {
  /** The watched users, by id, as of the last item read. */
  users = new Map<string, WatchedUser>();
  /** Whether the latest full picture is complete. */
  synced = false;
  private pending: Map<string, WatchedUser> | null = null;
  private replacing = false;

  constructor(transport: Transport, options: StreamOptions, body: unknown) {
    super(transport, { method: "POST", path: "/v1/watch", body }, options);
  }

  protected override opened(fresh: boolean): void {
    // A new connection's first answer is a whole new picture.
    this.replacing = fresh;
  }

  protected convert(message: SseMessage): WatchEvent | undefined {
    const path = "/v1/watch";
    switch (message.event) {
      case "watching": {
        const d = parse(message, path);
        const last = d.last === true;
        const resync = d.resync === true || this.replacing;
        if (last) this.replacing = false;
        return {
          type: "watching",
          space: typeof d.space === "string" ? d.space : null,
          users: (d.users as WatchedUser[] | undefined) ?? [],
          last,
          resync,
        } satisfies WatchingEvent;
      }
      case "status": {
        const d = parse(message, path);
        return { ...(d as unknown as WatchedUser), type: "status" } satisfies StatusEvent;
      }
      case "unwatched": {
        const d = parse(message, path);
        return { type: "unwatched", users: (d.users as string[] | undefined) ?? [] } satisfies UnwatchedEvent;
      }
      case "error": {
        // The store failed mid-stream and the server ended it: reconnect
        // for a fresh picture.
        const d = parse(message, path);
        throw new HerenowError({
          code: typeof d.code === "string" ? d.code : "store-unavailable",
          status: null,
          detail: typeof d.detail === "string" ? d.detail : "the watch stream failed",
          method: "POST",
          path,
        });
      }
      default:
        return undefined;
    }
  }

  protected apply(item: WatchEvent): void {
    switch (item.type) {
      case "watching":
        if (item.resync) {
          if (!this.pending) this.pending = new Map();
          for (const u of item.users) this.pending.set(u.id, u);
          if (!item.last) return;
          this.users = this.pending;
          this.pending = null;
        } else {
          for (const u of item.users) this.users.set(u.id, u);
        }
        if (item.last) this.synced = true;
        break;
      case "status": {
        const { type: _type, ...user } = item;
        this.users.set(user.id, user);
        this.pending?.set(user.id, user);
        break;
      }
      case "unwatched":
        for (const id of item.users) {
          this.users.delete(id);
          this.pending?.delete(id);
        }
        break;
    }
  }
}
