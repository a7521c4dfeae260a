// Compiled (not run) by `npm run typecheck`: the package's declarations,
// as a TypeScript user sees them, must accept this and refuse the lines
// marked @ts-expect-error.

import {
  CircuitBreaker,
  Herenow,
  HerenowError,
  PresenceView,
  herenowPresence,
  type CloseReport,
  WebhookPayloadError,
  type EventStream,
  type MemberStatus,
  type SpaceEvent,
  type WatchEvent,
  type WebhookBatchEvent,
} from "herenow-client";
import { Presence } from "herenow-client/middleware";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import {
  Deduplicator,
  WebhookVerificationError,
  WebhookVerifier,
  webhookHandler,
  type WebhookBatch,
  type WebhookEvent,
} from "herenow-client/webhooks";

export async function usage(): Promise<void> {
  const herenow = new Herenow({ baseUrl: "http://127.0.0.1:7700", apiKey: "k", timeoutMs: 5_000 });
  const report = await herenow.heartbeat("lobby", { id: "ada", meta: { name: "Ada" } });
  const accepted: number = report.accepted;
  const page = await herenow.online("lobby", { window: "5m", kind: "all", order: "id", limit: 10 });
  const cursor: string | null = page.next_cursor;
  const first: MemberStatus | undefined = page.members[0];
  const seen: number | null = first?.last_seen_ms ?? null;
  const users = await herenow.usersStatus(["a", "b"]);
  const where: string | null = users[0]?.space ?? null;
  const erased = await herenow.eraseUser("ada");
  const had: boolean = erased.friend_set;
  await herenow.count("lobby", { window: 60_000 });
  // @ts-expect-error: kind is users | guests | all
  await herenow.online("lobby", { kind: "everyone" });
  // @ts-expect-error: the four thresholds are required
  await herenow.setConfig("lobby", { online_ms: 1 });

  try {
    await herenow.member("lobby", "x");
  } catch (e) {
    if (e instanceof HerenowError) {
      const code: string = e.code;
      const status: number | null = e.status;
      const retryAfter: number | null = e.retryAfter;
      const retry: boolean = e.retryable;
      void [code, status, retryAfter, retry];
    }
  }

  const events: EventStream = herenow.events("lobby", { maxRetries: 5 });
  for await (const ev of events) {
    const e: SpaceEvent = ev;
    if (ev.type === "snapshot") {
      const n: number = ev.members.length;
      const resync: boolean = ev.resync;
      void [n, resync];
    } else if (ev.type === "leave") {
      const reason: "explicit" | "timeout" | "expired" | undefined = ev.reason;
      void reason;
    }
    void e;
    break;
  }
  for await (const w of herenow.watch({ friends_of: "ada" })) {
    const e: WatchEvent = w;
    if (w.type === "status") {
      const s: "online" | "away" | "offline" = w.status;
      void s;
    }
    void e;
    break;
  }
  void [accepted, cursor, seen, where, had];
}

// The middleware fits Node's own (req, res, next) and a typed request.
interface AuthedRequest extends IncomingMessage {
  user?: { id: string };
}
export const mw = herenowPresence<AuthedRequest>({
  client: new Herenow(),
  space: "site",
  user: (req) => req.user?.id,
  guest: "cookie",
  intervalMs: 60_000,
});
export function handler(req: AuthedRequest, res: ServerResponse): void {
  mw(req, res, () => res.end("ok"));
}
export const tracker: Presence<AuthedRequest> = mw.presence;
export async function shutdown(): Promise<number> {
  const report: CloseReport = await mw.presence.close({ timeoutMs: 500 });
  return report.unsent + tracker.stats.unsent;
}

// Pages: every answer is known (typed fields) or unknown (text only), never thrown.
const view = new PresenceView({ client: new Herenow(), timeoutMs: 1_000, unknownText: "", breaker: new CircuitBreaker({ backoffMs: 10_000 }) });
export async function page(): Promise<string> {
  const box = await view.whosOnline("site", { limit: 10, kind: "all" });
  const seen = await view.lastSeen("site", "ada");
  // @ts-expect-error: counts exist only once known
  void box.counts;
  const total: number | null = box.known ? box.counts.total : null;
  const last: number | null = seen.known ? seen.last_seen_ms : null;
  const state: "closed" | "open" | "probing" = view.breaker.state;
  return `${box} ${seen} ${total} ${last} ${state}`;
}

// Webhooks: a verifier, the typed batch, and the handler on Node's own server.

const verifier = new WebhookVerifier(["whsec_old", "whsec_new"], { toleranceMs: 60_000, now: Date.now });
const seen = new Deduplicator({ maxEntries: 10_000 });
export function receive(req: IncomingMessage, raw: Buffer): WebhookBatchEvent[] {
  try {
    const batch: WebhookBatch = verifier.receive(req.headers, raw);
    const fresh: WebhookEvent[] = seen.fresh(batch.events);
    for (const e of fresh) {
      const at: number = e.at_ms;
      const member: string | undefined = e.member;
      // Known types autocomplete; a newer server's string is still a string.
      const known: boolean = e.type === "join" || e.type === "teleport";
      void [at, member, known];
    }
    return fresh;
  } catch (e) {
    if (e instanceof WebhookVerificationError) {
      const reason: "missing-header" | "bad-header" | "timestamp-too-old" | "timestamp-too-new" | "no-matching-signature" = e.reason;
      void reason;
    } else if (e instanceof WebhookPayloadError) {
      const code: string = e.code;
      void code;
    }
    return [];
  }
}
verifier.verify(new Headers(), "body");
// @ts-expect-error: the body is bytes or text, not parsed JSON
verifier.verify({}, { type: "presence.events" });
export const hooks = createServer(webhookHandler(verifier, async (batch) => void batch.events.length, { maxBodyBytes: 512 * 1024 }));
