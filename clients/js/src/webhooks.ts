/**
 * Receiving herenow's webhooks (docs/API.md, "Webhooks"), signed the
 * [Standard Webhooks](https://www.standardwebhooks.com/) way: `webhook-id`
 * (the same on every retry of a batch), `webhook-timestamp` (integer Unix
 * seconds) and `webhook-signature` (space-separated `v1,<base64>`, each the
 * HMAC-SHA256 of `{id}.{timestamp}.{body}` under the secret's bytes; the
 * secret is written `whsec_` and their base64).
 *
 * {@link WebhookVerifier} checks all three (a timestamp more than
 * `toleranceMs` from now, 5 minutes by default, is refused: a captured
 * request cannot be replayed later); `verifier.receive` also parses the body
 * into a typed {@link WebhookBatch}; {@link webhookHandler} wraps it as a
 * Node/Express request handler. A bad request throws
 * {@link WebhookVerificationError}, a signed body that is not herenow's
 * {@link WebhookPayloadError}; an unusable secret is a `TypeError` when the
 * verifier is made. Delivery is at least once: {@link Deduplicator} is a
 * bounded memory of event ids for one process.
 *
 * @module
 */

import type { IncomingMessage, ServerResponse } from "node:http";

import { WebhookPayloadError, WebhookVerificationError, WebhookVerifier, bytesOf, type WebhookBatch } from "./webhooks-core.js";

export {
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
  type WebhookBatch,
  type WebhookBatchEvent,
  type WebhookBody,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookHeaders,
  type WebhookLeaveReason,
  type WebhookSecret,
  type WebhookVerificationReason,
  type WebhookVerifierOptions,
} from "./webhooks-core.js";

/** Default `maxBodyBytes` of {@link webhookHandler}: herenow's batches are at most 256 KiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** Options of {@link webhookHandler}. */
export interface WebhookHandlerOptions {
  /** Largest body read, in bytes (default 1 MiB); past it the answer is `413`. */
  maxBodyBytes?: number;
  /** Told what `onBatch` threw (answered `500`, so herenow retries) and other failures of the handler's own; default `console.error`. */
  onError?: (error: unknown) => void;
}

/** A request as the handler reads it: Node's, or Express's with `req.body` from `express.raw()`. */
export type WebhookRequest = IncomingMessage & { body?: unknown };

class BodyTooLarge extends Error {}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (e: unknown): void => {
      done(); // the rest, if any, flows on unread: Node discards it
      reject(e);
    };
    const onData = (chunk: Buffer | string): void => {
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      size += b.length;
      if (size > limit) return fail(new BodyTooLarge());
      chunks.push(b);
    };
    const onEnd = (): void => {
      done();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (e: unknown): void => fail(e);
    const onClose = (): void => fail(new Error("the request was aborted"));
    function done(): void {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
    }
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("close", onClose);
  });
}

function answer(res: ServerResponse, status: number, text?: string): void {
  if (res.headersSent || res.writableEnded || res.destroyed) return;
  res.statusCode = status;
  if (status === 405) res.setHeader("allow", "POST");
  if (text !== undefined) res.setHeader("content-type", "text/plain; charset=utf-8");
  res.end(text === undefined ? undefined : `${text}\n`);
}

/**
 * A Node/Express request handler `(req, res)` for herenow's webhooks: reads
 * the raw body (at most `maxBodyBytes`), verifies and parses it, and calls
 * `onBatch`. Answers `204` when `onBatch` returns (or its promise resolves),
 * `500` when it throws or rejects (herenow retries the batch later, with the
 * same event ids), `401` for a bad signature or timestamp, `400` for a
 * signed body that is not a batch, `405` for a method other than `POST` and
 * `413` for a body too large. It needs the raw body: mount no JSON parser
 * before it (a `req.body` that is a Buffer or string, from Express's
 * `express.raw({ type: () => true })`, is used as is).
 */
export function webhookHandler(
  verifier: WebhookVerifier,
  onBatch: (batch: WebhookBatch, req: WebhookRequest) => unknown,
  options: WebhookHandlerOptions = {},
): (req: WebhookRequest, res: ServerResponse) => Promise<void> {
  if (!(verifier instanceof WebhookVerifier)) throw new TypeError("herenow: webhookHandler needs a WebhookVerifier");
  if (typeof onBatch !== "function") throw new TypeError("herenow: webhookHandler needs an onBatch function");
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`herenow: maxBodyBytes must be an integer >= 0, got ${String(limit)}`);
  const onError = options.onError ?? ((e: unknown) => console.error("herenow: a webhook handler failed:", e));

  return async (req, res) => {
    if (req.method !== "POST") return answer(res, 405, "method-not-allowed");
    let body: Buffer;
    const parsed = req.body;
    if (typeof parsed === "string" || parsed instanceof Uint8Array) {
      body = bytesOf(parsed);
      if (body.length > limit) return answer(res, 413, "body-too-large");
    } else if (req.readableEnded) {
      // A body parser read it already, and what it made is not the raw bytes.
      onError(new TypeError("herenow: webhookHandler needs the raw body: mount no JSON body parser before it"));
      return answer(res, 500, "no-raw-body");
    } else {
      const declared = Number(req.headers["content-length"]);
      if (Number.isFinite(declared) && declared > limit) return answer(res, 413, "body-too-large");
      try {
        body = await readBody(req, limit);
      } catch (e) {
        return answer(res, e instanceof BodyTooLarge ? 413 : 400, e instanceof BodyTooLarge ? "body-too-large" : "unreadable-body");
      }
    }
    let batch: WebhookBatch;
    try {
      batch = verifier.receive(req.headers, body);
    } catch (e) {
      if (e instanceof WebhookVerificationError) return answer(res, 401, e.reason);
      if (e instanceof WebhookPayloadError) return answer(res, 400, e.code);
      onError(e); // not the request's fault: a bug, or headers of an unexpected shape
      return answer(res, 500, "handler-failed");
    }
    try {
      await onBatch(batch, req);
    } catch (e) {
      onError(e);
      return answer(res, 500, "handler-failed");
    }
    return answer(res, 204);
  };
}
