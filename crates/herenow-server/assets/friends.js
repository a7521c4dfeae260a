// The signed-in user's friends with live dots, for the page at `/`.
//
// One watch of the friend set over /client.js (`watch({friends: true})`,
// anywhere): a friend is green while online in any space, yellow while
// away, grey once gone, with "last seen …" on the server's clock (the
// client's offset from `welcome`, so a browser whose clock is off still
// says "2 min ago"). Friends added or removed anywhere show up live: the
// server follows the set. The set itself is the API's (`POST
// /v1/friends/{user}/add` and `/remove`), open to the page on a server
// without API keys, as its tokens are. Ids are user input: text only.
"use strict";

(() => {
  const RANK = { online: 0, away: 1, offline: 2 };

  const $ = (id) => document.getElementById(id);

  class FriendsPanel {
    // opts.now(): the server's clock in ms; opts.showError(text);
    // opts.fmtAgo(ms), opts.initialsOf(name), opts.colorOf(id): the page's
    // own formatting, so both lists read alike.
    constructor(opts) {
      this.opts = opts;
      this.el = {
        list: $("friends"), empty: $("friends-empty"), count: $("friends-count"),
        form: $("friend-form"), input: $("friend-input"),
      };
      this.user = null; // whose friends, or null when the page is a guest
      this.watch = null;
      this.offs = [];
      this.rows = new Map(); // id → <li>, reused between renders
      this.queued = false;
      this.el.form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        this.add(this.el.input.value.trim());
      });
    }

    // Shows `user`'s friends through `client` (a new client after a
    // rename); no user: a hint to join with a name instead.
    start(client, user) {
      for (const off of this.offs) off();
      this.offs = [];
      this.user = user;
      this.watch = null;
      this.el.form.hidden = !user;
      if (user) {
        const watch = client.watch({ friends: true });
        this.watch = watch;
        this.offs = [
          watch.on("change", () => this.schedule()),
          watch.on("error", (e) => this.opts.showError(`friends: ${e.code}: ${e.message}`)),
        ];
      }
      this.schedule();
    }

    async add(id) {
      if (!id || !this.user) return;
      if (id === this.user) {
        this.opts.showError("That is you: add someone else.");
        return;
      }
      if (await this.change("add", id)) this.el.input.value = "";
    }

    // Adds or removes one friend through the API; the watch tells the rest.
    async change(how, id) {
      const user = this.user;
      try {
        const res = await fetch(`/v1/friends/${encodeURIComponent(user)}/${how}`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify({ friends: [id] }),
        });
        if (res.ok) {
          this.opts.showError("");
          return true;
        }
        let detail = `${res.status}`;
        try { detail = (await res.json()).detail || detail; } catch (_) { /* not JSON */ }
        this.opts.showError(res.status === 401 || res.status === 403
          ? "This server has API keys: friends are set by its backend, not by this page."
          : `Friend not ${how === "add" ? "added" : "removed"}: ${detail}`);
      } catch (e) {
        this.opts.showError(`Friend not ${how === "add" ? "added" : "removed"}: ${e.message}`);
      }
      return false;
    }

    // Coalesces a burst of changes into one render.
    schedule() {
      if (this.queued) return;
      this.queued = true;
      requestAnimationFrame(() => this.render());
    }

    render() {
      this.queued = false;
      const watch = this.watch;
      const users = watch ? watch.list() : [];
      const now = this.opts.now();
      const keep = new Set();
      let prev = null;
      for (const u of users) {
        keep.add(u.id);
        let row = this.rows.get(u.id);
        if (!row) {
          row = this.makeRow(u.id);
          this.rows.set(u.id, row);
        }
        this.fillRow(row, u, now);
        const want = prev ? prev.nextSibling : this.el.list.firstChild;
        if (want !== row) this.el.list.insertBefore(row, want);
        prev = row;
      }
      for (const [id, row] of this.rows) {
        if (!keep.has(id)) {
          row.remove();
          this.rows.delete(id);
        }
      }
      const online = users.filter((u) => u.status !== "offline").length;
      this.el.count.textContent = users.length ? `· ${online} of ${users.length} here` : "";
      this.el.empty.hidden = users.length > 0;
      this.el.empty.textContent = !this.user
        ? "Join with your name to see your friends here, live."
        : watch && watch.synced ? "No friends yet: add one by id." : "Loading your friends…";
    }

    makeRow(id) {
      const li = document.createElement("li");
      li.className = "member friend";
      li.dataset.id = id;
      const dot = document.createElement("span");
      dot.className = "dot";
      const avatar = document.createElement("span");
      avatar.className = "avatar";
      avatar.textContent = this.opts.initialsOf(id);
      avatar.style.background = this.opts.colorOf(id);
      const who = document.createElement("div");
      who.className = "who";
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = id;
      const sub = document.createElement("span");
      sub.className = "sub";
      who.append(name, sub);
      const seen = document.createElement("span");
      seen.className = "seen";
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "unfriend";
      remove.textContent = "×";
      remove.title = `Remove ${id} from your friends`;
      remove.setAttribute("aria-label", remove.title);
      remove.addEventListener("click", () => this.change("remove", id));
      li.append(dot, avatar, who, seen, remove);
      li._parts = { dot, sub, seen };
      return li;
    }

    fillRow(li, u, now) {
      const p = li._parts;
      const status = u.status in RANK ? u.status : "offline";
      if (li.dataset.status !== status) {
        li.dataset.status = status;
        li.className = `member friend ${status}`;
        p.dot.className = `dot ${status}`;
        p.dot.title = status;
      }
      // Where, when the token may know it (watching anywhere).
      setText(p.sub, u.space && status !== "offline" ? `in ${u.space}` : status);
      setText(p.seen, this.seenLabel(u, status, now));
    }

    // Online needs no time (a friend's heartbeats send nothing while its
    // status holds, so its last seen ages); away and gone show their last
    // seen, which stopped moving when they did.
    seenLabel(u, status, now) {
      if (status === "online") return "online now";
      if (u.last_seen_ms === null) return status === "away" ? "away" : "never seen";
      return `last seen ${this.opts.fmtAgo(Math.max(0, now - u.last_seen_ms))}`;
    }
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  window.HerenowPage = Object.assign(window.HerenowPage || {}, { FriendsPanel });
})();
