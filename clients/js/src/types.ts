/**
 * The shapes of herenow's HTTP API (docs/API.md), as the server sends and
 * takes them: field names are the API's own (`last_seen_ms`, `next_cursor`),
 * so what you read here is what docs/API.md and `/openapi.json` say.
 *
 * @module
 */

/** A registered user, or an anonymous visitor: two separate namespaces. */
export type Kind = "user" | "guest";

/** By the space's thresholds: seen within `online_ms`, within `away_ms`, or not. */
export type PresenceStatus = "online" | "away" | "offline";

/** A member's metadata: a JSON object of at most 1 KiB. */
export type Meta = { [key: string]: unknown };

/**
 * A member named in a request: an id (a user by default), or `{id, kind}`.
 * Ids are 1 to 256 bytes of UTF-8 without control characters.
 */
export type MemberRef = string | { id: string; kind?: Kind };

/** One heartbeat: "this member is here now". */
export interface HeartbeatInput {
  /** The member's id. */
  id: string;
  /** `user` (default) or `guest`. */
  kind?: Kind;
  /** Metadata to store with the member (replaces what it had). */
  meta?: Meta;
  /**
   * When it was seen, ms since the UNIX epoch, for imports (needs a write
   * key; at most 60 s in the future). Default: the server's now.
   */
  at_ms?: number;
}

/** The answer to a heartbeat or a batch of them. */
export interface HeartbeatReport {
  /** Heartbeats recorded. */
  accepted: number;
  /** Of those, members that were not present before (they joined). */
  joined: number;
  /** Heartbeats older than what the member already had (kept the newer). */
  stale: number;
}

/** A member's presence in a space. */
export interface MemberStatus {
  id: string;
  kind: Kind;
  status: PresenceStatus;
  /**
   * The last heartbeat of a present member, the remembered time after its
   * presence ended (with `status: "offline"`), or `null` when never seen,
   * erased or past the space's `remember_ms`.
   */
  last_seen_ms: number | null;
  /** The member's metadata, when it has some. */
  meta?: Meta;
}

/** Members listed in `order`: `recent` (most recently seen first) or `id`. */
export type Order = "recent" | "id";

/** Which members a listing covers. */
export type KindFilter = "users" | "guests" | "all";

/**
 * A duration: a humantime string with a unit (`"10m"`, `"90s"`, `"1500ms"`,
 * `"1h"`), or a number of milliseconds.
 */
export type Duration = string | number;

/** One page of who's online. */
export interface OnlinePage {
  /** Members seen within the window, in the order asked for. */
  members: MemberStatus[];
  /** Pass back as `cursor` for the next page; `null` on the last page. */
  next_cursor: string | null;
  /** The window used, in ms: the one asked for, or the space's. */
  window_ms: number;
  /**
   * The order of `members`: the one asked for, or the store's default when
   * none was (`"id"` on a store that keeps no last-seen times).
   */
  order: Order;
}

/** How many users and guests were seen within a window. */
export interface Counts {
  users: number;
  guests: number;
  total: number;
  /** The window used, in ms. */
  window_ms: number;
}

/** A user's last seen over every space: what a contact list shows. */
export interface SeenAnywhere {
  id: string;
  /** The best over the spaces the user is present in; `offline` when present nowhere. */
  status: PresenceStatus;
  /** The newest last-seen time over every space, or `null` when never seen. */
  last_seen_ms: number | null;
  /** The space `last_seen_ms` is from, or `null`. */
  space: string | null;
}

/** What erasing a user removed. */
export interface ErasureReport {
  /** Spaces the user was present in. */
  presence: number;
  /** Remembered last-seen times forgotten. */
  remembered: number;
  /** Whether it had a friend set. */
  friend_set: boolean;
  /** Other users' friend sets it was removed from. */
  listed_by: number;
}

/**
 * A space's time policy, in ms: `0 < online ≤ away ≤ retention ≤ 24h` and
 * `0 < window ≤ retention`.
 */
