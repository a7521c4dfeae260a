// Two browser pages as two users, over the WebSocket and /client.js, for
// crates/herenow-server/tests/browser.rs:
//
//   node two_users.js BASE_URL SCREENSHOT_PATH
//
// Alice's page and Bob's page (separate browser contexts, like two people)
// open the same space with `?as=NAME`: each joins as that user. Each must
// see the other join, live. Then Bob's page closes, and Alice's page must
// see him leave once his grace is over, without a reload. Prints one line per step to stdout:
//
//   alice-sees-bob, bob-sees-alice, alice-sees-bob-leave, done
//
// Any failure prints "error: ..." to stderr and exits 1. Every wait is
// bounded.
"use strict";

const { chromium } = require("playwright-core");

const [base, screenshotPath] = process.argv.slice(2);
const chromiumPath = process.env.HERENOW_CHROMIUM || "/usr/bin/chromium";
const WAIT_MS = 10000;
const GRACE_MS = 5000;
const SPACE = "ws-browser-test";

function say(line) {
  process.stdout.write(`${line}\n`);
}

async function open(browser, name, errors) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
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

async function seesOnline(page, who) {
  const row = page.locator(`li.member[data-key="user:${who}"]`);
  await row.waitFor({ state: "visible", timeout: WAIT_MS });
  await page.waitForFunction(
    (key) => document.querySelector(`li.member[data-key="${key}"] .dot.online`) !== null,
    `user:${who}`,
    { timeout: WAIT_MS },
  );
  return row;
}

async function assertNoReload(page, name) {
  const still = await page.evaluate(() => window.__herenowNoReload === true);
  if (!still) throw new Error(`${name}'s page reloaded`);
}

async function main() {
  if (!base || !screenshotPath) throw new Error("usage: node two_users.js BASE_URL SCREENSHOT_PATH");
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    timeout: 15000,
  });
  const errors = [];
  try {
    const alice = await open(browser, "alice", errors);
    const bob = await open(browser, "bob", errors);

    // Each sees the other (and itself) online, live.
    await seesOnline(alice.page, "bob");
    await seesOnline(alice.page, "alice");
    say("alice-sees-bob");
    await seesOnline(bob.page, "alice");
    await seesOnline(bob.page, "bob");
    say("bob-sees-alice");
    const count = await alice.page.locator("#online-split").textContent();
    if (!count.startsWith("2 users ·")) throw new Error(`alice's page counts "${count}", not 2 users`);

    // Bob closes his page: the socket closes without a goodbye (a page
    // that closes may be reloading), so he leaves once his grace (5 s by
    // default, on the system clock here) is over.
    await bob.context.close();
    await alice.page
      .locator('li.member[data-key="user:bob"]')
      .waitFor({ state: "detached", timeout: WAIT_MS + GRACE_MS });
    await assertNoReload(alice.page, "alice");
    say("alice-sees-bob-leave");

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
