// Compiled (not run) by `npm run typecheck`: the package's declarations,
// as a TypeScript user sees them, must accept this and refuse the lines
// marked @ts-expect-error.

import {
  Herenow,
  HerenowError,
  herenowPresence,
  type EventStream,
  type MemberStatus,
  type SpaceEvent,
  type WatchEvent,
} from "herenow-client";
import { Presence } from "herenow-client/middleware";
import type { IncomingMessage, ServerResponse } from "node:http";

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
