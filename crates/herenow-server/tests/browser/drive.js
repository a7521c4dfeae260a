// Drives headless Chromium through the who's-online page for
// crates/herenow-server/tests/browser.rs.
//
//   node drive.js BASE_URL SCREENSHOT_PATH USER_DATA_DIR
//
// The Rust test owns the server and sends heartbeats and leaves through the
// HTTP API; this script only watches the page. They take turns over lines:
//
//   script → test (stdout)   test → script (stdin)
//   connected                 joined      (ada's heartbeat was sent)
//   appeared                  left        (ada's leave was sent)
//   disappeared
//   done
//
// Any failure prints "error: ..." to stderr and exits 1. Every wait is
// bounded, so a broken page fails in seconds rather than hanging.
"use strict";

const readline = require("node:readline");
const { chromium } = require("playwright-core");

const [base, screenshotPath, userDataDir] = process.argv.slice(2);
const chromiumPath = process.env.HERENOW_CHROMIUM || "/usr/bin/chromium";
const WAIT_MS = 8000;

const lines = readline.createInterface({ input: process.stdin });
const pending = [];
const waiters = [];
lines.on("line", (l) => {
  const w = waiters.shift();
  if (w) w(l.trim());
  else pending.push(l.trim());
});

function nextLine() {
  if (pending.length) return Promise.resolve(pending.shift());
  return new Promise((resolve) => waiters.push(resolve));
}

async function expectLine(want) {
  const got = await nextLine();
  if (got !== want) throw new Error(`expected "${want}" from the test, got "${got}"`);
}

function say(line) {
  process.stdout.write(`${line}\n`);
}

async function main() {
  if (!base || !screenshotPath || !userDataDir) {
    throw new Error("usage: node drive.js BASE_URL SCREENSHOT_PATH USER_DATA_DIR");
  }
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    viewport: { width: 1280, height: 900 },
    timeout: 15000,
  });
  try {
    const page = context.pages()[0] || (await context.newPage());
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error") pageErrors.push(`console: ${m.text()}`);
    });

    await page.goto(`${base}/?space=browser-test`, { timeout: WAIT_MS });
    await page.waitForSelector('#conn[data-state="live"]', { timeout: WAIT_MS });
    // Survives only if the page is never reloaded.
    await page.evaluate(() => { window.__herenowNoReload = true; });
    say("connected");

    await expectLine("joined");
    const row = page.locator('li.member[data-key="user:ada"]');
    await row.waitFor({ state: "visible", timeout: WAIT_MS });
    const name = await row.locator(".name").textContent();
    if (name !== "Ada Lovelace") throw new Error(`ada's row shows name "${name}"`);
    const dot = await row.locator(".dot").getAttribute("class");
    if (!/\bonline\b/.test(dot || "")) throw new Error(`ada's dot is "${dot}", not online`);
    const seen = await row.locator(".seen").textContent();
    if (!/active now|just now|s ago/.test(seen || "")) throw new Error(`ada's label says "${seen}"`);
    const online = await page.locator("#online-split").textContent();
    if (!online.startsWith("1 user ·")) throw new Error(`online count shows "${online}", not 1 user`);
    await assertNoReload(page);
    say("appeared");

    await expectLine("left");
    await row.waitFor({ state: "detached", timeout: WAIT_MS });
    await assertNoReload(page);
    say("disappeared");

    const chart = await page.locator("#chart svg#chart-svg").count();
    if (chart !== 1) throw new Error("the chart's SVG is missing");
    await page.screenshot({ path: screenshotPath, fullPage: true, timeout: WAIT_MS });
    if (pageErrors.length) throw new Error(`the page reported errors:\n${pageErrors.join("\n")}`);
    say("done");
  } finally {
    await context.close();
  }
}

async function assertNoReload(page) {
  const still = await page.evaluate(() => window.__herenowNoReload === true);
  if (!still) throw new Error("the page reloaded");
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`error: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
