// Alice's page watches her friends, for crates/herenow-server/tests/browser.rs:
//
//   node watch_friends.js BASE_URL SCREENSHOT_PATH
//
// The Rust test owns the server and its clock: bob is already Alice's
// friend, she adds cy on the page. Then Bob's page opens (his dot on
// Alice's page turns green), the test moves the store's clock past
// `online_ms` (yellow), and Bob's page closes: still yellow through his
// grace (a page that closes may be a reload), then grey, "last seen …",
// once the test moves the clock past it. Cy, never seen, stays grey with
// no last seen. They take turns over lines:
//
//   script → test (stdout)   test → script (stdin)
//   watching
//   bob-online                idle   (the clock moved past online_ms)
//   bob-away
//   bob-closed                graced (the clock moved past the grace)
//   bob-offline
//   done
//
// Any failure prints "error: ..." to stderr and exits 1. Every wait is
// bounded.
"use strict";

const readline = require("node:readline");
const { chromium } = require("playwright-core");

const [base, screenshotPath] = process.argv.slice(2);
const chromiumPath = process.env.HERENOW_CHROMIUM || "/usr/bin/chromium";
const WAIT_MS = 10000;
const SPACE = "watch-browser-test";
// style.css's light scheme: --online, --away, --offline.
const COLORS = { online: "rgb(47, 179, 68)", away: "rgb(242, 176, 30)", offline: "rgb(163, 170, 184)" };

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

function say(line) {
  process.stdout.write(`${line}\n`);
}

async function open(browser, name, errors) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, colorScheme: "light" });
  const page = await context.newPage();
  page.on("pageerror", (e) => errors.push(`${name}: ${e}`));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`${name} console: ${m.text()}`);
  });
  await page.goto(`${base}/?space=${SPACE}&as=${name}`, { timeout: WAIT_MS });
  await page.waitForSelector('#conn[data-state="live"]', { timeout: WAIT_MS });
  await page.evaluate(() => { window.__herenowNoReload = true; });
  return { context, page };
}

// Waits for `id`'s dot in the friends list to show `status`, then checks
// its colour, and answers the row's "seen" label.
async function dotIs(page, id, status) {
  const selector = `#friends li.friend[data-id="${id}"] .dot.${status}`;
  try {
    await page.waitForSelector(selector, { timeout: WAIT_MS });
  } catch (e) {
    const rows = await page.locator("#friends li.friend").evaluateAll((lis) =>
      lis.map((li) => `${li.dataset.id}:${li.dataset.status}:${li.querySelector(".seen").textContent}`));
    throw new Error(`${id}'s dot never showed ${status}; the list shows [${rows.join(", ")}]`);
  }
  const color = await page.locator(selector).evaluate((d) => getComputedStyle(d).backgroundColor);
  if (color !== COLORS[status]) throw new Error(`${id}'s ${status} dot is ${color}, not ${COLORS[status]}`);
  return page.locator(`#friends li.friend[data-id="${id}"] .seen`).textContent();
}

async function main() {
  if (!base || !screenshotPath) throw new Error("usage: node watch_friends.js BASE_URL SCREENSHOT_PATH");
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    timeout: 15000,
  });
  const errors = [];
  try {
    const alice = await open(browser, "alice", errors);
    // Bob, her friend already, has never been seen.
    let seen = await dotIs(alice.page, "bob", "offline");
    if (seen !== "never seen") throw new Error(`bob, never seen, is labelled "${seen}"`);
    // She adds cy on the page: the server follows her friend set.
    await alice.page.fill("#friend-input", "cy");
    await alice.page.click("#friend-form button[type=submit]");
    seen = await dotIs(alice.page, "cy", "offline");
    if (seen !== "never seen") throw new Error(`cy, never seen, is labelled "${seen}"`);
    say("watching");

    const bob = await open(browser, "bob", errors);
    seen = await dotIs(alice.page, "bob", "online");
    if (seen !== "online now") throw new Error(`bob, online, is labelled "${seen}"`);
    say("bob-online");

    await expectLine("idle");
    seen = await dotIs(alice.page, "bob", "away");
    if (!/^last seen /.test(seen)) throw new Error(`bob, away, is labelled "${seen}"`);
    say("bob-away");

    // Bob closes his page: his socket closes without a goodbye, so he
    // stays for his grace, then leaves.
    await bob.context.close();
    say("bob-closed");
    await expectLine("graced");
    seen = await dotIs(alice.page, "bob", "offline");
    // On the server's clock (which the test set to 2023), not the
    // browser's: a page that used its own would say "… days ago".
    if (!/^last seen (just now|\d+ s ago|\d+ min ago)$/.test(seen)) {
      throw new Error(`bob, gone, is labelled "${seen}"`);
    }
    // Cy never came: still grey, with no last seen.
    seen = await dotIs(alice.page, "cy", "offline");
    if (seen !== "never seen") throw new Error(`cy, never seen, is labelled "${seen}"`);
    const count = await alice.page.locator("#friends-count").textContent();
    if (count !== "· 0 of 2 here") throw new Error(`the friends count says "${count}"`);
    const still = await alice.page.evaluate(() => window.__herenowNoReload === true);
    if (!still) throw new Error("alice's page reloaded");
    say("bob-offline");

    await alice.page.screenshot({ path: screenshotPath, fullPage: true, timeout: WAIT_MS });
    if (errors.length) throw new Error(`the pages reported errors:\n${errors.join("\n")}`);
    say("done");
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
