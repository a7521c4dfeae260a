/**
 * {@link Herenow}: one method per endpoint of herenow's HTTP API
 * (docs/API.md), typed answers, and the two event streams.
 *
 * @module
 */

import { HerenowError } from "./errors.js";
import { type CallOptions, type ClientOptions, type Query, segment, Transport } from "./http.js";
import { EventStream, type StreamOptions, WatchStream } from "./streams.js";
import type {
  Counts,
  Duration,
  ErasureReport,
  HeartbeatInput,
  HeartbeatReport,
  History,
  Kind,
  KindFilter,
  MemberRef,
  MemberStatus,
  OnlinePage,
  Order,
  SeenAnywhere,
  SpaceConfig,
  SpaceConfigInput,
  SpaceSummary,
  Token,
  TokenRequest,
  WatchRequest,
  WebhooksState,
} from "./types.js";

/** Options of {@link Herenow.online}. */
export interface OnlineOptions extends CallOptions {
  /** Seen within this (default: the space's window). */
  window?: Duration;
  /** `users` (default), `guests` or `all`. */
  kind?: KindFilter;
  /** `recent` (most recently seen first) or `id`; default: the store's, named by the page's `order`. */
  order?: Order;
  /** Page size, 1 to 1,000 (default 100). */
  limit?: number;
  /** The previous page's `next_cursor`, unchanged (same query otherwise). */
  cursor?: string;
}

/** Options of the queries that take a window and a limit. */
export interface WindowLimitOptions extends CallOptions {
  /** Seen within this (default: the space's window). */
  window?: Duration;
  /** Most members answered, 1 to 1,000 (default 100). */
  limit?: number;
}

/**
 * A client for one herenow server. Cheap to keep: make one per process and
 * share it (connections are pooled by `fetch`).
 *
 * ```ts
 * const herenow = new Herenow({ baseUrl: "http://127.0.0.1:7700", apiKey: process.env.HERENOW_KEY });
 * await herenow.heartbeat("lobby", { id: "ada", meta: { name: "Ada" } });
 * const { members } = await herenow.online("lobby", { window: "5m" });
 * ```
 *
 * Every call answers a promise (it never throws synchronously): it rejects
 * with a {@link HerenowError} for what the server refused or could not
 * answer, and with a `TypeError` / `RangeError` for arguments that cannot
 * even be sent (an empty space name, a member that is not a string or
 * `{id}`, a negative duration). `events()` and `watch()` answer their
 * stream at once and throw such argument errors synchronously.
 */
export class Herenow {
  /** The transport (base URL, key, timeout) the calls share. */
  readonly transport: Transport;

  constructor(options: ClientOptions = {}) {
    this.transport = new Transport(options);
  }

  /** The server's base URL, without a trailing slash. */
  get baseUrl(): string {
    return this.transport.baseUrl;
  }

  // ---- heartbeats and leaves --------------------------------------------

  /** Records one heartbeat: the member is here now (`POST /v1/spaces/{space}/heartbeat`). */
  async heartbeat(space: string, member: string | HeartbeatInput, options: CallOptions = {}): Promise<HeartbeatReport> {
    return this.call("POST", `${spacePath(space)}/heartbeat`, options, { body: heartbeatBody(member, "member") });
  }

  /** Records up to 10,000 heartbeats at once (`POST /v1/spaces/{space}/heartbeats`). */
  async heartbeats(space: string, beats: ReadonlyArray<string | HeartbeatInput>, options: CallOptions = {}): Promise<HeartbeatReport> {
    const list = array(beats, "beats").map((b, i) => heartbeatBody(b, `beats[${i}]`));
    return this.call("POST", `${spacePath(space)}/heartbeats`, options, { body: { heartbeats: list } });
  }

  /**
   * Members leave the space at once (their last seen is remembered);
   * answers how many of them were present (`POST /v1/spaces/{space}/leave`).
   */
  async leave(space: string, members: MemberRef | ReadonlyArray<MemberRef>, options: CallOptions = {}): Promise<number> {
    const list = (Array.isArray(members) ? members : [members]) as ReadonlyArray<MemberRef>;
    const answer = await this.call<{ left: number }>("POST", `${spacePath(space)}/leave`, options, {
      body: { members: refs(list, "members") },
    });
    return answer.left;
  }

  // ---- status and last seen ---------------------------------------------

