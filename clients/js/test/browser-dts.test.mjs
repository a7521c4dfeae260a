// browser/client.d.ts is generated from crates/herenow-server/assets/client.js
// (its code and JSDoc, checked by tsc): it must be exactly what the
// generator makes of client.js now, so the two cannot drift apart.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { OUTPUT, SOURCE, cleanComment, generate } from "../scripts/browser-dts.mjs";

test("browser/client.d.ts is what client.js generates today", () => {
  const fresh = generate();
  const checkedIn = readFileSync(OUTPUT, "utf8");
  assert.ok(
    fresh === checkedIn,
    `${OUTPUT} is out of date with ${SOURCE}: run \`npm run browser-types\` in clients/js and commit the result`,
  );
});

test("the declarations cover what client.js puts on the global Herenow", () => {
  const source = readFileSync(SOURCE, "utf8");
  const assigned = /global\.Herenow = \{([^}]*)\}/.exec(source);
  assert.ok(assigned, "client.js assigns global.Herenow");
  const names = assigned[1].split(",").map((p) => p.split(":")[0].trim()).filter(Boolean);
  assert.deepEqual(names, ["Client", "Space", "Watch", "version"]);
  const dts = readFileSync(OUTPUT, "utf8");
  for (const name of names) assert.match(dts, new RegExp(`export (class|const) ${name}\\b`), name);
  assert.doesNotMatch(dts, /\b_send\b|\b_handlers\b|@internal/, "internals stay out of the types");
});

test("JSDoc types are dropped from the comments the declarations already type", () => {
  assert.equal(cleanComment("/** @type {Map<string, { a: 1 }>} */"), null);
  assert.equal(cleanComment("/**\n * Joins.\n * @param {Meta | null} [meta] what to show\n * @returns {Promise<X>} the ok\n */"), "/**\n * Joins.\n * @param [meta] what to show\n * @returns the ok\n */");
  assert.equal(cleanComment("/** @internal @type {any} */"), null);
});
