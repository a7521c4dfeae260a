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
// with exponential backoff and full jitter (at once, within a quarter
// second, when its server restarts: 1012, or 1001), and on every reconnect says
// hello again, re-joins, re-applies invisibility, re-subscribes and
// watches again (each subscription restarts from a fresh snapshot, each
// watch from a fresh picture that replaces the old, so nothing is missed).
// Member ids and metadata are other people's input: render them as text.
//
// One file on purpose, though it passes 800 lines: a page loads it with
// one <script> tag and no build step, and two fifths of its lines are
// comments and the JSDoc types that clients/js/scripts/browser-dts.mjs
// checks against the code beside them.
"use strict";

(function (global) {
  const BACKOFF_MIN_MS = 500;
  const BACKOFF_MAX_MS = 30_000;
  // Codes after which a reconnect needs a new token, not just a new socket.
  const TOKEN_CODES = new Set([4001, 4002]);
  // Codes of a server that restarts (a rollout) or goes away: reconnect at
  // once, to another server, well within the grace that keeps this
  // connection's presence meanwhile; a small jitter spreads the sockets of
  // one server over a quarter second.
  const RESTART_CODES = new Set([1001, 1012]);
  const RESTART_JITTER_MS = 250;

  // The types below are JSDoc only: the script runs as it is, and
  // clients/js/scripts/browser-dts.mjs checks them against the code and
  // turns them into clients/js/browser/client.d.ts.

  /** @typedef {"user" | "guest"} Kind */
  /** @typedef {"online" | "away" | "offline"} Status */
  /** @typedef {{ [key: string]: unknown }} Meta A member's (or a connection's) metadata: a JSON object. */
  /** @typedef {"idle" | "connecting" | "open" | "reconnecting" | "closed"} ClientState */
  /** @typedef {number | string} Ref A message's `ref`, echoed by its reply. */

  /**
   * A member as a subscribed {@link Space} sees it.
   * @typedef {object} Member
   * @property {Kind} kind
   * @property {string} id
   * @property {Status} status
   * @property {number | null} last_seen_ms On the server's clock (see `Client.serverNow()`).
   * @property {Meta | null} meta The member's latest metadata.
   * @property {Map<string, Meta | null>} metas Its visible connections: connection id → that connection's metadata.
   */

  /**
   * A presence event, as the server sends it (docs/PROTOCOL.md).
   * @typedef {object} PresenceEvent
   * @property {string} space
   * @property {"join" | "away" | "back" | "leave" | "update" | "connect" | "disconnect"} type
   * @property {Kind} kind
   * @property {string} id
   * @property {Status} status
   * @property {number | null} last_seen_ms
   * @property {Meta | null} [meta]
   * @property {"explicit" | "timeout" | "expired"} [reason] Why a `leave` happened.
   * @property {string} [conn] The connection that caused it, if one did.
   */

  /**
   * A watched user's state.
   * @typedef {object} WatchedUser
   * @property {string} id
   * @property {Status} status
   * @property {number | null} last_seen_ms
   * @property {string | null} space Watching anywhere: where it was last seen, when the token may know.
   */

  /**
   * A message from the server (docs/PROTOCOL.md, "Messages from the server").
   * @typedef {{ type: string, ref?: Ref, [field: string]: any }} ServerMessage
   */

  /**
   * An error, from the server (an `error` message) or the client (`no-token`).
   * @typedef {object} ClientError
   * @property {string} code Stable: `space-not-allowed`, `watch-not-allowed`, `rate-limited`, `no-token`, …
   * @property {string} message For people.
   * @property {Ref} [ref]
   */

  /** @typedef {{ code: number, reason: string }} CloseInfo How the socket closed. */

  /**
   * A refusal of one request, as its promise rejects with.
   * @typedef {Error & { code?: string }} RequestError
   */

  /**
   * The events of a {@link Space}: event name → the listener's arguments.
   * @typedef {object} SpaceEvents
   * @property {[members: Map<string, Member>]} change Anything changed: the members, by "kind:id".
   * @property {[members: Map<string, Member>]} sync A complete snapshot arrived.
   * @property {[member: Member, event: PresenceEvent]} join
   * @property {[member: Member, event: PresenceEvent]} away
   * @property {[member: Member, event: PresenceEvent]} back
   * @property {[member: Member, event: PresenceEvent]} leave
   * @property {[member: Member, event: PresenceEvent]} update
   * @property {[member: Member, event: PresenceEvent]} connect
   * @property {[member: Member, event: PresenceEvent]} disconnect
   */

  /**
   * The events of a {@link Watch}: event name → the listener's arguments.
   * @typedef {object} WatchEvents
   * @property {[users: Map<string, WatchedUser>]} change Anything changed: the users, by id.
   * @property {[users: Map<string, WatchedUser>]} sync A complete picture arrived.
   * @property {[user: WatchedUser, before: Status | null]} status A user's status changed.
   * @property {[ids: string[]]} unwatched Users no longer watched (they left the friend set).
   * @property {[error: RequestError]} error The server refused a watch (`watch-not-allowed`, …).
   */

  /**
   * The events of a {@link Client}: event name → the listener's arguments.
   * @typedef {object} ClientEvents
   * @property {[state: ClientState, detail?: CloseInfo]} state
   * @property {[error: ClientError]} error
   * @property {[info: CloseInfo]} close
   * @property {[message: ServerMessage]} lagged A subscription fell behind; a fresh snapshot follows.
   */

  /**
   * How a {@link Client} connects.
   * @typedef {object} ClientOptions
   * @property {string | (() => string | Promise<string>)} [token] A token, or a function (async or not) returning one, called again whenever a new token is needed.
   * @property {string} [url] The WebSocket URL (default: /v1/ws on this page's host).
   */

  /**
   * What {@link Client.watch} watches.
   * @typedef {object} WatchOptions
   * @property {Iterable<string>} [users] User ids.
   * @property {boolean} [friends] The signed-in user's friend set, followed as it changes.
   * @property {string | null} [space] Within this space; default: anywhere.
   * @property {boolean} [replace] Start afresh rather than add.
   */

  /**
   * A tiny event emitter: on(type, fn) returns a function that unsubscribes.
   * @template {{ [type: string]: any[] }} E The events: name → the listener's arguments.
   */
  class Emitter {
    constructor() { /** @internal @type {Map<string, any>} */ this._handlers = new Map(); }
    /**
     * Calls `fn` on each `type` event; answers a function that stops it.
     * @template {keyof E & string} K
     * @param {K} type
     * @param {(...args: E[K]) => void} fn
     * @returns {() => boolean}
     */
    on(type, fn) {
      if (!this._handlers.has(type)) this._handlers.set(type, new Set());
      this._handlers.get(type).add(fn);
      return () => this._handlers.get(type).delete(fn);
    }
    /**
     * @internal
     * @param {keyof E & string} type
     * @param {...any} args
     */
    _emit(type, ...args) {
      for (const fn of this._handlers.get(type) || []) {
        try { fn(...args); } catch (e) { setTimeout(() => { throw e; }); }
      }
    }
  }

  const keyOf = (/** @type {{ kind: string, id: string }} */ m) => `${m.kind}:${m.id}`;

  /**
   * @param {any} m A member or an event, from the server.
   * @returns {Member}
   */
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

  /**
   * One space, as seen through the client: your presence in it and, once
   * subscribed, everybody's. Get it with `client.space(name)`.
   * @extends {Emitter<SpaceEvents>}
   */
  class Space extends Emitter {
    /**
     * @param {Client} client
     * @param {string} name
     */
    constructor(client, name) {
      super();
      this.client = client;
      this.name = name;
      /** @type {Map<string, Member>} */
      this.members = new Map(); // "kind:id" → member
      this.omitted = 0; // present members the snapshot left out
      this.joined = false;
      /** @type {Meta | null} */
      this.meta = null;
      this.subscribed = false;
      this.synced = false; // the snapshot is complete
      /** @internal @type {Map<string, Member> | null} */
      this._pending = null; // a snapshot being received, page by page
    }

    /**
     * Be present in this space with `meta` (an object, or nothing).
     * @param {Meta | null} [meta]
     * @returns {Promise<ServerMessage | null>} The `ok`, or `null` when not connected (sent on connect).
     */
    join(meta) {
      this.joined = true;
      this.meta = meta ?? null;
      return this.client._send({ type: "join", space: this.name, meta: this.meta ?? undefined });
    }

    /**
     * Change this connection's metadata here (typing, cursor, device...).
     * @param {Meta | null} meta
     * @returns {Promise<ServerMessage | null>}
     */
    update(meta) {
      this.meta = meta ?? null;
      if (!this.joined) return Promise.reject(new Error("join the space first"));
      return this.client._send({ type: "update", space: this.name, meta: this.meta });
    }

    /**
     * Stop being present here (others see a `leave` if it was your last connection).
     * @returns {Promise<ServerMessage | null | void>}
     */
    leave() {
      if (!this.joined) return Promise.resolve();
      this.joined = false;
      return this.client._send({ type: "leave", space: this.name });
    }

    /**
     * Receive the space's members and their changes.
     * @returns {Promise<ServerMessage | null>} The snapshot's last page.
     */
    subscribe() {
      this.subscribed = true;
      this.synced = false;
      return this.client._send({ type: "subscribe", space: this.name });
    }

    /** @returns {Promise<ServerMessage | null | void>} */
    unsubscribe() {
      if (!this.subscribed) return Promise.resolve();
      this.subscribed = false;
      this.synced = false;
      return this.client._send({ type: "unsubscribe", space: this.name });
    }

    /**
     * Members online or away, most recent first.
     * @returns {Member[]}
     */
    list() {
      return [...this.members.values()].sort((a, b) =>
        (b.last_seen_ms ?? 0) - (a.last_seen_ms ?? 0) || (keyOf(a) < keyOf(b) ? -1 : 1));
    }

    /**
     * @internal
     * @param {ServerMessage} msg
     */
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

    /**
     * @internal
     * @param {PresenceEvent} e
     */
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

  /**
   * @param {any} u A watched user, from the server.
   * @returns {WatchedUser}
   */
  function watchedUser(u) {
    return {
      id: String(u.id),
      status: u.status === "online" || u.status === "away" ? u.status : "offline",
      last_seen_ms: typeof u.last_seen_ms === "number" ? u.last_seen_ms : null,
      // Watching anywhere: where it was last seen, when the token may know.
      space: typeof u.space === "string" ? u.space : null,
    };
  }

  /**
   * Users' status, as the client's one watch sees it: the ids asked for
   * and, with `friends`, the signed-in user's friend set as it changes. A
   * connection has at most one watch, in one scope (a space, or anywhere),
   * so `client.watch()` always hands back this same object.
   * @extends {Emitter<WatchEvents>}
   */
  class Watch extends Emitter {
    /** @param {Client} client */
    constructor(client) {
      super();
      this.client = client;
      /** @type {Map<string, WatchedUser>} */
      this.users = new Map(); // id → {id, status, last_seen_ms, space}
      /** @type {string | null} */
      this.space = null; // the space watched in; null: anywhere
      /** @type {Set<string>} */
      this.ids = new Set(); // users asked for by id
      this.friends = false; // the friend set is followed
      this.active = false; // something is (to be) watched
      this.synced = false; // the latest full picture is complete
      /** @internal @type {Map<string, WatchedUser> | null} */
      this._pending = null; // a full picture being received, page by page
      /** @type {Promise<ServerMessage | null>} */
      this.ready = Promise.resolve(null); // the latest watch's answer
      /** @internal */
      this._fresh = 0; // counts fresh watches, so a stale refusal undoes nothing
    }

    /**
     * Watches more users (and with `friends` the friend set too), in the
     * current scope. Resolves with the answer's last page.
     * @param {Iterable<string>} [users]
     * @param {{ friends?: boolean }} [options]
     * @returns {Promise<ServerMessage | null>}
     */
    add(users = [], { friends = false } = {}) {
      return this.client.watch({ users, friends, space: this.space }).ready;
    }

    /**
     * Stops watching `users`. With the friend set followed, one of them may
     * be a friend (and stays watched, as the server decides), so the watch
     * is sent again whole and its answer replaces the map exactly.
     * @param {string[]} users
     * @returns {Promise<ServerMessage | null>}
     */
    remove(users) {
      if (!this.active) return Promise.resolve(null);
      const drop = (users || []).map(String);
      for (const id of drop) this.ids.delete(id);
      if (this.friends) return this._sendFresh();
      for (const id of drop) this.users.delete(id);
      this._emit("change", this.users);
      return this.client._send({ type: "unwatch", users: drop });
    }

    /**
     * Stops watching anyone.
     * @returns {Promise<ServerMessage | null>}
     */
    stop() {
      if (!this.active) return Promise.resolve(null);
      this._reset(false);
      this._emit("change", this.users);
      return this.client._send({ type: "unwatch" });
    }

    /**
     * Users online first, then away, then offline; each most recent first.
     * @returns {WatchedUser[]}
     */
    list() {
      const rank = { online: 0, away: 1, offline: 2 };
      return [...this.users.values()].sort((a, b) => rank[a.status] - rank[b.status]
        || (b.last_seen_ms ?? -1) - (a.last_seen_ms ?? -1)
        || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    }

    /**
     * @internal
     * @param {boolean} active
     */
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

    /**
     * Everything wanted, as one watch that replaces whatever the server
     * holds: its `resync` answer is the whole picture.
     * @internal
     * @returns {Promise<ServerMessage | null>}
     */
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

    /**
     * @internal
     * @param {Promise<ServerMessage | null>} reply
     * @param {() => void} undo
     */
    _refusal(reply, undo) {
      reply.then(null, (e) => {
        // Only a refusal by the server: a closed socket is said again later.
        if (!e || !e.code) return;
        undo();
        this._emit("error", e);
      });
      return reply;
    }

    /**
     * @internal
     * @param {ServerMessage} msg
     */
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

    /**
     * @internal
     * @param {ServerMessage} msg
     */
    _status(msg) {
      const u = watchedUser(msg);
      const old = this.users.get(u.id);
      const before = old ? old.status : null;
      if (old) Object.assign(old, u);
      else this.users.set(u.id, u);
      this._emit("status", old || u, before);
      this._emit("change", this.users);
    }

    /**
     * @internal
     * @param {ServerMessage} msg
     */
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

  /**
   * One WebSocket to herenow, shared by every space and the watch; it
   * reconnects by itself and says everything again after each reconnect.
   * @extends {Emitter<ClientEvents>}
   */
  class Client extends Emitter {
    // options.token: a token string, or a function (async or not) returning
    //   one; a function is called again whenever a new token is needed.
    // options.url: the WebSocket URL (default: /v1/ws on this page's host).
    /** @param {ClientOptions} [options] */
    constructor(options = {}) {
      super();
      /** @internal */
      this._tokenSource = options.token;
      this.url = options.url || Client.defaultUrl();
      /** @type {ClientState} */
      this.state = "idle"; // idle | connecting | open | reconnecting | closed
      /** @type {string | null} */
      this.conn = null; // this connection's id, from `welcome`
      /** @type {{ kind: Kind, id: string } | null} */
      this.member = null; // {kind, id}, from `welcome`
      this.invisible = false;
      // Server clock minus this browser's, from `welcome` and `pong`.
      /** @type {number | null} */
      this.serverOffsetMs = null;
      /** @internal @type {Map<string, Space>} */
      this._spaces = new Map();
      /** @internal @type {Watch | null} */
      this._watch = null; // the Watch, once watch() was called
      /** @internal @type {WebSocket | null} */
      this._ws = null;
      /** @internal @type {Map<Ref, any>} ref → {resolve, reject} */
      this._refs = new Map(); // ref → {resolve, reject}
      /** @internal */
      this._nextRef = 1;
      /** @internal */
      this._attempt = 0;
      /** @internal @type {any} */
      this._timer = 0;
      /** @internal @type {any} */
      this._pingTimer = 0;
      /** @internal */
      this._pingMs = 10_000;
      /** @internal */
      this._awaitingPong = 0; // pings sent since the last pong
      /** @internal */
      this._stopped = false;
      /** @internal */
      this._needToken = true;
      /** @internal @type {string | null} */
      this._token = null;
      /** @internal */
      this._onVisible = () => {
        if (document.visibilityState === "visible") this.ping();
      };
      /** @internal */
      this._onOnline = () => {
        if (this.state === "reconnecting") this._reconnectNow();
      };
    }

    /**
     * The WebSocket URL of this page's host: `ws(s)://HOST/v1/ws`.
     * @returns {string}
     */
    static defaultUrl() {
      const l = global.location;
      return `${l.protocol === "https:" ? "wss:" : "ws:"}//${l.host}/v1/ws`;
    }

    /**
     * A space handle; the same object for the same name.
     * @param {string} name
     * @returns {Space}
     */
    space(name) {
      if (!this._spaces.has(name)) this._spaces.set(name, new Space(this, name));
      // @ts-ignore -- set just above
      return this._spaces.get(name);
    }

    /**
     * Watches users' status: `users` by id and, with `friends: true`, the
     * signed-in user's friend set as it changes; within `space`, or
     * anywhere (online if online in any space). Adds to the current watch
     * when the scope is the same; another scope, or `replace: true`,
     * starts afresh. Returns the Watch (the same object every time); its
     * `ready` promise settles with the answer (its last `watching` page)
     * or the refusal, also told by the Watch's `error` event.
     * @param {WatchOptions} [options]
     * @returns {Watch}
     */
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

    /**
     * The server's clock now, in ms since the epoch: `last_seen_ms` values
     * are on it, and a browser's clock may be minutes off.
     * @returns {number}
     */
    serverNow() {
      return Date.now() + (this.serverOffsetMs ?? 0);
    }

    /**
     * Opens the socket (and keeps it open, reconnecting, until `close()`).
     * @returns {this}
     */
    connect() {
      this._stopped = false;
      if (global.document) {
        document.addEventListener("visibilitychange", this._onVisible);
        global.addEventListener("online", this._onOnline);
      }
      if (!this._ws) this._open();
      return this;
    }

    /**
     * Closes for good: the server detaches this connection at once, so the
     * user leaves now rather than when its TTL runs out.
     * @returns {void}
     */
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

    /**
     * Hide this connection from everybody (or show it again).
     * @param {boolean} on
     * @returns {Promise<ServerMessage | null>}
     */
    setInvisible(on) {
      this.invisible = !!on;
      return this._send({ type: "invisible", on: this.invisible });
    }

    /**
     * Pings now (the client also pings every `ping_ms` by itself).
     * @returns {Promise<ServerMessage | null | void>} The `pong`.
     */
    ping() {
      if (this.state !== "open") return Promise.resolve();
      this._awaitingPong += 1;
      return this._send({ type: "ping" }).then((pong) => {
        this._awaitingPong = 0;
        return pong;
      });
    }

    // ---- internals ---------------------------------------------------------

    /**
     * @internal
     * @param {ClientState} s
     * @param {CloseInfo} [detail]
     */
    _setState(s, detail) {
      if (this.state === s) return;
      this.state = s;
      this._emit("state", s, detail);
    }

    /**
     * @internal
     * @returns {Promise<string>}
     */
    async _getToken() {
      if (!this._needToken && this._token) return this._token;
      const src = this._tokenSource;
      const t = typeof src === "function" ? await src() : src;
      if (typeof t !== "string" || !t) throw new Error("no token");
      this._token = t;
      this._needToken = false;
      return t;
    }

    /** @internal */
    async _open() {
      this._setState(this._attempt ? "reconnecting" : "connecting");
      let token;
      try {
        token = await this._getToken();
      } catch (e) {
        // @ts-ignore -- e is whatever the token function threw
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
        // The first reconnect after a restart goes at once; should it fail,
        // the backoff takes over.
        this._retry(RESTART_CODES.has(ev.code) && this._attempt === 0 ? RESTART_JITTER_MS : undefined);
      };
    }

    /**
     * @internal
     * @param {number} [capMs] The longest wait; by default the backoff's.
     */
    _retry(capMs) {
      if (this._stopped) return;
      this._setState("reconnecting");
      // Full jitter: a uniformly random wait up to the backoff, so a server
      // restart is not met by every client at the same instant.
      const cap = capMs ?? Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this._attempt);
      this._attempt += 1;
      clearTimeout(this._timer);
      this._timer = setTimeout(() => this._open(), Math.random() * cap);
    }

    /** @internal */
    _reconnectNow() {
      clearTimeout(this._timer);
      if (!this._ws) this._open();
    }

    /**
     * @internal
     * @param {ServerMessage} msg
     */
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

    /**
     * @internal
     * @param {Ref | undefined} ref
     * @param {ServerMessage | null} ok
     * @param {ServerMessage | null} err
     */
    _settle(ref, ok, err) {
      if (ref === undefined || !this._refs.has(ref)) return;
      const p = this._refs.get(ref);
      this._refs.delete(ref);
      if (err) p.reject(Object.assign(new Error(err.message || err.code), { code: err.code }));
      else p.resolve(ok);
    }

    // After (re)connecting: everything this client wants, said again.
    /** @internal */
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
    /**
     * @internal
     * @param {unknown} ms
     */
    _noteTime(ms) {
      if (typeof ms === "number" && Number.isFinite(ms)) this.serverOffsetMs = ms - Date.now();
    }

    /** @internal */
    _tick() {
      // Two pings without a pong: the socket is dead though it looks open
      // (a laptop that slept, a network that changed). Start over.
      if (this._awaitingPong >= 2 && this._ws) {
        const ws = this._ws;
        // @ts-ignore -- a stand-in close event: only code and reason are read
        ws.onclose({ code: 4000, reason: "no pong" });
        try { ws.close(); } catch (_) { /* already closing */ }
        return;
      }
      this.ping().catch(() => {});
    }

    /**
     * @internal
     * @returns {number}
     */
    _ref() {
      const r = this._nextRef;
      this._nextRef = (this._nextRef % 1_000_000_000) + 1;
      return r;
    }

    /**
     * @internal
     * @param {{ type: string, [field: string]: unknown }} msg
     * @returns {Promise<ServerMessage | null>}
     */
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

    /**
     * @internal
     * @param {object} msg
     */
    _sendRaw(msg) {
      // @ts-ignore -- a closed socket throws, and onclose follows
      try { this._ws.send(JSON.stringify(msg)); } catch (_) { /* onclose follows */ }
    }
  }

  global.Herenow = { Client, Space, Watch, version: "1" };
})(typeof window !== "undefined" ? window : globalThis);