export interface SpaceConfig {
  /** `online` while the last heartbeat is younger than this. */
  online_ms: number;
  /** `away` while younger than this; `offline` after. */
  away_ms: number;
  /** The default window of "who's online". */
  window_ms: number;
  /** How long a member stays present after its last heartbeat. */
  retention_ms: number;
  /** How long a last-seen time is remembered after presence ends; `0`: not at all. */
  remember_ms: number;
  /** Whether guests are remembered too. */
  remember_guests: boolean;
  /**
   * How long a member whose last live connection ended without a goodbye
   * (a page reload, a dropped network, its server stopping) stays present:
   * a connection of the same user back within it shows nobody anything.
   * `0`: none; at most 300,000.
   */
  grace_ms: number;
  /**
   * The space's own webhook endpoints (at most 8), shown to callers that may
   * write; absent for a read key or a store that keeps none.
   */
  webhooks?: SpaceWebhook[];
}

/** The kinds of events a webhook endpoint may want. */
export type WebhookEvent = "join" | "away" | "back" | "leave" | "update" | "occupied" | "vacated";

/** A webhook endpoint a space names. */
export interface SpaceWebhook {
  /** `http` or `https` URL, at most 2,048 bytes, once per space. */
  url: string;
  /** Kinds wanted, each once; absent in a write: all. */
  events?: WebhookEvent[];
  /** `whsec_…` signing secret; write-only (never in answers); absent: the server's `--webhook-secret`. */
  secret?: string;
  /** Its name in `/v1/webhooks` and metrics (`space:HOST:HASH`); ignored in a write. */
  name?: string;
}

/**
 * A new policy: the four thresholds, and optionally the remembering fields,
 * the grace and `webhooks` (absent: unchanged; `[]`: none).
 */
export type SpaceConfigInput = Pick<SpaceConfig, "online_ms" | "away_ms" | "window_ms" | "retention_ms"> &
  Partial<Pick<SpaceConfig, "remember_ms" | "remember_guests" | "grace_ms" | "webhooks">>;

/** A space that holds members, and how many. */
export interface SpaceSummary {
  space: string;
  members: { users: number; guests: number };
}

/** One sample of a space's online count. */
export interface HistorySample {
  at_ms: number;
  users: number;
  guests: number;
}

/** A space's online count over time, oldest first. */
export interface History {
  interval_ms: number;
  samples: HistorySample[];
}

/** Whom a WebSocket token's socket may watch. */
export type WatchGrant = "friends" | "any" | "none";

/** What to mint a WebSocket token for (`POST /v1/tokens`). */
export interface TokenRequest {
  /** The member id the token is for. */
  user: string;
  /** `user` (default) or `guest`. */
  kind?: Kind;
  /** 1 to 32 space names, or `["*"]` for every space. */
  spaces: string[];
  /** Lifetime in seconds, 1 to 86,400 (default 3,600). */
  ttl_s?: number;
  /** Whom its socket may watch (default `friends`). */
  watch?: WatchGrant;
}

/** A minted token. */
export interface Token {
  /** An HS256 JWT for `/v1/ws` (docs/PROTOCOL.md). */
  token: string;
  /** When it expires, ms since the UNIX epoch. */
  expires_at_ms: number;
}

// ---- Server-Sent Events: GET /v1/spaces/{space}/events ----------------------

/** Why a member left. */
export type LeaveReason = "explicit" | "timeout" | "expired";

/** A change to a space's presence. */
export interface PresenceEvent {
  type: "join" | "away" | "back" | "leave" | "update" | "connect" | "disconnect";
  space: string;
  id: string;
  kind: Kind;
  /** The member's status after the event. */
  status: PresenceStatus;
  last_seen_ms: number | null;
  /** The member's metadata, or the connection's for a connection's event. */
  meta?: Meta;
  /** On `leave`: why. */
  reason?: LeaveReason;
  /** The WebSocket connection that caused it, if one did. */
  conn?: string;
}

