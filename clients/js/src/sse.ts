/**
 * Server-Sent Events: a parser that follows the WHATWG rules (any of CRLF,
 * LF, CR ends a line, `data:` lines join, comments are keep-alives), bounded
 * in the size of one event, and a reader over a `fetch` body.
 *
 * @module
 */

import { HerenowError } from "./errors.js";

/** One event as it came off the wire. */
export interface SseMessage {
  /** The `event:` field, `message` when absent. */
  event: string;
  /** The `data:` lines, joined with `\n`. */
  data: string;
  /** The last `id:` seen, `""` when none. */
  id: string;
}

/** Default bound on one event: a snapshot of 10,000 members with 1 KiB metadata fits. */
export const DEFAULT_MAX_EVENT_SIZE = 32 * 1024 * 1024;

/**
 * An incremental SSE parser: feed it text as it arrives, take the events
 * it completed. One event (its pending line plus its data so far) may hold
 * at most `maxEventSize` characters; beyond that it throws a
 * `stream-too-large` {@link HerenowError} rather than grow without bound.
 */
export class SseParser {
  private partial = "";
  private data = "";
  private hasData = false;
  private event = "";
  private lastId = "";
  private skipLf = false;
  private started = false;

  constructor(private readonly maxEventSize: number = DEFAULT_MAX_EVENT_SIZE) {}

  /** Parses `text`, answering the events it completed, in order. */
  feed(text: string): SseMessage[] {
    const out: SseMessage[] = [];
    let i = 0;
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) i = 1; // a BOM at the very start is not content
    }
    if (this.skipLf && i < text.length) {
      if (text.charCodeAt(i) === 10) i++;
      this.skipLf = false;
    }
    let start = i;
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.partial + text.slice(start, i);
      this.partial = "";
      this.line(line, out);
      if (c === 13) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLf = true; // a CRLF split over two chunks
        }
      }
      start = i + 1;
    }
    this.partial += text.slice(start);
    if (this.partial.length + this.data.length > this.maxEventSize) {
      throw new HerenowError({
        code: "stream-too-large",
        status: null,
        detail: `one event is larger than ${this.maxEventSize} characters`,
      });
    }
    return out;
  }

  private line(line: string, out: SseMessage[]): void {
    if (line === "") {
      if (this.hasData) {
        out.push({ event: this.event || "message", data: this.data, id: this.lastId });
      }
      this.data = "";
      this.hasData = false;
      this.event = "";
      return;
    }
    if (line.charCodeAt(0) === 58 /* ':' */) return; // a comment: keep-alive
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case "event":
        this.event = value;
        break;
      case "data":
        this.data = this.hasData ? `${this.data}\n${value}` : value;
        this.hasData = true;
        if (this.data.length > this.maxEventSize) {
          throw new HerenowError({
            code: "stream-too-large",
            status: null,
            detail: `one event is larger than ${this.maxEventSize} characters`,
          });
        }
        break;
      case "id":
        if (!value.includes("\0")) this.lastId = value;
        break;
      default:
        break; // `retry` and unknown fields: the client has its own backoff
    }
  }
}

/**
 * Reads a response body as SSE messages. `onActivity` is called for every
 * chunk (keep-alive comments included), so a caller can tell a quiet
 * stream from a dead one. Aborting `signal` cancels the body (closing the
 * connection) even while nobody is reading; the messages then end.
 */
export async function* readSse(
  body: ReadableStream<Uint8Array>,
  maxEventSize: number,
  onActivity: () => void,
  signal?: AbortSignal,
): AsyncGenerator<SseMessage, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  const parser = new SseParser(maxEventSize);
  const cancel = () => {
    reader.cancel().catch(() => {});
  };
  if (signal?.aborted) cancel();
  else signal?.addEventListener("abort", cancel, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onActivity();
      for (const m of parser.feed(decoder.decode(value, { stream: true }))) yield m;
    }
  } finally {
    signal?.removeEventListener("abort", cancel);
    // Ends the request when the consumer stops early (or the read failed).
    reader.cancel().catch(() => {});
    try {
      reader.releaseLock();
    } catch {
      // already released by the cancel
    }
  }
}
