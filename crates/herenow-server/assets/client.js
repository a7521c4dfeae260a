// herenow's browser client: live presence over one WebSocket.
//
// No build step and no dependencies: load it with
//   <script src="https://your-herenow/client.js"></script>
// and use the global `Herenow`:
//
//   const client = new Herenow.Client({
//     token: async () => (await fetch("/my-backend/herenow-token")).text(),
//   });
//   const room = client.space("room:1");
//   room.on("change", () => render(room.members));   // Map "kind:id" → member
//   room.on("join", (m) => toast(`${m.id} is here`));
//   room.join({ name: "Ann" });                      // be present, with metadata
//   room.subscribe();                                // see who else is
//   client.setInvisible(true);                       // see without being seen
//
//   const contacts = client.watch({ friends: true }); // users' status, anywhere
//   contacts.on("change", (users) => dots(users));    // Map id → {status, last_seen_ms, space}
//   contacts.on("status", (u, before) => toast(`${u.id} is ${u.status}`));
//   client.connect();
//
// The protocol is docs/PROTOCOL.md. The client pings every `ping_ms` the
// server asks for and whenever the tab becomes visible again, reconnects
// with exponential backoff and full jitter, and on every reconnect says
// hello again, re-joins, re-applies invisibility, re-subscribes and
// watches again (each subscription restarts from a fresh snapshot, each
// watch from a fresh picture that replaces the old, so nothing is missed).
// Member ids and metadata are other people's input: render them as text.
"use strict";

