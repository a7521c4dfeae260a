#!/usr/bin/env bash
# Tests the TypeScript client (clients/js) against a real herenow server.
#
# Installs Node.js and npm with apt when they are missing, installs the
# package's dev dependencies (npm ci, into clients/js/node_modules), builds
# it (dist/) and runs its tests (node --test), which start their own
# `herenow serve` on a free port from $HERENOW_BIN (default: the
# repository's target/debug/herenow).
#
# Then it runs the install and usage commands of clients/js/README.md and of
# docs/CLIENTS.md marked `<!-- tested: js -->`, exactly as written
# (extracted by clients/readme-blocks.py), each file's in its own
# temporary folder, with HERENOW_REPO (this checkout) and HERENOW_URL (a
# `herenow serve` of its own, stopped by pid at the end) set, type-checks
# the docs' TypeScript snippets (marked `<!-- tested: js-ts -->`) against
# the package installed there, and checks that the whole run left the
# checkout as it was (`git status --porcelain`; empty on a clean checkout).
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  echo "clients/js/test.sh: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 18 ]; then
  echo "clients/js/test.sh: Node.js 18 or later is needed, found $(node --version)" >&2
  exit 1
fi

if [ -z "${HERENOW_BIN:-}" ]; then
  root=$(git rev-parse --show-toplevel 2>/dev/null || (cd ../.. && pwd))
  HERENOW_BIN="$root/target/debug/herenow"
fi
if [ ! -x "$HERENOW_BIN" ]; then
  echo "clients/js/test.sh: no herenow binary at $HERENOW_BIN; build it (cargo build -p herenow) or set HERENOW_BIN" >&2
  exit 1
fi
export HERENOW_BIN

# The checkout as it is now: nothing below may change it (build outputs go
# to ignored paths, the docs' commands to a temporary folder).
root=$(cd ../.. && pwd)
PWD_JS=$PWD
git_status() { git -C "$root" status --porcelain 2>/dev/null || true; }
status_before=$(git_status)

npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
npm test

# ---- the docs' commands, as written -----------------------------------------
tmp=$(mktemp -d)
hpid=
cleanup() {
  if [ -n "$hpid" ]; then kill "$hpid" 2>/dev/null || true; wait "$hpid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$tmp" && exec "$HERENOW_BIN" serve --listen 127.0.0.1:0 >"$tmp/herenow.out" 2>"$tmp/herenow.err") &
hpid=$!
url=
for _ in $(seq 100); do
  url=$(sed -n 's|.*listening on \(http://[^ /]*\).*|\1|p' "$tmp/herenow.out" | head -n1)
  [ -n "$url" ] && break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "clients/js/test.sh: herenow serve did not start: $(cat "$tmp/herenow.err")" >&2
  exit 1
fi

run_blocks() { # Markdown file, folder name, expected output (a fixed string, or empty)
  local readme=$1 name=$2 expect=$3
  python3 "$root/clients/readme-blocks.py" "$root/$readme" js >"$tmp/$name.sh"
  mkdir "$tmp/$name"
  echo "== $readme: commands marked tested: js, run in a temporary folder"
  sed 's/^/  | /' "$tmp/$name.sh"
  (cd "$tmp/$name" && HERENOW_REPO="$root" HERENOW_URL="$url" bash -euo pipefail "$tmp/$name.sh") >"$tmp/$name.out" 2>"$tmp/$name.err" || {
    echo "clients/js/test.sh: $readme's commands failed:" >&2
    cat "$tmp/$name.out" "$tmp/$name.err" >&2
    exit 1
  }
  cat "$tmp/$name.out"
  if [ -n "$expect" ] && ! grep -qF -- "$expect" "$tmp/$name.out"; then
    echo "clients/js/test.sh: $readme's commands did not print: $expect" >&2
    exit 1
  fi
  # What they installed is the client.
  (cd "$tmp/$name" && node --input-type=module -e 'const m = await import("herenow-client"); if (typeof m.PresenceView !== "function" || typeof m.Herenow !== "function") process.exit(1)')
}
run_blocks clients/js/README.md client "1 user online; Ada: online"
run_blocks docs/CLIENTS.md guide ""
# The docs' TypeScript snippets (marked tested: js-ts) type-check against
# the installed package: they name only calls that exist. Each snippet is its
# own module; what they take as given (an Express app, your webhook handler,
# your session's req.user) is declared here.
python3 - "$root" "$tmp/client" <<'PY'
import importlib.util, sys
root, out = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("readme_blocks", f"{root}/clients/readme-blocks.py")
rb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rb)
n = 0
for readme in ("clients/js/README.md", "docs/CLIENTS.md"):
    with open(f"{root}/{readme}", encoding="utf-8") as f:
        for block in rb.blocks(f.read(), "js-ts"):
            with open(f"{out}/snippet-{n}.mts", "w", encoding="utf-8") as g:
                g.write(f"// {readme}\n{block}\n")
            n += 1
if n == 0:
    sys.exit("clients/js/test.sh: no TypeScript snippet marked tested: js-ts")
print(f"== {n} TypeScript snippets of the docs: type-checked against the installed herenow-client")
PY
cat >"$tmp/client/given.d.ts" <<'TS'
declare module "express" {
  const express: () => unknown;
  export default express;
}
declare const app: {
  use(...handlers: unknown[]): void;
  get(path: string, handler: (req: any, res: { send(body: string): void }) => unknown): void;
  post(path: string, ...handlers: unknown[]): void;
};
declare const onBatch: (batch: import("herenow-client").WebhookBatch) => void;
TS
cat >"$tmp/client/given-user.mts" <<'TS'
export {};
declare module "herenow-client/middleware" {
  interface PresenceRequest {
    user?: { id: string };
  }
}
TS
(cd "$tmp/client" && "$PWD_JS/node_modules/.bin/tsc" --noEmit --strict --target es2022 --module nodenext --moduleResolution nodenext \
  --lib es2022,dom --types node --typeRoots "$PWD_JS/node_modules/@types" snippet-*.mts given-user.mts given.d.ts)

status_after=$(git_status)
if [ "$status_after" != "$status_before" ]; then
  echo "clients/js/test.sh: the tests or the docs' commands changed the checkout:" >&2
  diff <(echo "$status_before") <(echo "$status_after") >&2 || true
  exit 1
fi
if [ -n "$status_before" ]; then
  echo "clients/js/test.sh: the checkout is as it was (it had uncommitted changes before)"
else
  echo "clients/js/test.sh: the checkout is clean (git status --porcelain is empty)"
fi
