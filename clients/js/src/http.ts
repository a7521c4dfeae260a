/**
 * The transport under every call: one `fetch` per request, a timeout over
 * the whole exchange (headers and body), the caller's `AbortSignal`, the
 * API key, and errors turned into {@link HerenowError}.
 *
 * Connections are reused: Node's global `fetch` keeps connections alive in
 * its global pool (undici), so calls to one server share sockets. Pass your
 * own `fetch` to use another pool or a proxy.
 *
 * @module
 */

import { HerenowError, isProblem, parseRetryAfter } from "./errors.js";

/** The package's version, sent in `User-Agent`. */
export const VERSION = "0.1.0";

/** How to reach a herenow server. */
export interface ClientOptions {
  /** The server's base URL (default `http://127.0.0.1:7700`). */
  baseUrl?: string | URL;
  /** An API key, sent as `Authorization: Bearer KEY` (needed when the server has keys). */
  apiKey?: string;
  /** Longest a call may take, headers and body, in ms (default 10,000). */
  timeoutMs?: number;
  /** Extra headers for every request. */
  headers?: Record<string, string>;
  /** A `fetch` to use instead of the global one (a proxy, a custom pool, tests). */
  fetch?: typeof globalThis.fetch;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call; it then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** This call's timeout in ms, instead of the client's. */
  timeoutMs?: number;
}

/** Query parameters; `undefined` ones are left out. */
export type Query = Record<string, string | number | undefined>;

/** One request, as the client methods describe it. */
export interface RequestSpec extends CallOptions {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** The path, its segments already encoded with {@link segment}. */
  path: string;
  query?: Query;
  body?: unknown;
  /** Answer as text (operations endpoints) rather than JSON. */
  text?: boolean;
}

const DEFAULT_BASE = "http://127.0.0.1:7700";
const DEFAULT_TIMEOUT_MS = 10_000;
/** An error body is shown to people; more than this of it says nothing more. */
const MAX_DETAIL_CHARS = 300;

/**
 * Encodes one URL path segment. Refuses what cannot be sent as a segment:
 * an empty string (it would name another route) and `.` / `..` (URL
 * parsers resolve them, percent-encoded or not, so the request would reach
 * another endpoint).
 */
export function segment(value: string, what: string): string {
  if (typeof value !== "string") {
    throw new TypeError(`herenow: ${what} must be a string, got ${typeof value}`);
  }
  if (value === "") throw new TypeError(`herenow: ${what} must not be empty`);
  if (value === "." || value === "..") {
    throw new TypeError(`herenow: ${what} ${JSON.stringify(value)} cannot be sent in a URL path`);
  }
  return encodeURIComponent(value);
}

/** Checks a timeout option: a positive, finite number of ms. */
export function checkTimeout(ms: number, what: string): number {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms <= 0) {
    throw new RangeError(`herenow: ${what} must be a positive number of ms, got ${String(ms)}`);
  }
  return ms;
}

/**
 * A signal that aborts when the caller's does or when `timeoutMs` passes,
 * whichever is first. Node 18 has no `AbortSignal.any`, hence by hand.
 */
export class Deadline {
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onAbort: (() => void) | undefined;
  private expired = false;

  constructor(
    private readonly outer: AbortSignal | undefined,
    timeoutMs: number | null,
  ) {
    this.signal = this.controller.signal;
    if (timeoutMs !== null) {
      this.timer = setTimeout(() => {
        this.expired = true;
        this.controller.abort(new HerenowError({ code: "request-timeout", status: null, detail: `no answer within ${timeoutMs} ms` }));
      }, timeoutMs);
    }
    if (outer) {
      if (outer.aborted) {
        this.controller.abort(outer.reason);
      } else {
        this.onAbort = () => this.controller.abort(outer.reason);
        outer.addEventListener("abort", this.onAbort, { once: true });
      }
    }
  }

  /** Whether the timeout (not the caller) ended the request. */
  get timedOut(): boolean {
    return this.expired;
  }

  /** Whether the caller's signal ended the request. */
  get cancelled(): boolean {
    return !this.expired && !!this.outer?.aborted;
  }

  /** Stops the timer and unhooks from the caller's signal. */
  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.onAbort && this.outer) this.outer.removeEventListener("abort", this.onAbort);
  }
}

/** Says what a network error was, in one line, from undici's nested causes. */
export function describeNetworkError(e: unknown): string {
  const parts: string[] = [];
  let cur: unknown = e;
  for (let depth = 0; cur && depth < 4; depth++) {
    const err = cur as { message?: unknown; code?: unknown; cause?: unknown };
    const msg = typeof err.message === "string" ? err.message : String(cur);
    const code = typeof err.code === "string" ? ` [${err.code}]` : "";
    if (msg) parts.push(msg + code);
    cur = err.cause;
  }
  return parts.join(": ") || "the request failed";
}

/** The transport shared by the HTTP calls and the event streams. */
export class Transport {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  private readonly apiKey: string | undefined;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: typeof globalThis.fetch;