/**
 * The members present in a space when the stream (re)started. It replaces
 * whatever the reader knew: after a `lagged` notice, and after the client
 * reconnected a dropped stream, it says `resync: true`.
 */
export interface SnapshotEvent {
  type: "snapshot";
  space: string;
  members: MemberStatus[];
  /** Present members beyond the snapshot's limit (10,000). */
  omitted: number;
  config: SpaceConfig;
  /** `true` when it replaces an earlier picture (lag, or a reconnect). */
  resync: boolean;
}

/** The reader fell behind; a fresh `snapshot` (with `resync: true`) follows. */
export interface LaggedEvent {
  type: "lagged";
  missed: number;
}

/** What a space's event stream yields. */
export type SpaceEvent = SnapshotEvent | LaggedEvent | PresenceEvent;

// ---- Server-Sent Events: POST /v1/watch -------------------------------------

/** What to watch: user ids, a user's friend set (followed as it changes), or both. */
export interface WatchRequest {
  /** At most 5,000 user ids. */
  users?: string[];
  /** Watch this user's friends, following the set as it changes. */
  friends_of?: string;
  /** Status within this space; absent: anywhere (online if online in any space). */
  space?: string;
}

/** A watched user's state. */
export interface WatchedUser {
  id: string;
  status: PresenceStatus;
  /** The last heartbeat while present, the remembered time after, or `null`. */
  last_seen_ms: number | null;
  /** Watching anywhere: the space of `last_seen_ms`, when known. */
  space?: string;
}

/**
 * A page of watched users' states. Pages with `resync: true` replace
 * everything the reader knew once the page with `last: true` is in (after
 * lag, and after the client reconnected a dropped stream); other pages add
 * users.
 */
export interface WatchingEvent {
  type: "watching";
  /** The space watched in; `null`: anywhere. */
  space: string | null;
  users: WatchedUser[];
  last: boolean;
  resync: boolean;
}

/** A watched user's status changed (online, away, back, offline). */
export interface StatusEvent extends WatchedUser {
  type: "status";
}

/** Users no longer watched (they left the followed friend set). */
export interface UnwatchedEvent {
  type: "unwatched";
  users: string[];
}

/** What a watch stream yields. */
export type WatchEvent = WatchingEvent | StatusEvent | UnwatchedEvent;

/** A webhook endpoint's state: its last request succeeded, fewer than five failures in a row, or five or more (or its last batch given up). */
export type EndpointHealth = "ok" | "retrying" | "failing";

/** One webhook endpoint in `GET /v1/webhooks`; its secret is never shown, a URL's password or query reads `***`. */
export interface WebhookEndpoint {
  name: string;
  url: string;
  /** The event types it wants. */
  events: string[];
  /** The glob its spaces must match; `null`: every space. */
  spaces: string | null;
  state: EndpointHealth;
  /** Events waiting for it on this server, and how many it may hold (more are dropped as `overflow`). */
  queue: { depth: number; limit: number };
  /** Events delivered (answered 2xx). */
  delivered: number;
  /** Requests sent again after a failure. */
  retried: number;
  /** Requests that failed (timeouts, connection errors, non-2xx). */
  failed: number;
  /** Events it will never get, by reason. */
  dropped: { overflow: number; rejected: number; expired: number };
  failures_in_row: number;
  last_success_ms: number | null;
  /** The last failed request, or `null`. */
  last_error: { at_ms: number; error: string } | null;
}

/** `GET /v1/webhooks`: each endpoint on the server asked, and the store's outbox; `enabled: false` without webhooks. */
export interface WebhooksState {
  enabled: boolean;
  /** This server's name in the outbox; `null` without webhooks. */
  consumer: string | null;
  endpoints: WebhookEndpoint[];
  /** Events kept until every endpoint finished them, of which claimed by a server, and those the cap trimmed; `null` without webhooks. */
  outbox: { depth: number; pending: number; trimmed: number } | null;
}