  /**
   * One member's status and last seen (`GET /v1/spaces/{space}/members/{id}`).
   * A member never seen answers `offline` with `last_seen_ms: null`.
   */
  async member(space: string, id: string, options: CallOptions & { kind?: Kind } = {}): Promise<MemberStatus> {
    const { kind, ...call } = options;
    if (id === "." || id === "..") {
      // No URL can carry these ids as a path segment; the batch can.
      const [one] = await this.status(space, [{ id, kind: kind ?? "user" }], call);
      return one as MemberStatus;
    }
    return this.call("GET", `${spacePath(space)}/members/${segment(id, "id")}`, call, { query: { kind } });
  }

  /** Many members' status and last seen, in the order asked (`POST /v1/spaces/{space}/status`). */
  async status(space: string, members: ReadonlyArray<MemberRef>, options: CallOptions = {}): Promise<MemberStatus[]> {
    const answer = await this.call<{ members: MemberStatus[] }>("POST", `${spacePath(space)}/status`, options, {
      body: { members: refs(members, "members") },
    });
    return answer.members;
  }

  // ---- users: last seen anywhere, erasure --------------------------------

  /** A user's last seen over every space, and where (`GET /v1/users/{id}`). */
  async user(id: string, options: CallOptions = {}): Promise<SeenAnywhere> {
    if (id === "." || id === "..") {
      const [one] = await this.usersStatus([id], options);
      return one as SeenAnywhere;
    }
    return this.call("GET", `/v1/users/${segment(id, "id")}`, options);
  }

  /** Up to 10,000 users' last seen anywhere, in the order asked (`POST /v1/users/status`). */
  async usersStatus(ids: ReadonlyArray<string>, options: CallOptions = {}): Promise<SeenAnywhere[]> {
    const answer = await this.call<{ users: SeenAnywhere[] }>("POST", "/v1/users/status", options, {
      body: { ids: strings(ids, "ids") },
    });
    return answer.users;
  }

  /**
   * Forgets a user everywhere: presence, remembered times, its friend set
   * and its place in others' (`DELETE /v1/users/{id}`, write scope). An
   * unknown user is not an error: all zeros.
   */
  async eraseUser(id: string, options: CallOptions = {}): Promise<ErasureReport> {
    return this.call("DELETE", `/v1/users/${segment(id, "id")}`, options);
  }

  // ---- who's online ---------------------------------------------------------

  /** One page of the members seen within the window (`GET /v1/spaces/{space}/online`). */
  async online(space: string, options: OnlineOptions = {}): Promise<OnlinePage> {
    const { window, kind, order, limit, cursor, ...call } = options;
    return this.call("GET", `${spacePath(space)}/online`, call, {
      query: { window: duration(window, "window"), kind, order, limit, cursor },
    });
  }

  /**
   * Every member seen within the window, page after page (following
   * `next_cursor`), one at a time. Paging never skips or repeats a member
   * whose heartbeat did not change meanwhile.
   */
  async *onlineAll(space: string, options: Omit<OnlineOptions, "cursor"> = {}): AsyncGenerator<MemberStatus, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.online(space, { ...options, cursor });
      yield* page.members;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** How many users and guests were seen within the window (`GET /v1/spaces/{space}/count`). */
  async count(space: string, options: CallOptions & { window?: Duration } = {}): Promise<Counts> {
    const { window, ...call } = options;
    return this.call("GET", `${spacePath(space)}/count`, call, { query: { window: duration(window, "window") } });
  }

  /** Of an ad-hoc list, those seen within the window, most recent first (`POST /v1/spaces/{space}/online-among`). */
  async onlineAmong(space: string, members: ReadonlyArray<MemberRef>, options: WindowLimitOptions = {}): Promise<MemberStatus[]> {
    const { window, limit, ...call } = options;
    const body: Record<string, unknown> = { members: refs(members, "members") };
    const w = duration(window, "window");
    if (w !== undefined) body.window = w;
    if (limit !== undefined) body.limit = limit;
    const answer = await this.call<{ members: MemberStatus[] }>("POST", `${spacePath(space)}/online-among`, call, { body });
    return answer.members;
  }

  // ---- friends --------------------------------------------------------------

  /** Replaces a user's friend set (an empty list clears it); answers its size (`PUT /v1/friends/{user}`). */
  async setFriends(user: string, friends: ReadonlyArray<string>, options: CallOptions = {}): Promise<number> {
    const answer = await this.call<{ friends: number }>("PUT", `/v1/friends/${segment(user, "user")}`, options, {
      body: { friends: strings(friends, "friends") },
    });
    return answer.friends;
  }

  /** Adds to a user's friend set; answers its size (`POST /v1/friends/{user}/add`). */
  async addFriends(user: string, friends: ReadonlyArray<string>, options: CallOptions = {}): Promise<number> {
    const answer = await this.call<{ friends: number }>("POST", `/v1/friends/${segment(user, "user")}/add`, options, {
      body: { friends: strings(friends, "friends") },
    });
    return answer.friends;
  }

