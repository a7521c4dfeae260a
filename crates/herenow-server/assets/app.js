// herenow's who's-online page. Plain JavaScript, no build step, no framework.
//
// The live set comes from /client.js over the WebSocket: its snapshot
// replaces it, `join`, `back`, `away`, `update`, `connect` and `disconnect`
// patch it, `leave` removes it (or, for a timeout, greys it until it falls
// out of the window). With `?as=NAME` (or the join form) the page is also
// present itself, as that user. Counts of the window and the
// history chart are polled every 10 s. Signed in as a user, the page also
// lists that user's friends with live dots (friends.js, one watch).
// Member ids and metadata are user input: they only ever reach the page
// through textContent and attributes, never through markup that the
// browser would parse.
"use strict";

(() => {
  const MAX_ROWS = 500; // Rows rendered; the rest are counted in "and N more".
  const POLL_MS = 10_000; // Counts and history.
  const LABEL_MS = 5_000; // "last seen" labels, redrawn without a request.
  const MIN_RENDER_GAP_MS = 250; // Coalesces bursts of events into one render.
  const SPACE_RE = /^[A-Za-z0-9_.:@-]{1,128}$/;
  const SVG_NS = "http://www.w3.org/2000/svg";

  const $ = (id) => document.getElementById(id);
  const el = {
    conn: $("conn"), connText: $("conn-text"), error: $("error"),
    form: $("space-form"), select: $("space-select"), input: $("space-input"),
    spaceName: $("space-name"), footSpace: $("foot-space"),
    onlineTotal: $("online-total"), onlineSplit: $("online-split"),
    awayTotal: $("away-total"), awaySplit: $("away-split"),
    windowTotal: $("window-total"), windowSplit: $("window-split"),
    windowLabel: $("window-label"),
    chart: $("chart"), members: $("members"), memberCount: $("member-count"),
    empty: $("empty"), more: $("more"), spaces: $("spaces"),
    joinForm: $("join-form"), joinName: $("join-name"), joinButton: $("join-button"),
  };

  const state = {
    space: "lobby",
    members: new Map(), // "kind:id" → member
    omitted: 0, // present members the snapshot left out
    config: { online_ms: 60_000, away_ms: 300_000, window_ms: 600_000 },
    filter: "all",
    client: null, // the Herenow.Client
    room: null, // its handle on the space shown
    roomOffs: [], // unsubscribers of the room's handlers
    as: null, // the name this page joins as, if any
    pollTimer: 0,
    renderQueued: false,
    lastRender: 0,
    rows: new Map(), // "kind:id" → <li>, reused between renders
    skewMs: 0, // server clock minus browser clock
    history: [],
    generation: 0, // bumps on every space change, so stale answers are dropped
  };

  const keyOf = (m) => `${m.kind}:${m.id}`;
  // The socket's `welcome` tells the store's clock to the millisecond;
  // until then, the Date header's coarser offset.
  const serverNow = () => (state.client && state.client.serverOffsetMs !== null
    ? state.client.serverNow()
    : Date.now() + state.skewMs);
  const api = (path) => `/v1/spaces/${encodeURIComponent(state.space)}${path}`;

  // ---- HTTP ---------------------------------------------------------------

  async function getJson(url) {
    const res = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
    noteSkew(res);
    if (!res.ok) {
      let detail = `${res.status} ${res.statusText}`;
      try {
        const p = await res.json();
        if (p && p.detail) detail = p.detail;
        else if (p && p.title) detail = p.title;
      } catch (_) { /* not problem+json */ }
      const err = new Error(detail);
      err.status = res.status;
      throw err;
    }
    return res.json();
  }

  // "last seen" is server time; a browser whose clock is off would say "in
  // 2 min" or "3 min ago" for a member seen just now. The Date header has
  // one-second resolution, so only a clear offset is corrected.
  function noteSkew(res) {
    const date = Date.parse(res.headers.get("Date") || "");
    if (!Number.isFinite(date)) return;
    const skew = date - Date.now();
    state.skewMs = Math.abs(skew) > 2000 ? skew : 0;
  }

  function showError(text) {
    el.error.hidden = !text;
    el.error.textContent = text || "";
  }

  // ---- Space choice ---------------------------------------------------------

  function spaceFromUrl() {
    const s = new URLSearchParams(location.search).get("space");
    return s && SPACE_RE.test(s) ? s : "lobby";
  }

  function setSpace(space, push) {
    if (!SPACE_RE.test(space)) {
      el.input.classList.add("invalid");
      showError("A space name is 1–128 letters, digits or - _ . : @");
      return;
    }
    el.input.classList.remove("invalid");
    showError("");
    if (push) {
      const url = new URL(location.href);
      url.searchParams.set("space", space);
      history.pushState({ space }, "", url);
    }
    state.space = space;
    state.generation += 1;
    state.members.clear();
    state.omitted = 0;
    state.history = [];
    el.spaceName.textContent = space;
    el.footSpace.textContent = space;
    document.title = `${space} · herenow`;
    ensureOption(space);
    el.select.value = space;
    clearRows();
    drawChart();
    scheduleRender(true);
    watch(space);
    poll();
  }

  function ensureOption(space) {
    for (const o of el.select.options) if (o.value === space) return;
    const o = document.createElement("option");
    o.value = space;
    o.textContent = space;
    el.select.prepend(o);
  }

  async function loadSpaces() {
    const gen = state.generation;
    try {
      const body = await getJson("/v1/spaces?limit=200");
      if (gen !== state.generation) return;
      const spaces = Array.isArray(body.spaces) ? body.spaces : [];
      const names = new Set(spaces.map((s) => s.space));
      el.select.replaceChildren();
      el.spaces.replaceChildren();
      if (!names.has(state.space)) ensureOption(state.space);
      for (const s of spaces) {
        const m = s.members || {};
        const o = document.createElement("option");
        o.value = s.space;
        o.textContent = `${s.space} (${fmtInt((m.users || 0) + (m.guests || 0))})`;
        el.select.append(o);

        const tr = document.createElement("tr");
        tr.classList.toggle("current", s.space === state.space);
        const name = document.createElement("td");
        const link = document.createElement("a");
        link.href = `?space=${encodeURIComponent(s.space)}`;
        link.textContent = s.space;
        link.addEventListener("click", (ev) => {
          ev.preventDefault();
          setSpace(s.space, true);
        });
        name.append(link);
        tr.append(name, numCell(m.users), numCell(m.guests));
        el.spaces.append(tr);
      }
      if (!spaces.length) {
        const tr = document.createElement("tr");
        const td = document.createElement("td");
        td.colSpan = 3;
        td.className = "muted";
        td.textContent = "No space holds members yet.";
        tr.append(td);
        el.spaces.append(tr);
      }
      el.select.value = state.space;
    } catch (e) {
      ensureOption(state.space);
    }
  }

  function numCell(n) {
    const td = document.createElement("td");
    td.className = "num";
    td.textContent = fmtInt(n || 0);
    return td;
  }

  el.select.addEventListener("change", () => setSpace(el.select.value, true));
  el.form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const typed = el.input.value.trim();
    if (typed) {
      setSpace(typed, true);
      if (SPACE_RE.test(typed)) el.input.value = "";
    } else {
      setSpace(el.select.value, true);
    }
  });
  el.input.addEventListener("input", () => el.input.classList.remove("invalid"));
  window.addEventListener("popstate", () => setSpace(spaceFromUrl(), false));

  for (const b of document.querySelectorAll(".filter button")) {
    b.addEventListener("click", () => {
      state.filter = b.dataset.filter;
      for (const o of document.querySelectorAll(".filter button")) o.classList.toggle("active", o === b);
      scheduleRender(true);
    });
  }

  // ---- Live presence over the WebSocket (client.js) -------------------------

  function setConn(s, text) {
    el.conn.dataset.state = s;
    el.connText.textContent = text || s;
  }

  // The page's identity: `?as=NAME` (or the join form) makes it a user who
  // joins the space it shows; otherwise it only watches, as a guest viewer.
  // The token comes from `#token=…` (minted by a backend or `herenow
  // token`) or, on a server without API keys, from POST /v1/tokens.
  const VIEWER = `viewer-${Math.random().toString(36).slice(2, 10)}`;

  function fragmentToken() {
    const t = new URLSearchParams(location.hash.slice(1)).get("token");
    return t && t.length < 8192 ? t : null;
  }

  async function pageToken() {
    const fixed = fragmentToken();
    if (fixed) return fixed;
    const as = state.as;
    const res = await fetch("/v1/tokens", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ user: as || VIEWER, kind: as ? "user" : "guest", spaces: ["*"], ttl_s: 3600 }),
    });
    if (!res.ok) {
      let detail = `${res.status}`;
      try { detail = (await res.json()).detail || detail; } catch (_) { /* not JSON */ }
      showError(res.status === 401 || res.status === 403
        ? "This server needs a token: open the page with #token=… (mint one with `herenow token`)."
        : `No token: ${detail}`);
      throw new Error(detail);
    }
    return (await res.json()).token;
  }

  function startClient() {
    if (state.client) state.client.close();
    const client = new Herenow.Client({ token: pageToken });
    state.client = client;
    client.on("state", (s) => {
      if (client !== state.client) return;
      if (s === "open") setConn("live", state.as ? `live · ${state.as}` : "live");
      else if (s === "closed") setConn("offline", "closed");
      else setConn(s === "connecting" ? "connecting" : "reconnecting");
    });
    client.on("error", (e) => {
      if (client === state.client && e && e.code !== "no-token") showError(`${e.code}: ${e.message}`);
    });
    friends.start(client, state.as);
    client.connect();
  }

  // Subscribes to `space` (and joins it when the page has a name), dropping
  // the previous space.
  function watch(space) {
    const client = state.client;
    if (!client) return;
    for (const off of state.roomOffs) off();
    if (state.room && state.room.client === client && state.room.name !== space) {
      state.room.leave();
      state.room.unsubscribe();
    }
    const room = client.space(space);
    state.room = room;
    const gen = state.generation;
    const live = (fn) => (...args) => {
      if (gen === state.generation && room === state.room) fn(...args);
    };
    state.roomOffs = [
      room.on("sync", live((members) => {
        state.members.clear();
        for (const m of members.values()) state.members.set(keyOf(m), normalize(m));
        state.omitted = room.omitted;
        showError("");
        scheduleRender(true);
        refreshRecent(gen);
      })),
      ...["join", "back", "away", "update", "connect", "disconnect"].map((type) =>
        room.on(type, live((m) => {
          state.members.set(keyOf(m), normalize(m));
          scheduleRender(false);
        }))),
      room.on("leave", live((m, e) => {
        const key = keyOf(m);
        const old = state.members.get(key);
        if (e.reason === "explicit" || !old) {
          state.members.delete(key);
        } else {
          // Timed out: still "seen within the window" (grey) until it is not.
          old.status = "offline";
          if (e.last_seen_ms) old.last_seen_ms = e.last_seen_ms;
        }
        scheduleRender(false);
      })),
    ];
    if (state.as) room.join({ name: state.as });
    room.subscribe();
  }

  el.joinForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const name = el.joinName.value.trim();
    if (name === (state.as || "")) return;
    if (name && !/^[^\u0000-\u001f\u007f]{1,64}$/.test(name)) {
      showError("A name is 1–64 characters, without control characters.");
      return;
    }
    state.as = name || null;
    const url = new URL(location.href);
    if (state.as) url.searchParams.set("as", state.as);
    else url.searchParams.delete("as");
    history.replaceState(history.state, "", url);
    el.joinButton.textContent = state.as ? "Rename" : "Join";
    state.room = null;
    startClient();
    state.generation += 1;
    watch(state.space);
  });

  function normalize(m) {
    return {
      id: String(m.id),
      kind: m.kind === "guest" ? "guest" : "user",
      status: m.status || "online",
      last_seen_ms: typeof m.last_seen_ms === "number" ? m.last_seen_ms : null,
      meta: m.meta && typeof m.meta === "object" ? m.meta : null,
      devices: m.metas instanceof Map ? m.metas.size : 0,
    };
  }

  // A heartbeat from a member already online sends no event, so the live
  // set's last-seen times age. The listing, most recent first, refreshes
  // them for every row the page can show. It also brings the members seen
  // within the window who are no longer present (timed out before this page
  // connected): they are shown grey. Statuses stay the events' business.
  async function refreshRecent(gen) {
    try {
      const body = await getJson(api(`/online?kind=all&order=recent&limit=${MAX_ROWS}`));
      if (gen !== state.generation) return;
      for (const m of body.members || []) {
        const key = keyOf(m);
        const have = state.members.get(key);
        if (have) {
          if (typeof m.last_seen_ms === "number" && m.last_seen_ms > (have.last_seen_ms ?? 0)) {
            have.last_seen_ms = m.last_seen_ms;
          }
        } else if (m.status === "offline") {
          state.members.set(key, normalize(m));
        }
      }
      scheduleRender(false);
    } catch (_) { /* the live set is still right; only its times are older */ }
  }

  // ---- Polling: window counts and history ---------------------------------------

  function poll() {
    clearTimeout(state.pollTimer);
    const gen = state.generation;
    Promise.allSettled([
      getJson(api("/count")).then((c) => {
        if (gen !== state.generation) return;
        el.windowTotal.textContent = fmtInt(c.total);
        el.windowSplit.textContent = splitText(c.users, c.guests);
        if (c.window_ms) el.windowLabel.textContent = fmtDuration(c.window_ms);
      }),
      loadSpaces(),
      state.room && state.room.synced ? refreshRecent(gen) : null,
      getJson(api("/history?range=1h")).then((h) => {
        if (gen !== state.generation) return;
        state.history = Array.isArray(h.samples) ? h.samples : [];
        drawChart();
      }),
    ]).finally(() => {
      if (gen === state.generation) state.pollTimer = setTimeout(poll, POLL_MS);
    });
  }

  // ---- Members list ----------------------------------------------------------------

  function scheduleRender(now) {
    if (state.renderQueued) return;
    state.renderQueued = true;
    const wait = now ? 0 : Math.max(0, MIN_RENDER_GAP_MS - (performance.now() - state.lastRender));
    setTimeout(() => requestAnimationFrame(render), wait);
  }

  function clearRows() {
    state.rows.clear();
    el.members.replaceChildren();
  }

  // The server's status: `away` and timeout `leave` events arrive within a
  // second of the change. Guessing from the age of last_seen_ms would be
  // wrong, since heartbeats of present members send no event.
  function shownStatus(m) {
    return m.status === "online" || m.status === "away" ? m.status : "offline";
  }

  function render() {
    state.renderQueued = false;
    state.lastRender = performance.now();
    const now = serverNow();
    // Grey members age out of the window without an event.
    for (const [key, m] of state.members) {
      if (m.status === "offline" && (m.last_seen_ms === null || now - m.last_seen_ms > state.config.window_ms)) {
        state.members.delete(key);
      }
    }

    const counts = { online: { user: 0, guest: 0 }, away: { user: 0, guest: 0 } };
    const all = [];
    for (const m of state.members.values()) {
      const s = shownStatus(m);
      if (s === "online" || s === "away") counts[s][m.kind] += 1;
      if (state.filter === "all" || state.filter === m.kind) all.push(m);
    }
    setCount(el.onlineTotal, el.onlineSplit, counts.online);
    setCount(el.awayTotal, el.awaySplit, counts.away);

    // Most recent first; ties by kind and id, as the server orders them.
    all.sort((a, b) => (b.last_seen_ms ?? 0) - (a.last_seen_ms ?? 0)
      || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0)
      || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const shown = all.slice(0, MAX_ROWS);

    const keep = new Set();
    let prev = null;
    for (const m of shown) {
      const key = keyOf(m);
      keep.add(key);
      let row = state.rows.get(key);
      if (!row) {
        row = makeRow(m);
        state.rows.set(key, row);
      }
      fillRow(row, m, now);
      // Move only rows out of place: reordering a long list stays cheap.
      const want = prev ? prev.nextSibling : el.members.firstChild;
      if (want !== row) el.members.insertBefore(row, want);
      prev = row;
    }
    for (const [key, row] of state.rows) {
      if (!keep.has(key)) {
        row.remove();
        state.rows.delete(key);
      }
    }

    const hidden = all.length - shown.length + (state.filter === "all" ? state.omitted : 0);
    el.more.hidden = hidden <= 0;
    el.more.textContent = hidden > 0 ? `and ${fmtInt(hidden)} more` : "";
    el.empty.hidden = all.length > 0 || state.omitted > 0;
    // The heading counts who is here; grey rows (left, still within the
    // window) trail the list without being counted.
    const here = all.filter((m) => shownStatus(m) !== "offline").length
      + (state.filter === "all" ? state.omitted : 0);
    el.memberCount.textContent = here ? `· ${fmtInt(here)}` : "";
  }

  function setCount(total, split, c) {
    setText(total, fmtInt(c.user + c.guest));
    setText(split, splitText(c.user, c.guest));
  }

  function splitText(users, guests) {
    const n = (v, one, many) => `${fmtInt(v)} ${v === 1 ? one : many}`;
    return `${n(users, "user", "users")} · ${n(guests, "guest", "guests")}`;
  }

  function makeRow(m) {
    const li = document.createElement("li");
    li.className = "member";
    li.dataset.key = keyOf(m);
    li.dataset.id = m.id;
    li.dataset.kind = m.kind;
    const dot = document.createElement("span");
    dot.className = "dot";
    const avatar = document.createElement("span");
    avatar.className = "avatar";
    const who = document.createElement("div");
    who.className = "who";
    const name = document.createElement("span");
    name.className = "name";
    const sub = document.createElement("span");
    sub.className = "sub";
    who.append(name, sub);
    const seen = document.createElement("span");
    seen.className = "seen";
    li.append(dot, avatar, who, seen);
    li._parts = { dot, avatar, name, sub, seen };
    return li;
  }

  function fillRow(li, m, now) {
    const p = li._parts;
    const status = shownStatus(m);
    const display = displayName(m);
    setText(p.name, display);
    // The id under the name when a name is shown; the kind for guests.
    const subText = display !== m.id ? m.id : "";
    if (li.dataset.sub !== subText + m.kind) {
      li.dataset.sub = subText + m.kind;
      p.sub.replaceChildren();
      if (m.kind === "guest") {
        const badge = document.createElement("span");
        badge.className = "badge";
        badge.textContent = "guest";
        p.sub.append(badge);
      }
      if (subText) p.sub.append(document.createTextNode(subText));
      if (!subText && m.kind !== "guest") p.sub.append(document.createTextNode("user"));
    }
    const devices = m.devices > 1 ? `${m.devices} devices` : "";
    if (li.dataset.devices !== devices) {
      li.dataset.devices = devices;
      if (!p.devices) {
        p.devices = document.createElement("span");
        p.devices.className = "devices";
        p.sub.after(p.devices);
      }
      p.devices.textContent = devices;
    }
    if (li.dataset.status !== status) {
      li.dataset.status = status;
      li.className = `member ${status}`;
      p.dot.className = `dot ${status}`;
      p.dot.title = status;
    }
    const initials = m.kind === "guest" ? "?" : initialsOf(display);
    setText(p.avatar, initials);
    const color = m.kind === "guest" ? "" : colorOf(m.id);
    if (p.avatar.style.background !== color) p.avatar.style.background = color;
    setText(p.seen, seenLabel(m, status, now));
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function displayName(m) {
    const n = m.meta && typeof m.meta.name === "string" ? m.meta.name.trim() : "";
    return n ? n.slice(0, 80) : m.id;
  }

  function initialsOf(name) {
    const parts = name.split(/[\s._-]+/).filter(Boolean);
    const letters = parts.length > 1 ? [parts[0], parts[parts.length - 1]] : [name];
    return letters.map((p) => Array.from(p)[0] || "").join("").toUpperCase().slice(0, 2) || "?";
  }

  function colorOf(id) {
    let h = 0;
    for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
    return `hsl(${h % 360} 55% 48%)`;
  }

  function seenLabel(m, status, now) {
    if (m.last_seen_ms === null) return "never seen";
    const age = Math.max(0, now - m.last_seen_ms);
    const ago = fmtAgo(age);
    return status === "online" && age < 10_000 ? "active now" : `last seen ${ago}`;
  }

  function fmtAgo(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 5) return "just now";
    if (s < 60) return `${s} s ago`;
    const min = Math.floor(s / 60);
    if (min < 60) return `${min} min ago`;
    const h = Math.floor(min / 60);
    if (h < 48) return `${h} h ago`;
    return `${Math.floor(h / 24)} days ago`;
  }

  function fmtDuration(ms) {
    if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
    if (ms % 60_000 === 0) return `${ms / 60_000} min`;
    return `${Math.round(ms / 1000)} s`;
  }

  const intFmt = new Intl.NumberFormat();
  function fmtInt(n) {
    return typeof n === "number" ? intFmt.format(n) : "–";
  }

  // ---- Chart -------------------------------------------------------------------------

  function svg(tag, attrs, parent) {
    const n = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (parent) parent.append(n);
    return n;
  }

  function niceMax(v) {
    if (v <= 4) return 4;
    const mag = 10 ** Math.floor(Math.log10(v));
    for (const f of [1, 2, 2.5, 5, 10]) if (f * mag >= v) return f * mag;
    return 10 * mag;
  }

  function drawChart() {
    const width = Math.max(280, el.chart.clientWidth - 24);
    const height = 240;
    const pad = { l: 40, r: 10, t: 10, b: 24 };
    const root = svg("svg", {
      viewBox: `0 0 ${width} ${height}`, role: "img", id: "chart-svg",
      "aria-label": "Members online over the last hour: users and guests",
    });
    const samples = state.history;
    const end = samples.length ? samples[samples.length - 1].at_ms : serverNow();
    const start = end - 3_600_000;
    const max = niceMax(Math.max(1, ...samples.map((s) => Math.max(s.users || 0, s.guests || 0))));
    const x = (t) => pad.l + ((t - start) / 3_600_000) * (width - pad.l - pad.r);
    const y = (v) => pad.t + (1 - v / max) * (height - pad.t - pad.b);

    for (let i = 0; i <= 4; i++) {
      const v = (max / 4) * i;
      svg("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), class: "grid-line" }, root);
      const label = svg("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end", class: "axis-label" }, root);
      label.textContent = fmtInt(Math.round(v));
    }
    // Five time labels where they fit, three on a phone.
    for (const minAgo of width < 500 ? [60, 30, 0] : [60, 45, 30, 15, 0]) {
      const label = svg("text", {
        x: x(end - minAgo * 60_000), y: height - 6, class: "axis-label",
        "text-anchor": minAgo === 60 ? "start" : minAgo === 0 ? "end" : "middle",
      }, root);
      label.textContent = minAgo === 0 ? "now" : `−${minAgo} min`;
    }

    if (samples.length < 2) {
      // Between two grid lines, so the text crosses none.
      const t = svg("text", { x: width / 2, y: (y(max / 2) + y((max * 3) / 4)) / 2 + 4, "text-anchor": "middle", class: "placeholder" }, root);
      t.textContent = "Collecting samples… (one every 10 s)";
    } else {
      for (const kind of ["guests", "users"]) {
        const pts = samples.filter((s) => s.at_ms >= start).map((s) => [x(s.at_ms), y(s[kind] || 0)]);
        if (pts.length < 2) continue;
        const line = pts.map((p, i) => `${i ? "L" : "M"}${p[0].toFixed(1)},${p[1].toFixed(1)}`).join("");
        const base = y(0).toFixed(1);
        svg("path", {
          d: `${line}L${pts[pts.length - 1][0].toFixed(1)},${base}L${pts[0][0].toFixed(1)},${base}Z`,
          class: `area ${kind}`,
        }, root);
        svg("path", { d: line, class: `series ${kind}` }, root);
      }
      addHover(root, samples, x, y, pad, height);
    }
    el.chart.replaceChildren(root);
  }

  // A vertical guide with the values of the nearest sample under the pointer.
  function addHover(root, samples, x, y, pad, height) {
    const guide = svg("line", { y1: pad.t, y2: height - pad.b, class: "hover-line", visibility: "hidden" }, root);
    const du = svg("circle", { r: 3.5, class: "hover-dot users", visibility: "hidden" }, root);
    const dg = svg("circle", { r: 3.5, class: "hover-dot guests", visibility: "hidden" }, root);
    const tip = document.createElement("div");
    tip.className = "chart-tip";
    tip.hidden = true;
    root.addEventListener("pointermove", (ev) => {
      const box = root.getBoundingClientRect();
      const vb = root.viewBox.baseVal;
      const px = ((ev.clientX - box.left) / box.width) * vb.width;
      let best = samples[0];
      for (const s of samples) if (Math.abs(x(s.at_ms) - px) < Math.abs(x(best.at_ms) - px)) best = s;
      const sx = x(best.at_ms);
      for (const n of [guide, du, dg]) n.setAttribute("visibility", "visible");
      guide.setAttribute("x1", sx);
      guide.setAttribute("x2", sx);
      du.setAttribute("cx", sx); du.setAttribute("cy", y(best.users || 0));
      dg.setAttribute("cx", sx); dg.setAttribute("cy", y(best.guests || 0));
      const when = new Date(best.at_ms - state.skewMs).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
      tip.textContent = `${when} · ${fmtInt(best.users || 0)} users · ${fmtInt(best.guests || 0)} guests`;
      tip.hidden = false;
      const left = (sx / vb.width) * box.width + 12;
      tip.style.left = `${Math.min(left, box.width - tip.offsetWidth)}px`;
    });
    root.addEventListener("pointerleave", () => {
      for (const n of [guide, du, dg]) n.setAttribute("visibility", "hidden");
      tip.hidden = true;
    });
    queueMicrotask(() => el.chart.append(tip));
  }

  let resizeTimer = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawChart, 150);
  });

  // ---- Start -------------------------------------------------------------------------

  const friends = new HerenowPage.FriendsPanel({ now: serverNow, showError, fmtAgo, initialsOf, colorOf });
  setInterval(() => {
    scheduleRender(true);
    friends.schedule();
  }, LABEL_MS);
  const as = new URLSearchParams(location.search).get("as");
  if (as && as.trim()) {
    state.as = as.trim().slice(0, 64);
    el.joinName.value = state.as;
    el.joinButton.textContent = "Rename";
  }
  state.space = spaceFromUrl();
  startClient();
  setSpace(state.space, false);
})();
