#!/usr/bin/env node
// Packs herenow-client into a tarball without writing into the checkout,
// and prints the tarball's path, so that one command installs it:
//
//   npm install "$(node "$HERENOW_REPO/clients/js/scripts/pack.mjs")"
//
// It copies the package's sources (package.json, package-lock.json,
// tsconfig.json, README.md, src/, browser/client.d.ts) into a temporary
// folder, installs the build's dev dependencies there (npm ci: TypeScript
// and Node's types), runs `npm pack` there (its prepack script builds
// dist/), and leaves herenow-client-VERSION.tgz in the folder given as the
// first argument (default: the current one), which is where
// `npm install` then finds it again. npm's own output goes to stderr; only
// the tarball's path goes to stdout. The temporary folder is removed.

import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const dest = resolve(process.argv[2] ?? process.cwd());
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

const work = mkdtempSync(join(tmpdir(), "herenow-client-pack-"));
try {
  for (const f of ["package.json", "package-lock.json", "tsconfig.json", "README.md", "src", join("browser", "client.d.ts")]) {
    const from = join(pkg, f);
    if (!existsSync(from)) throw new Error(`pack.mjs: ${from} is missing`);
    mkdirSync(dirname(join(work, f)), { recursive: true });
    cpSync(from, join(work, f), { recursive: true });
  }
  const run = (args) =>
    execFileSync(npm, args, { cwd: work, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8", shell: process.platform === "win32" });
  process.stderr.write(run(["ci", "--no-audit", "--no-fund", "--loglevel=error"]));
  mkdirSync(dest, { recursive: true });
  const out = run(["pack", "--json", "--loglevel=error", "--pack-destination", dest]);
  // prepack's build writes its own lines first; the JSON array is the rest.
  const json = JSON.parse(out.slice(out.indexOf("[")));
  const file = join(dest, json[0].filename);
  if (!existsSync(file)) throw new Error(`pack.mjs: npm pack did not write ${file}`);
  process.stdout.write(`${file}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