(function (global) {
  const BACKOFF_MIN_MS = 500;
  const BACKOFF_MAX_MS = 30_000;
  // Codes after which a reconnect needs a new token, not just a new socket.
  const TOKEN_CODES = new Set([4001, 4002]);

  // A tiny event emitter: on(type, fn) returns a function that unsubscribes.
  class Emitter {
    constructor() { this._handlers = new Map(); }
    on(type, fn) {
      if (!this._handlers.has(type)) this._handlers.set(type, new Set());
      this._handlers.get(type).add(fn);
      return () => this._handlers.get(type).delete(fn);
    }
    _emit(type, ...args) {
      for (const fn of this._handlers.get(type) || []) {
        try { fn(...args); } catch (e) { setTimeout(() => { throw e; }); }
      }
    }
  }

  const keyOf = (m) => `${m.kind}:${m.id}`;

  function member(m) {
    return {
      kind: m.kind === "guest" ? "guest" : "user",
      id: String(m.id),
      status: m.status || "online",
      last_seen_ms: typeof m.last_seen_ms === "number" ? m.last_seen_ms : null,
      meta: m.meta && typeof m.meta === "object" ? m.meta : null,
      metas: new Map(), // connection id → that connection's metadata
    };
  }

  // One space, as seen through the client: your presence in it and, once
  // subscribed, everybody's.
  class Space extends Emitter {
    constructor(client, name) {
      super();
      this.client = client;
      this.name = name;
      this.members = new Map(); // "kind:id" → member
      this.omitted = 0; // present members the snapshot left out
      this.joined = false;
      this.meta = null;
      this.subscribed = false;
      this.synced = false; // the snapshot is complete
      this._pending = null; // a snapshot being received, page by page
    }

    // Be present in this space with `meta` (an object, or nothing).
    join(meta) {
      this.joined = true;
      this.meta = meta ?? null;
      return this.client._send({ type: "join", space: this.name, meta: this.meta ?? undefined });
    }

    // Change this connection's metadata here (typing, cursor, device...).
    update(meta) {
      this.meta = meta ?? null;
      if (!this.joined) return Promise.reject(new Error("join the space first"));
      return this.client._send({ type: "update", space: this.name, meta: this.meta });
    }

    leave() {
      if (!this.joined) return Promise.resolve();
      this.joined = false;
      return this.client._send({ type: "leave", space: this.name });
    }

    // Receive the space's members and their changes.
    subscribe() {
      this.subscribed = true;
      this.synced = false;
      return this.client._send({ type: "subscribe", space: this.name });
    }

    unsubscribe() {
      if (!this.subscribed) return Promise.resolve();
      this.subscribed = false;
      this.synced = false;
      return this.client._send({ type: "unsubscribe", space: this.name });
    }

    // Members online or away, most recent first.
    list() {
      return [...this.members.values()].sort((a, b) =>
        (b.last_seen_ms ?? 0) - (a.last_seen_ms ?? 0) || (keyOf(a) < keyOf(b) ? -1 : 1));
    }

    _snapshot(msg) {
      if (!this._pending) this._pending = new Map();
      for (const m of msg.members || []) {
        const mm = member(m);
        for (const c of m.metas || []) mm.metas.set(c.conn, c.meta ?? null);
        this._pending.set(keyOf(mm), mm);
      }
      if (!msg.last) return;
      this.members = this._pending;
      this._pending = null;
      this.omitted = msg.omitted || 0;
      this.synced = true;
      this._emit("sync", this.members);
      this._emit("change", this.members);
    }

    _event(e) {
      const key = keyOf(e);
      const old = this.members.get(key);
      if (e.type === "leave") {
        if (old) this.members.delete(key);
        this._emit("leave", old || member(e), e);
        this._emit("change", this.members);
        return;
      }
      const m = old || member(e);
      m.status = e.status || m.status;
      if (typeof e.last_seen_ms === "number") m.last_seen_ms = e.last_seen_ms;
      if (e.conn) {
        if (e.type === "disconnect") m.metas.delete(e.conn);
        else m.metas.set(e.conn, e.meta ?? null);
      }
      if ("meta" in e && e.type !== "disconnect") m.meta = e.meta ?? null;
      this.members.set(key, m);
      this._emit(e.type, m, e);
      this._emit("change", this.members);
    }
  }

  function watchedUser(u) {
    return {
      id: String(u.id),
      status: u.status === "online" || u.status === "away" ? u.status : "offline",
      last_seen_ms: typeof u.last_seen_ms === "number" ? u.last_seen_ms : null,
      // Watching anywhere: where it was last seen, when the token may know.
      space: typeof u.space === "string" ? u.space : null,
    };
  }

  // Users' status, as the client's one watch sees it: the ids asked for
  // and, with `friends`, the signed-in user's friend set as it changes. A
  // connection has at most one watch, in one scope (a space, or anywhere),
  // so `client.watch()` always hands back this same object.
  class Watch extends Emitter {
    constructor(client) {
      super();
      this.client = client;
      this.users = new Map(); // id → {id, status, last_seen_ms, space}
      this.space = null; // the space watched in; null: anywhere
      this.ids = new Set(); // users asked for by id
      this.friends = false; // the friend set is followed
      this.active = false; // something is (to be) watched
      this.synced = false; // the latest full picture is complete
      this._pending = null; // a full picture being received, page by page
      this.ready = Promise.resolve(null); // the latest watch's answer
      this._fresh = 0; // counts fresh watches, so a stale refusal undoes nothing
    }

    // Watches more users (and with `friends` the friend set too), in the
    // current scope. Resolves with the answer's last page.
    add(users = [], { friends = false } = {}) {
      return this.client.watch({ users, friends, space: this.space }).ready;
    }

    // Stops watching `users`. With the friend set followed, one of them may
    // be a friend (and stays watched, as the server decides), so the watch
    // is sent again whole and its answer replaces the map exactly.
    remove(users) {
      if (!this.active) return Promise.resolve(null);
      const drop = (users || []).map(String);
      for (const id of drop) this.ids.delete(id);
      if (this.friends) return this._sendFresh();
      for (const id of drop) this.users.delete(id);
      this._emit("change", this.users);
      return this.client._send({ type: "unwatch", users: drop });
    }

    // Stops watching anyone.
    stop() {
      if (!this.active) return Promise.resolve(null);
      this._reset(false);
      this._emit("change", this.users);
      return this.client._send({ type: "unwatch" });
    }

    // Users online first, then away, then offline; each most recent first.
    list() {
      const rank = { online: 0, away: 1, offline: 2 };
      return [...this.users.values()].sort((a, b) => rank[a.status] - rank[b.status]
        || (b.last_seen_ms ?? -1) - (a.last_seen_ms ?? -1)
        || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    }

    _reset(active) {
      this.active = active;
      this.synced = false;
      this._pending = null;
      if (!active) {
        this.ids = new Set();
        this.friends = false;
        this.users = new Map();
      }
    }

    // Everything wanted, as one watch that replaces whatever the server
    // holds: its `resync` answer is the whole picture.
    _sendFresh() {
      this.synced = false;
      this._pending = null;
      const fresh = ++this._fresh;
      const reply = this.client._send({
        type: "watch", users: [...this.ids], friends: this.friends,
        space: this.space ?? undefined, replace: true,
      });
      this.ready = this._refusal(reply, () => {
        // A refused fresh watch leaves nothing watched, here as there.
        if (fresh !== this._fresh) return;
        this._reset(false);
        this._emit("change", this.users);
      });
      return this.ready;
    }

    _refusal(reply, undo) {
      reply.then(null, (e) => {
        // Only a refusal by the server: a closed socket is said again later.
        if (!e || !e.code) return;
        undo();
        this._emit("error", e);
      });
      return reply;
    }

    _page(msg) {
      if (msg.resync) {
        // Lag, a reconnect or a replace: this picture replaces the map, but
        // only once complete, so nobody blinks out between two pages.
        if (!this._pending) this._pending = new Map();
        for (const u of msg.users || []) this._pending.set(String(u.id), watchedUser(u));
        if (!msg.last) return;
        this.users = this._pending;
        this._pending = null;
      } else {
        // Users the watch added (or a new friend): merged as they come.
        for (const u of msg.users || []) this.users.set(String(u.id), watchedUser(u));
      }
      if (msg.last && !this._pending) {
        this.synced = true;
        this._emit("sync", this.users);
      }
      this._emit("change", this.users);
    }

    _status(msg) {
      const u = watchedUser(msg);
      const old = this.users.get(u.id);
      const before = old ? old.status : null;
      if (old) Object.assign(old, u);
      else this.users.set(u.id, u);
      this._emit("status", old || u, before);
      this._emit("change", this.users);
    }

    _unwatched(msg) {
      const ids = (msg.users || []).map(String);
      for (const id of ids) {
        this.users.delete(id);
        if (this._pending) this._pending.delete(id);
      }
      this._emit("unwatched", ids);
      this._emit("change", this.users);
    }
  }

  class Client extends Emitter {
    // options.token: a token string, or a function (async or not) returning
    //   one; a function is called again whenever a new token is needed.
    // options.url: the WebSocket URL (default: /v1/ws on this page's host).
    constructor(options = {}) {
      super();
      this._tokenSource = options.token;
      this.url = options.url || Client.defaultUrl();
      this.state = "idle"; // idle | connecting | open | reconnecting | closed
      this.conn = null; // this connection's id, from `welcome`
      this.member = null; // {kind, id}, from `welcome`
      this.invisible = false;
      // Server clock minus this browser's, from `welcome` and `pong`.
      this.serverOffsetMs = null;
      this._spaces = new Map();
      this._watch = null; // the Watch, once watch() was called
      this._ws = null;
      this._refs = new Map(); // ref → {resolve, reject}
      this._nextRef = 1;
      this._attempt = 0;
      this._timer = 0;
      this._pingTimer = 0;
      this._pingMs = 10_000;
      this._awaitingPong = 0; // pings sent since the last pong
      this._stopped = false;
      this._needToken = true;
      this._token = null;
      this._onVisible = () => {
        if (document.visibilityState === "visible") this.ping();
      };
      this._onOnline = () => {
        if (this.state === "reconnecting") this._reconnectNow();
      };
    }

    static defaultUrl() {
      const l = global.location;
      return `${l.protocol === "https:" ? "wss:" : "ws:"}//${l.host}/v1/ws`;
    }

    // A space handle; the same object for the same name.
    space(name) {
      if (!this._spaces.has(name)) this._spaces.set(name, new Space(this, name));
      return this._spaces.get(name);
    }

    // Watches users' status: `users` by id and, with `friends: true`, the
    // signed-in user's friend set as it changes; within `space`, or
    // anywhere (online if online in any space). Adds to the current watch
    // when the scope is the same; another scope, or `replace: true`,
    // starts afresh. Returns the Watch (the same object every time); its
    // `ready` promise settles with the answer (its last `watching` page)
    // or the refusal, also told by the Watch's `error` event.
    watch({ users = [], friends = false, space = null, replace = false } = {}) {
      if (!this._watch) this._watch = new Watch(this);
      const w = this._watch;
      const ids = [...users].map(String);
      const scope = space ?? null;
      if (replace || !w.active || w.space !== scope) {
        // The old map stays until the new picture is complete.
        w.ids = new Set(ids);
        w.friends = !!friends;
        w.space = scope;
        w.active = true;
        w._sendFresh();
        return w;
      }
      const fresh = ids.filter((id) => !w.ids.has(id));
      const follow = !!friends && !w.friends;
      if (!fresh.length && !follow) {
        w.ready = Promise.resolve(null);
        return w;
      }
      for (const id of fresh) w.ids.add(id);
      if (follow) w.friends = true;
      const reply = this._send({ type: "watch", users: fresh, friends: follow, space: scope ?? undefined });
      w.ready = w._refusal(reply, () => {
        for (const id of fresh) w.ids.delete(id);
        if (follow) w.friends = false;
      });
      return w;
    }

    // The server's clock now, in ms since the epoch: `last_seen_ms` values
    // are on it, and a browser's clock may be minutes off.
    serverNow() {
      return Date.now() + (this.serverOffsetMs ?? 0);
    }

    connect() {
      this._stopped = false;
      if (global.document) {
        document.addEventListener("visibilitychange", this._onVisible);
        global.addEventListener("online", this._onOnline);
      }
      if (!this._ws) this._open();
      return this;
    }

    // Closes for good: the server detaches this connection at once, so the
    // user leaves now rather than when its TTL runs out.
    close() {
      this._stopped = true;
      clearTimeout(this._timer);
      clearInterval(this._pingTimer);
      if (global.document) {
        document.removeEventListener("visibilitychange", this._onVisible);
        global.removeEventListener("online", this._onOnline);
      }
      if (this._ws) this._ws.close(1000, "bye");
      this._ws = null;
      this._setState("closed");
    }

    // Hide this connection from everybody (or show it again).
    setInvisible(on) {
      this.invisible = !!on;
      return this._send({ type: "invisible", on: this.invisible });
    }

    ping() {
      if (this.state !== "open") return Promise.resolve();
      this._awaitingPong += 1;
      return this._send({ type: "ping" }).then((pong) => {
        this._awaitingPong = 0;
        return pong;
      });
    }

    // ---- internals ---------------------------------------------------------

    _setState(s, detail) {
      if (this.state === s) return;
      this.state = s;
      this._emit("state", s, detail);
    }

    async _getToken() {
      if (!this._needToken && this._token) return this._token;
      const src = this._tokenSource;
      const t = typeof src === "function" ? await src() : src;
      if (typeof t !== "string" || !t) throw new Error("no token");
      this._token = t;
      this._needToken = false;
      return t;
    }

    async _open() {
      this._setState(this._attempt ? "reconnecting" : "connecting");
      let token;
      try {
        token = await this._getToken();
      } catch (e) {
        this._emit("error", { code: "no-token", message: String(e && e.message || e) });
        this._retry();
        return;
      }
      if (this._stopped) return;
      const ws = new WebSocket(this.url);
      this._ws = ws;
      ws.onopen = () => {
        if (ws !== this._ws) return;
        this._sendRaw({ type: "hello", token, ref: this._ref() });
      };
      ws.onmessage = (ev) => {
        if (ws !== this._ws) return;
        let msg;
        try { msg = JSON.parse(ev.data); } catch (_) { return; }
        this._handle(msg);
      };
      ws.onclose = (ev) => {
        if (ws !== this._ws) return;
        this._ws = null;
        clearInterval(this._pingTimer);
        for (const { reject } of this._refs.values()) reject(new Error(`closed (${ev.code})`));
        this._refs.clear();
        this._emit("close", { code: ev.code, reason: ev.reason });
        if (this._stopped) return;
        if (TOKEN_CODES.has(ev.code)) {
          this._needToken = true;
          if (typeof this._tokenSource !== "function") {
            // A fixed token that the server refuses will not get better.
            this._stopped = true;
            this._setState("closed", { code: ev.code, reason: ev.reason });
            return;
          }
        }
        this._retry();
      };
    }

    _retry() {
      if (this._stopped) return;
      this._setState("reconnecting");
      // Full jitter: a uniformly random wait up to the backoff, so a server
      // restart is not met by every client at the same instant.
      const cap = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this._attempt);
      this._attempt += 1;
      clearTimeout(this._timer);
      this._timer = setTimeout(() => this._open(), Math.random() * cap);
    }

    _reconnectNow() {
      clearTimeout(this._timer);
      if (!this._ws) this._open();
    }

    _handle(msg) {
      switch (msg.type) {
        case "welcome":
          this.conn = msg.conn;
          this.member = msg.member;
          this._pingMs = msg.ping_ms || this._pingMs;
          this._noteTime(msg.server_time_ms);
          this._attempt = 0;
          this._awaitingPong = 0;
          clearInterval(this._pingTimer);
          this._pingTimer = setInterval(() => this._tick(), this._pingMs);
          this._setState("open");
          this._restore();
          break;
        case "snapshot": {
          const s = this._spaces.get(msg.space);
          if (s && s.subscribed) s._snapshot(msg);
          break;
        }
        case "event": {
          const s = this._spaces.get(msg.space);
          if (s && s.subscribed && s.synced) s._event(msg.event);
          break;
        }
        case "lagged": {
          // The server restarts the subscription with a fresh snapshot
          // (its pages say resync): what was known, and any snapshot
          // half received, is superseded by it.
          const s = this._spaces.get(msg.space);
          if (s) {
            s.synced = false;
            s._pending = null;
          }
          this._emit("lagged", msg);
          break;
        }
        case "pong":
          this._noteTime(msg.server_time_ms);
          break;
        case "watching":
          if (this._watch && this._watch.active) this._watch._page(msg);
          break;
        case "status":
          if (this._watch && this._watch.active) this._watch._status(msg);
          break;
        case "unwatched":
          if (this._watch && this._watch.active) this._watch._unwatched(msg);
          break;
        case "error":
          this._emit("error", msg);
          this._settle(msg.ref, null, msg);
          return;
        default:
          break;
      }
      this._settle(msg.ref, msg, null);
    }

    _settle(ref, ok, err) {
      if (ref === undefined || !this._refs.has(ref)) return;
      const p = this._refs.get(ref);
      this._refs.delete(ref);
      if (err) p.reject(Object.assign(new Error(err.message || err.code), { code: err.code }));
      else p.resolve(ok);
    }

    // After (re)connecting: everything this client wants, said again.
    _restore() {
      if (this.invisible) this._send({ type: "invisible", on: true });
      for (const s of this._spaces.values()) {
        if (s.joined) this._send({ type: "join", space: s.name, meta: s.meta ?? undefined });
        if (s.subscribed) {
          s.synced = false;
          this._send({ type: "subscribe", space: s.name });
        }
      }
      // A new socket watches nothing: everything wanted, as a fresh picture.
      if (this._watch && this._watch.active) this._watch._sendFresh();
    }

    // Off by the message's one-way trip at most: plenty for "2 min ago".
    _noteTime(ms) {
      if (typeof ms === "number" && Number.isFinite(ms)) this.serverOffsetMs = ms - Date.now();
    }

    _tick() {
      // Two pings without a pong: the socket is dead though it looks open
      // (a laptop that slept, a network that changed). Start over.
      if (this._awaitingPong >= 2 && this._ws) {
        const ws = this._ws;
        ws.onclose({ code: 4000, reason: "no pong" });
        try { ws.close(); } catch (_) { /* already closing */ }
        return;
      }
      this.ping().catch(() => {});
    }

    _ref() {
      const r = this._nextRef;
      this._nextRef = (this._nextRef % 1_000_000_000) + 1;
      return r;
    }

    _send(msg) {
      if (this.state !== "open" || !this._ws) {
        // Said again by _restore() once the socket is open.
        return Promise.resolve(null);
      }
      const ref = this._ref();
      const reply = new Promise((resolve, reject) => {
        this._refs.set(ref, { resolve, reject });
        this._sendRaw({ ...msg, ref });
      });
      // A caller may await the reply (and see an error or a closed socket)
      // or ignore it: an ignored failure is not an unhandled rejection,
      // since everything is said again after a reconnect anyway.
      reply.catch(() => {});
      return reply;
    }

    _sendRaw(msg) {
      try { this._ws.send(JSON.stringify(msg)); } catch (_) { /* onclose follows */ }
    }
  }

  global.Herenow = { Client, Space, Watch, version: "1" };
})(typeof window !== "undefined" ? window : globalThis);