  /** Removes from a user's friend set; answers its size (`POST /v1/friends/{user}/remove`). */
  async removeFriends(user: string, friends: ReadonlyArray<string>, options: CallOptions = {}): Promise<number> {
    const answer = await this.call<{ friends: number }>("POST", `/v1/friends/${segment(user, "user")}/remove`, options, {
      body: { friends: strings(friends, "friends") },
    });
    return answer.friends;
  }

  /** A user's friend set (`GET /v1/friends/{user}`). */
  async friends(user: string, options: CallOptions = {}): Promise<string[]> {
    const answer = await this.call<{ user: string; friends: string[] }>("GET", `/v1/friends/${segment(user, "user")}`, options);
    return answer.friends;
  }

  /** A user's friends seen in the space within the window, most recent first (`GET /v1/spaces/{space}/friends/{user}/online`). */
  async onlineFriends(space: string, user: string, options: WindowLimitOptions = {}): Promise<MemberStatus[]> {
    const { window, limit, ...call } = options;
    const answer = await this.call<{ members: MemberStatus[] }>(
      "GET",
      `${spacePath(space)}/friends/${segment(user, "user")}/online`,
      call,
      { query: { window: duration(window, "window"), limit } },
    );
    return answer.members;
  }

  // ---- spaces ---------------------------------------------------------------

  /** A space's time policy (`GET /v1/spaces/{space}/config`). */
  async config(space: string, options: CallOptions = {}): Promise<SpaceConfig> {
    return this.call("GET", `${spacePath(space)}/config`, options);
  }

  /** Sets a space's time policy; answers the new one (`PUT /v1/spaces/{space}/config`). */
  async setConfig(space: string, config: SpaceConfigInput, options: CallOptions = {}): Promise<SpaceConfig> {
    if (typeof config !== "object" || config === null) throw new TypeError("herenow: config must be an object");
    const body: Record<string, unknown> = {
      online_ms: config.online_ms,
      away_ms: config.away_ms,
      window_ms: config.window_ms,
      retention_ms: config.retention_ms,
    };
    if (config.remember_ms !== undefined) body.remember_ms = config.remember_ms;
    if (config.remember_guests !== undefined) body.remember_guests = config.remember_guests;
    if (config.grace_ms !== undefined) body.grace_ms = config.grace_ms;
    return this.call("PUT", `${spacePath(space)}/config`, options, { body });
  }

  /** Spaces holding members, by name, after `after` (`GET /v1/spaces`). */
  async spaces(options: CallOptions & { after?: string; limit?: number } = {}): Promise<SpaceSummary[]> {
    const { after, limit, ...call } = options;
    const answer = await this.call<{ spaces: SpaceSummary[] }>("GET", "/v1/spaces", call, { query: { after, limit } });
    return answer.spaces;
  }

  /** Every space holding members, by name, page after page. */
  async *spacesAll(options: CallOptions & { limit?: number } = {}): AsyncGenerator<SpaceSummary, void, undefined> {
    const limit = options.limit ?? 100;
    let after: string | undefined;
    for (;;) {
      const page = await this.spaces({ ...options, after, limit });
      yield* page;
      const last = page[page.length - 1];
      if (page.length < limit || last === undefined) return;
      after = last.space;
    }
  }

  /** A space's online count, sampled every 10 s, oldest first (`GET /v1/spaces/{space}/history`). */
  async history(space: string, options: CallOptions & { range?: Duration } = {}): Promise<History> {
    const { range, ...call } = options;
    return this.call("GET", `${spacePath(space)}/history`, call, { query: { range: duration(range, "range") } });
  }

  // ---- tokens ---------------------------------------------------------------

  /** Mints a token for the WebSocket protocol and `/client.js` (`POST /v1/tokens`, write scope). */
  async createToken(request: TokenRequest, options: CallOptions = {}): Promise<Token> {
    if (typeof request !== "object" || request === null) throw new TypeError("herenow: the token request must be an object");
    const body: Record<string, unknown> = { user: request.user, spaces: request.spaces };
    if (request.kind !== undefined) body.kind = request.kind;
    if (request.ttl_s !== undefined) body.ttl_s = request.ttl_s;
    if (request.watch !== undefined) body.watch = request.watch;
    return this.call("POST", "/v1/tokens", options, { body });
  }

  // ---- live -----------------------------------------------------------------

  /**
   * A space's presence, live (`GET /v1/spaces/{space}/events`): an async
   * iterable of {@link SpaceEvent}s that reconnects when the stream drops.
   * Nothing is sent until it is iterated.
   */
  events(space: string, options: StreamOptions = {}): EventStream {
    return new EventStream(this.transport, space, `${spacePath(space)}/events`, options);
  }

