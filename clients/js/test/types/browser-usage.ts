// Compiled (not run) by `npm run typecheck`: the browser client's types,
// generated from client.js, as a page's TypeScript sees them.
/// <reference path="../../browser/client.d.ts" />

export function page(): void {
  const client = new Herenow.Client({ token: () => fetch("/token").then((r) => r.text()) });
  const room: Herenow.Space = client.space("room:1");
  room.on("change", (members) => {
    for (const m of members.values()) {
      const status: Herenow.Status = m.status;
      const seen: number | null = m.last_seen_ms;
      const devices: number = m.metas.size;
      void [status, seen, devices];
    }
  });
  room.on("join", (m, e) => console.log(m.id, e.type));
  // @ts-expect-error: no such event
  room.on("joined", () => {});
  // @ts-expect-error: a join listener gets a member, not a string
  room.on("join", (m: string) => m);
  void room.join({ device: "laptop" });
  void room.subscribe();
  const contacts: Herenow.Watch = client.watch({ friends: true });
  contacts.on("status", (u, before) => console.log(u.id, before, u.status));
  contacts.on("error", (e) => console.log(e.code));
  client.on("state", (s) => {
    const state: Herenow.ClientState = s;
    void state;
  });
  client.connect();
  const now: number = client.serverNow();
  const v: "1" = window.Herenow.version;
  void [now, v];
  // Internals are not part of the types.
  // @ts-expect-error: _send is the client's own
  client._send({ type: "ping" });
}
