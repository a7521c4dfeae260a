/**
 * herenow-client: a Node client for herenow, the presence server.
 *
 * - {@link Herenow}: every endpoint of the HTTP API (docs/API.md) with typed
 *   answers, and the two live streams ({@link EventStream},
 *   {@link WatchStream}) as async iterators that reconnect.
 * - {@link HerenowError}: the one error type, with the problem's `code`, the
 *   HTTP `status` and `retryAfter` in seconds.
 * - {@link herenowPresence}: Express/Connect middleware that heartbeats each
 *   request's user or guest, debounced, batched, never failing a request
 *   (also at `herenow-client/middleware`).
 * - {@link PresenceView}: queries for rendering pages (who is online, last
 *   seen) that answer "unknown" at once while herenow is failing, behind a
 *   {@link CircuitBreaker} shared per server and process.
 * - {@link WebhookVerifier}, {@link webhookHandler}: receiving herenow's
 *   webhooks, verified (Standard Webhooks) and typed, with a
 *   {@link Deduplicator} (also at `herenow-client/webhooks`, where the
 *   parsed event is `WebhookEvent`; here it is `WebhookBatchEvent`, as
 *   `WebhookEvent` names the event types an endpoint may want).
 * - `herenow-client/browser`: types for the browser client `/client.js`.
 *
 * Runtime dependencies: none (Node 18+, global `fetch`).
 *
 * @module
 */

export { Herenow, duration, type OnlineOptions, type WindowLimitOptions } from "./client.js";
export { HerenowError, parseRetryAfter, type ClientErrorCode, type HerenowErrorInit, type Problem } from "./errors.js";
export { VERSION, type CallOptions, type ClientOptions } from "./http.js";
export { EventStream, WatchStream, memberKey, type StreamOptions } from "./streams.js";
export { SseParser, type SseMessage } from "./sse.js";
export {
  Presence,
  herenowPresence,
  readCookie,
  type CloseReport,
  type GuestCookieOptions,
  type Identity,
  type PresenceLogger,
  type PresenceMiddleware,
  type PresenceOptions,
  type PresenceRequest,
  type PresenceResponse,
  type PresenceStats,
} from "./middleware.js";
export {
  CircuitBreaker,
  PresenceView,
  countsText,
  isOutage,
  seenText,
  sharedBreaker,
  type BreakerLogger,
  type BreakerState,
  type BreakerStats,
  type CircuitBreakerOptions,
  type CountAnswer,
  type FriendsOnline,
  type LastSeen,
  type OnlineFlag,
  type PresenceViewOptions,
  type Unknown,
  type WhosOnline,
} from "./view.js";
export {
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_TOLERANCE_MS,
  Deduplicator,
  SECRET_PREFIX,
  WEBHOOK_BODY_TYPE,
  WebhookError,
  WebhookPayloadError,
  WebhookVerificationError,
  WebhookVerifier,
  isMemberEvent,
  parseWebhookBatch,
  signWebhook,
  webhookHandler,
  type WebhookBatch,
  type WebhookBatchEvent,
  type WebhookBody,
  type WebhookEventType,
  type WebhookHandlerOptions,
  type WebhookHeaders,
  type WebhookLeaveReason,
  type WebhookRequest,
  type WebhookSecret,
  type WebhookVerificationReason,
  type WebhookVerifierOptions,
} from "./webhooks.js";
export { MAX_BATCH, MAX_ID_BYTES, MAX_META_BYTES, MAX_SPACE_BYTES, memberIdProblem, metaProblem, spaceNameProblem } from "./validate.js";
export type {
  Kind,
  PresenceStatus,
  Meta,
  MemberRef,
  HeartbeatInput,
  HeartbeatReport,
  MemberStatus,
  Order,
  KindFilter,
  Duration,
  OnlinePage,
  Counts,
  SeenAnywhere,
  ErasureReport,
  SpaceConfig,
  SpaceConfigInput,
  SpaceWebhook,
  WebhookEvent,
  SpaceSummary,
  HistorySample,
  History,
  WatchGrant,
  TokenRequest,
  Token,
  LeaveReason,
  PresenceEvent,
  SnapshotEvent,
  LaggedEvent,
  SpaceEvent,
  WatchRequest,
  WatchedUser,
  WatchingEvent,
  StatusEvent,
  UnwatchedEvent,
  WatchEvent,
  EndpointHealth,
  WebhookEndpoint,
  WebhooksState,
} from "./types.js";