  /**
   * Users' status, live (`POST /v1/watch`, read scope): an async iterable of
   * {@link WatchEvent}s that reconnects when the stream drops. Nothing is
   * sent until it is iterated.
   */
  watch(request: WatchRequest, options: StreamOptions = {}): WatchStream {
    if (typeof request !== "object" || request === null) throw new TypeError("herenow: the watch request must be an object");
    const body: Record<string, unknown> = {};
    if (request.users !== undefined) body.users = strings(request.users, "users");
    if (request.friends_of !== undefined) body.friends_of = request.friends_of;
    if (request.space !== undefined) body.space = request.space;
    return new WatchStream(this.transport, options, body);
  }

  // ---- operations -----------------------------------------------------------

  /** Whether the process answers (`GET /healthz`); `false` when it cannot be reached. */
  async healthy(options: CallOptions = {}): Promise<boolean> {
    return this.probe("/healthz", options);
  }

  /** Whether the store answers (`GET /readyz`); `false` on `503` or when unreachable. */
  async ready(options: CallOptions = {}): Promise<boolean> {
    return this.probe("/readyz", options);
  }

  /** The webhooks' state on this server (`GET /v1/webhooks`, write scope): each endpoint's queue, counters and last error, and the store's outbox. */
  async webhooks(options: CallOptions = {}): Promise<WebhooksState> {
    return this.call("GET", "/v1/webhooks", options);
  }

  /** Prometheus metrics, as text (`GET /metrics`). */
  async metrics(options: CallOptions = {}): Promise<string> {
    return this.call("GET", "/metrics", options, { text: true });
  }

  /** The server's OpenAPI document (`GET /openapi.json`). */
  async openapi(options: CallOptions = {}): Promise<Record<string, unknown>> {
    return this.call("GET", "/openapi.json", options);
  }

  // ---- internals --------------------------------------------------------------

  private async probe(path: string, options: CallOptions): Promise<boolean> {
    try {
      await this.call("GET", path, options, { text: true });
      return true;
    } catch (e) {
      if (e instanceof HerenowError) return false;
      throw e;
    }
  }

  private call<T>(
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    options: CallOptions,
    extra: { query?: Query; body?: unknown; text?: boolean } = {},
  ): Promise<T> {
    return this.transport.request<T>({ method, path, signal: options.signal, timeoutMs: options.timeoutMs, ...extra });
  }
}

function spacePath(space: string): string {
  return `/v1/spaces/${segment(space, "space")}`;
}

function array<T>(v: ReadonlyArray<T>, what: string): ReadonlyArray<T> {
  if (!Array.isArray(v)) throw new TypeError(`herenow: ${what} must be an array`);
  return v;
}

/** A copy of a list of ids, each checked to be a string (the server checks the rest). */
function strings(v: ReadonlyArray<string>, what: string): string[] {
  array(v, what);
  v.forEach((s, i) => {
    if (typeof s !== "string") throw new TypeError(`herenow: ${what}[${i}] must be a string, got ${typeof s}`);
  });
  return [...v];
}

/** A member reference as the API takes it: `{id, kind?}`, nothing else. */
function ref(m: MemberRef, what: string): { id: string; kind?: Kind } {
  if (typeof m === "string") return { id: m };
  if (typeof m === "object" && m !== null && typeof m.id === "string") {
    return m.kind === undefined ? { id: m.id } : { id: m.id, kind: m.kind };
  }
  throw new TypeError(`herenow: ${what} must be an id or {id, kind}`);
}

function refs(list: ReadonlyArray<MemberRef>, what: string): Array<{ id: string; kind?: Kind }> {
  return array(list, what).map((m, i) => ref(m, `${what}[${i}]`));
}

function heartbeatBody(m: string | HeartbeatInput, what: string): HeartbeatInput {
  if (typeof m === "string") return { id: m };
  const base = ref(m, what) as HeartbeatInput;
  if (m.meta !== undefined) base.meta = m.meta;
  if (m.at_ms !== undefined) base.at_ms = m.at_ms;
  return base;
}

/** A duration for a query string: humantime as given, or ms from a number. */
export function duration(v: Duration | undefined, what: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v === "number") {
    if (!Number.isFinite(v) || v < 0) throw new RangeError(`herenow: ${what} must be a non-negative number of ms, got ${v}`);
    return `${Math.round(v)}ms`;
  }
  if (typeof v !== "string") throw new TypeError(`herenow: ${what} must be a string such as "10m", or a number of ms`);
  return v;
}