  constructor(options: ClientOptions = {}) {
    const base = new URL(String(options.baseUrl ?? DEFAULT_BASE));
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new TypeError(`herenow: baseUrl must be http or https, got ${base.protocol}`);
    }
    if (base.search || base.hash) throw new TypeError("herenow: baseUrl must have no query or fragment");
    this.baseUrl = base.href.replace(/\/+$/, "");
    this.timeoutMs = checkTimeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS, "timeoutMs");
    if (options.apiKey !== undefined && (typeof options.apiKey !== "string" || options.apiKey === "")) {
      throw new TypeError("herenow: apiKey must be a non-empty string");
    }
    this.apiKey = options.apiKey;
    this.headers = { ...(options.headers ?? {}) };
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("herenow: no fetch: use Node 18 or later, or pass options.fetch");
    this.fetchImpl = f;
  }

  /** The full URL of `path` with `query`. */
  url(path: string, query?: Query): string {
    let url = this.baseUrl + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) params.append(k, String(v));
      const qs = params.toString();
      if (qs) url += `?${qs}`;
    }
    return url;
  }

  /** Headers for a request: the caller's, then the client's own. */
  headersFor(accept: string, hasBody: boolean): Record<string, string> {
    const h: Record<string, string> = {
      "user-agent": `herenow-client-js/${VERSION}`,
      ...this.headers,
      accept,
    };
    if (hasBody) h["content-type"] = "application/json";
    if (this.apiKey !== undefined) h.authorization = `Bearer ${this.apiKey}`;
    return h;
  }

  /**
   * Sends a request; `fetch`'s rejections become `connection-failed` or
   * `request-timeout`, an abort by the caller rejects with its reason.
   * Returns the response with the deadline still running over the body.
   */
  async send(spec: RequestSpec & { accept: string }, deadline: Deadline): Promise<Response> {
    const hasBody = spec.body !== undefined;
    try {
      return await this.fetchImpl(this.url(spec.path, spec.query), {
        method: spec.method,
        headers: this.headersFor(spec.accept, hasBody),
        body: hasBody ? JSON.stringify(spec.body) : undefined,
        signal: deadline.signal,
      });
    } catch (e) {
      throw this.failure(e, deadline, spec);
    }
  }

  /** The error to throw for a rejected `fetch` or body read. */
  failure(e: unknown, deadline: Deadline, spec: { method: string; path: string }): unknown {
    if (deadline.cancelled) return deadline.signal.reason ?? e;
    if (deadline.timedOut) {
      return new HerenowError({
        code: "request-timeout",
        status: null,
        detail: `no complete answer within the timeout`,
        method: spec.method,
        path: spec.path,
        cause: e,
      });
    }
    if (e instanceof HerenowError) return e;
    return new HerenowError({
      code: "connection-failed",
      status: null,
      detail: describeNetworkError(e),
      method: spec.method,
      path: spec.path,
      cause: e,
    });
  }

  /** Performs a call and answers its JSON (or text) body; any error status throws. */
  async request<T>(spec: RequestSpec): Promise<T> {
    const timeout = checkTimeout(spec.timeoutMs ?? this.timeoutMs, "timeoutMs");
    const deadline = new Deadline(spec.signal, timeout);
    try {
      const res = await this.send({ ...spec, accept: spec.text ? "text/plain, */*" : "application/json" }, deadline);
      let body: string;
      try {
        body = await res.text();
      } catch (e) {
        throw this.failure(e, deadline, spec);
      }
      if (!res.ok) throw errorFromBody(res, body, spec);
      if (spec.text) return body as T;
      try {
        return JSON.parse(body) as T;
      } catch {
        throw new HerenowError({
          code: "bad-response",
          status: res.status,
          detail: `the answer is not JSON: ${clip(body)}`,
          method: spec.method,
          path: spec.path,
        });
      }
    } finally {
      deadline.dispose();
    }
  }
}

function clip(s: string): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > MAX_DETAIL_CHARS ? `${one.slice(0, MAX_DETAIL_CHARS)}…` : one;
}

/** The error for an error status, from its problem document if it has one. */
export function errorFromBody(res: Response, body: string, spec: { method: string; path: string }): HerenowError {
  const retryAfter = parseRetryAfter(res.headers.get("retry-after"));
  const type = res.headers.get("content-type") ?? "";
  if (/json/i.test(type)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
    if (isProblem(parsed)) {
      return new HerenowError({
        code: parsed.code,
        status: res.status,
        retryAfter,
        detail: typeof parsed.detail === "string" ? parsed.detail : parsed.code,
        problem: parsed,
        method: spec.method,
        path: spec.path,
      });
    }
  }
  return new HerenowError({
    code: "unexpected-status",
    status: res.status,
    retryAfter,
    detail: clip(body) || res.statusText || `HTTP ${res.status}`,
    method: spec.method,
    path: spec.path,
  });
}
