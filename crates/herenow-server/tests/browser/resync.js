// A join storm against a page whose main thread is busy, for
// crates/herenow-server/tests/browser.rs (issue 15):
//
//   node resync.js BASE_URL EXPECTED_MEMBERS
//
// The page loads /client.js and subscribes to the space "storm". The
// script tells the test "subscribed", blocks the page's main thread (so
// the browser stops reading the socket), and tells the test "blocking";
// the test makes thousands of members join and some leave, then says
// "stormed". Once the page runs again, its client must have lagged and
// caught up through a resync snapshot: its map is then exactly the room
// (EXPECTED_MEMBERS ids, m500 … m8999), and the socket was never cut.
//
// Any failure prints "error: ..." to stderr and exits 1. Every wait is
// bounded.
"use strict";

const readline = require("node:readline");
const { chromium } = require("playwright-core");

const [base, expected] = process.argv.slice(2);
const chromiumPath = process.env.HERENOW_CHROMIUM || "/usr/bin/chromium";
const WAIT_MS = 60000;

const lines = readline.createInterface({ input: process.stdin });
const pending = [];
const waiters = [];
lines.on("line", (l) => {
  const w = waiters.shift();
  if (w) w(l.trim());
  else pending.push(l.trim());
});

async function expectLine(want) {
  const got = pending.length ? pending.shift() : await new Promise((r) => waiters.push(r));
  if (got !== want) throw new Error(`expected "${want}" from the test, got "${got}"`);
}

async function main() {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    // A page of the server's origin, with nothing but the client.
    await page.goto(`${base}/healthz`, { timeout: WAIT_MS });
    await page.addScriptTag({ url: `${base}/client.js` });
    const token = await page.evaluate(async (base) => {
      const r = await fetch(`${base}/v1/tokens`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ user: "reader", spaces: ["storm"] }),
      });
      return (await r.json()).token;
    }, base);
    await page.evaluate((token) => {
      const client = new Herenow.Client({ token });
      const room = client.space("storm");
      window.__t = { client, room, lagged: 0, closes: [] };
      client.on("lagged", () => { window.__t.lagged += 1; });
      client.on("state", (s) => { if (s !== "open") window.__t.closes.push(s); });
      room.subscribe();
      client.connect();
    }, token);
    await page.waitForFunction(() => window.__t.room.synced, null, { timeout: WAIT_MS });
    await page.evaluate(() => { window.__t.closes = []; });
    process.stdout.write("subscribed\n");
    // Block the main thread for a while: the socket is not read meanwhile.
    const busy = page.evaluate(() => {
      const until = Date.now() + 4000;
      while (Date.now() < until) { /* the page is busy */ }
    });
    process.stdout.write("blocking\n");
    await expectLine("stormed");
    await busy;
    const want = Number(expected);
    await page.waitForFunction(
      (want) => window.__t.room.synced && window.__t.room.members.size === want,
      want,
      { timeout: WAIT_MS },
    );
    const result = await page.evaluate(() => {
      const ids = new Set([...window.__t.room.members.values()].map((m) => m.id));
      let missing = 0;
      for (let i = 500; i < 9000; i++) if (!ids.has(`m${i}`)) missing += 1;
      return { size: ids.size, missing, lagged: window.__t.lagged, closes: window.__t.closes };
    });
    if (result.missing !== 0) throw new Error(`${result.missing} members missing: ${JSON.stringify(result)}`);
    if (result.lagged < 1) throw new Error(`the page never lagged: ${JSON.stringify(result)}`);
    if (result.closes.length) throw new Error(`the socket was cut: ${JSON.stringify(result)}`);
    if (errors.length) throw new Error(errors.join("; "));
    process.stdout.write("exact\n");
  } finally {
    await browser.close();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`error: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
