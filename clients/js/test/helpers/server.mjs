// Starts a real `herenow serve` for the tests, on a free port the server
// picks itself (--listen 127.0.0.1:0), and stops it afterwards.
//
// The binary comes from $HERENOW_BIN, or the repository's target/debug/herenow.

import { spawn, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const here = dirname(fileURLToPath(import.meta.url));

/** The herenow binary the tests run. */
export function herenowBin() {
  if (process.env.HERENOW_BIN) return process.env.HERENOW_BIN;
  let root;
  try {
    root = execFileSync("git", ["rev-parse", "--show-toplevel"], { cwd: here, encoding: "utf8" }).trim();
  } catch {
    root = resolve(here, "../../../..");
  }
  return resolve(root, "target/debug/herenow");
}

/** A running server: its base URL, and stop(). */
export class Server {
  constructor(child, baseUrl, args) {
    this.child = child;
    this.baseUrl = baseUrl;
    this.args = args;
    this.stderr = "";
  }

  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and waits for it to exit. */
  async stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * Starts `herenow serve --listen 127.0.0.1:PORT` (0: any free port) with
 * `extra` flags, reads the port from its "listening" line, and polls
 * /readyz (bounded: 10 s) until the store answers.
 */
export async function startServer(extra = [], { port = 0 } = {}) {
  const bin = herenowBin();
  if (!existsSync(bin)) {
    throw new Error(`herenow binary not found at ${bin}: build it (cargo build -p herenow) or set HERENOW_BIN`);
  }
  const args = ["serve", "--listen", `127.0.0.1:${port}`, ...extra];
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, RUST_LOG: "warn" } });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-8192);
  });
  const lines = createInterface({ input: child.stdout });
  const baseUrl = await new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`herenow did not start within 10 s: ${stderr}`)), 10_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`herenow exited with ${code} before listening: ${stderr}`));
    });
    lines.on("line", (line) => {
      const m = /listening on (http:\/\/[^\s]+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1].replace(/\/$/, ""));
      }
    });
  });
  child.removeAllListeners("exit");
  const server = new Server(child, baseUrl, args);
  Object.defineProperty(server, "stderr", { get: () => stderr });
  // Readiness: a short bounded poll for process start-up only.
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const res = await fetch(`${baseUrl}/readyz`);
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not accepting yet
    }
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`herenow at ${baseUrl} not ready within 10 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return server;
}

/** A port nobody listens on (bound, then released). */
export async function closedPort() {
  const net = await import("node:net");
  return new Promise((resolvePort, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

/** A unique name for this test run (spaces, users), so tests never share state. */
let n = 0;
export function unique(prefix) {
  n += 1;
  return `${prefix}-${process.pid}-${n}`;
}

/** Resolves with the promise's value, or rejects after `ms` saying what was awaited. */
export function within(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}

/**
 * A TCP proxy in front of a server, whose open connections a test can cut
 * (a dropped network, a restarted load balancer) while the server runs on.
 */
export async function startProxy(targetUrl) {
  const net = await import("node:net");
  const target = new URL(targetUrl);
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", drop);
    upstream.on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    /** Connections open through the proxy now. */
    get open() {
      return sockets.size / 2;
    },
    /** Cuts every connection open now; new ones are still accepted. */
    cut() {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    close() {
      this.cut();
      return new Promise((r) => server.close(r));
    },
  };
}

/** Reads `herenow_heartbeats_total` from /metrics: the server's own count of heartbeats recorded. */
export async function heartbeatsTotal(baseUrl) {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const m = /^herenow_heartbeats_total(?:\{[^}]*\})?\s+(\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

/** A `fetch` that records every request (method, path, JSON body) before sending it. */
export function recordingFetch() {
  const calls = [];
  const f = async (url, init = {}) => {
    const u = new URL(String(url));
    calls.push({ method: init.method ?? "GET", path: u.pathname, query: u.search, body: init.body ? JSON.parse(init.body) : undefined });
    return fetch(url, init);
  };
  f.calls = calls;
  return f;
}
