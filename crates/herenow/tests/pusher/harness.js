// What the scripts of this folder share (run by crates/herenow/tests/
// pusher_clients.rs, pusher_js.rs, pusher_users.rs and pusher_webhooks.rs):
// bounded waits, docs/PUSHER.md's Laravel snippets, and a tiny auth endpoint as an
// app serves one.
//
// Every wait is bounded; nothing here retries what failed.

'use strict';

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');

const STEP = 15_000;

function within(what, promise, ms = STEP) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function until(what, check, ms = STEP) {
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() - started > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// docs/PUSHER.md, the guide that tells an app on pusher-js or Laravel Echo
// how to point at herenow.
function guide() {
  return fs.readFileSync(path.join(__dirname, '../../../../docs/PUSHER.md'), 'utf8');
}

// The first fenced block of `lang` in that guide whose text includes `marker`.
function guideBlock(lang, marker) {
  const re = new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g');
  for (const m of guide().matchAll(re)) {
    if (m[1].includes(marker)) return m[1];
  }
  throw new Error(`docs/PUSHER.md has no \`\`\`${lang} block with ${marker}`);
}

// A Laravel `.env`: KEY=VALUE lines, quotes removed, `${OTHER}` expanded
// from the lines above it (as Laravel's dotenv and Vite do).
function parseDotenv(text) {
  const env = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq < 0) throw new Error(`not a .env line: ${line}`);
    let value = line.slice(eq + 1).trim();
    if (/^".*"$/.test(value) || /^'.*'$/.test(value)) value = value.slice(1, -1);
    env[line.slice(0, eq).trim()] = value.replace(/\$\{(\w+)\}/g, (_, k) => env[k] ?? '');
  }
  return env;
}

// An auth endpoint as an app serves one: `POST` with the form pusher-js
// sends (`socket_id`, `channel_name`), the user named by the
// `Authorization: Bearer USER` header; `decide(user, channel)` gives the
// presence data, `true` for a private channel, or a status to refuse
// with; `sign(socketId, channel, presenceData)` is the server library's
// authorizeChannel. Extra `routes` (path → handler(req, res)) serve
// anything else. Resolves to { url, close }.
function authServer({ decide, sign, routes = {} }) {
  const server = http.createServer((req, res) => {
    const route = routes[req.url.split('?')[0]];
    if (route) return route(req, res);
    let body = '';
    req.on('data', (c) => { body += c; if (body.length > 10_000) req.destroy(); });
    req.on('end', async () => {
      try {
        const form = new URLSearchParams(body);
        const socketId = form.get('socket_id');
        const channel = form.get('channel_name');
        const user = (req.headers.authorization || '').replace(/^Bearer /, '') || null;
        const decision = decide(user, channel);
        if (typeof decision === 'number') {
          res.writeHead(decision, { 'content-type': 'application/json' });
          return res.end(JSON.stringify({ message: 'This action is unauthorized.' }));
        }
        const data = decision === true ? undefined : decision;
        const auth = await sign(socketId, channel, data);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(auth));
      } catch (e) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(e && e.stack));
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
      });
    });
  });
}

// `herenow serve --listen 127.0.0.1:0 ARGS…` from HERENOW_BIN, its
// environment scrubbed of HERENOW_* and RUST_LOG: resolves, once it prints
// its address, to { child, url (a URL), log() }.
async function serveHerenow(args, ms = STEP) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('HERENOW_') && k !== 'RUST_LOG'),
  );
  const child = spawn(process.env.HERENOW_BIN, ['serve', '--listen', '127.0.0.1:0', ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  const lines = readline.createInterface({ input: child.stdout });
  const line = await within('the listening line', new Promise((resolve, reject) => {
    lines.once('line', resolve);
    child.once('close', (code) => reject(new Error(`herenow exited with ${code}: ${log}`)));
  }), ms);
  return { child, url: new URL(line.split(/\s+/).find((w) => w.startsWith('http://'))), log: () => log };
}

module.exports = { STEP, within, until, guideBlock, parseDotenv, authServer, serveHerenow };
