/**
 * The one error type the client throws for anything herenow answered, or
 * failed to answer.
 *
 * A herenow server answers every error as RFC 9457 `application/problem+json`
 * with a stable `code` (`bad-member-id`, `store-unavailable`, …); that code,
 * the HTTP status and the `Retry-After` header are what a program should
 * branch on, never the human `detail`. Failures with no problem document
 * (the server could not be reached, the client's own timeout, a proxy's HTML
 * page) get a client-side code from {@link ClientErrorCode}, so one
 * `catch (e) { if (e instanceof HerenowError) … }` covers every case.
 *
 * Programming mistakes in the arguments (a space name that cannot be put in
 * a URL, a negative duration) are thrown as `TypeError` / `RangeError`
 * before anything is sent: they are bugs to fix, not conditions to handle.
 *
 * @module
 */

/** The RFC 9457 problem document herenow answers errors with. */
export interface Problem {
  /** A URI naming the problem type: `https://herenow.dev/problems/` + `code`. */
  type: string;
  /** A short summary of the problem type, for people. */
  title: string;
  /** The HTTP status, repeated. */
  status: number;
  /** What was wrong with this request, for people: never parse it. */
  detail: string;
  /** Stable and machine-readable: branch on this. */
  code: string;
  /** Any other member the server added. */
  [extension: string]: unknown;
}

/**
 * Codes the client gives failures that carry no problem document.
 *
 * - `connection-failed`: the server could not be reached (refused, reset,
 *   DNS); `status` is `null`.
 * - `request-timeout`: no complete answer within the client's `timeoutMs`;
 *   `status` is `null`. (The server's own `timeout` code is a `503`.)
 * - `bad-response`: a `2xx` whose body is not the JSON expected.
 * - `unexpected-status`: an error status without a problem document (a
 *   proxy or load balancer answering for the server).
 * - `stream-too-large`: one Server-Sent Event larger than the stream's
 *   `maxEventBytes`.
 */
export type ClientErrorCode =
  | "connection-failed"
  | "request-timeout"
  | "bad-response"
  | "unexpected-status"
  | "stream-too-large";

/** The fields a {@link HerenowError} is made of. */
export interface HerenowErrorInit {
  /** The problem's `code`, or a {@link ClientErrorCode}. */
  code: string;
  /** The HTTP status, or `null` when no answer came. */
  status: number | null;
  /** Seconds to wait before retrying (`Retry-After`), or `null`. */
  retryAfter?: number | null;
  /** For people. */
  detail: string;
  /** The problem document, when the server sent one. */
  problem?: Problem | null;
  /** The HTTP method and URL path of the request. */
  method?: string;
  path?: string;
  /** The underlying error (a network error, an abort), if any. */
  cause?: unknown;
}

/** An error answered by herenow, or the failure to get an answer. */
export class HerenowError extends Error {
  /** The problem's stable `code`, or a {@link ClientErrorCode}. */
  readonly code: string;
  /** The HTTP status; `null` when the server did not answer. */
  readonly status: number | null;
  /**
   * Seconds to wait before trying again, from `Retry-After` (herenow sends
   * it with every `503` and `429`); `null` when absent.
   */
  readonly retryAfter: number | null;
  /** What was wrong, for people (the problem's `detail`). */
  readonly detail: string;
  /** The whole problem document, when the server sent one. */
  readonly problem: Problem | null;
  /** The request's method (`GET`, `POST`, …), when known. */
  readonly method: string | undefined;
  /** The request's path (`/v1/spaces/lobby/online`), when known. */
  readonly path: string | undefined;

  constructor(init: HerenowErrorInit) {
    const path = init.path && init.path.length > 120 ? `${init.path.slice(0, 120)}…` : init.path;
    const where = init.method && path ? ` (${init.method} ${path})` : "";
    const status = init.status === null ? "" : `${init.status} `;
    super(`herenow: ${status}${init.code}: ${init.detail}${where}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "HerenowError";
    this.code = init.code;
    this.status = init.status;
    this.retryAfter = init.retryAfter ?? null;
    this.detail = init.detail;
    this.problem = init.problem ?? null;
    this.method = init.method;
    this.path = init.path;
  }

  /**
   * Whether the same request may succeed later: the server was unreachable,
   * slow, overloaded or unavailable (`503`, `429`, `502`, `504`, a network
   * failure or the client's timeout). A `4xx` other than `429` will fail the
   * same way again.
   */
  get retryable(): boolean {
    if (this.status === null) {
      return this.code === "connection-failed" || this.code === "request-timeout";
    }
    return this.status === 429 || this.status === 502 || this.status === 503 || this.status === 504;
  }
}

/**
 * Parses a `Retry-After` header: delay-seconds, or an HTTP date (turned
 * into whole seconds from `nowMs`, at least 0). `null` when absent or
 * unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number = Date.now()): number | null {
  if (value === null || value === undefined) return null;
  const v = value.trim();
  if (v === "") return null;
  if (/^\d+$/.test(v)) {
    const n = Number(v);
    return Number.isSafeInteger(n) ? n : null;
  }
  // An HTTP date names its day and month; a bare "1.5" or "-3" would
  // otherwise parse as some year.
  if (!/[A-Za-z]/.test(v)) return null;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/** Whether `body` looks like a herenow problem document. */
export function isProblem(body: unknown): body is Problem {
  return (
    typeof body === "object" &&
    body !== null &&
    typeof (body as Problem).code === "string" &&
    typeof (body as Problem).status === "number"
  );
}
