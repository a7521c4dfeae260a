#!/usr/bin/env bash
# Runs the Python client's install and usage commands exactly as the docs
# write them: the blocks marked `<!-- tested: python -->` (shell) and
# `<!-- tested: python-code -->` (Python, run by the `python` those
# commands installed into) of clients/python/README.md and of
# docs/CLIENTS.md, each file's in a new temporary directory, with
# HERENOW_REPO set to this checkout and HERENOW_SERVER to a `herenow serve`
# of this script's own.
# Then checks that they left the checkout as it was (`git status`).
#
#   HERENOW_BIN=/path/to/herenow clients/python/readme-test.sh
#
# Called by clients/python/test.sh; needs python3 with venv and pip's index.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel)"
: "${HERENOW_BIN:?set HERENOW_BIN to a herenow binary}"

state() {  # what the checkout looks like to git, ignored files aside
    git -C "$root" status --porcelain --untracked-files=all
    git -C "$root" diff HEAD | sha256sum
}
before="$(state)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/herenow-py-readme.XXXXXX")"
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# A server of our own on a free port; its first stdout line names it.
"$HERENOW_BIN" serve --listen 127.0.0.1:0 >"$tmp/server.out" 2>"$tmp/server.err" &
pid=$!
url=""
for _ in $(seq 1 150); do
    url="$(sed -n 's|.*listening on \(http://[0-9.:]*\).*|\1|p' "$tmp/server.out" | head -n1)"
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "readme-test.sh: herenow did not start: $(cat "$tmp/server.err")" >&2
    exit 1
fi
python3 - "$url" <<'EOF'
import sys, time, urllib.request
deadline = time.monotonic() + 15
while True:
    try:
        if urllib.request.urlopen(sys.argv[1] + "/readyz", timeout=1).status == 200:
            break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("readme-test.sh: herenow never became ready")
        time.sleep(0.05)
EOF

export HERENOW_REPO="$root" HERENOW_SERVER="$url"
unset HERENOW_API_KEY VIRTUAL_ENV PYTHONPATH || true

blocks() { python3 "$root/clients/readme-blocks.py" "$@"; }

n=0
for readme in "$root/clients/python/README.md" "$root/docs/CLIENTS.md"; do
    n=$((n + 1))
    dir="$tmp/$n"
    mkdir -p "$dir"
    {
        blocks "$readme" python
        echo "python - <<'HERENOW_README_PY'"
        blocks "$readme" python-code
        echo "HERENOW_README_PY"
    } >"$dir/run.sh"
    echo "readme-test.sh: ${readme#"$root"/}, in $dir:"
    sed 's/^/    /' "$dir/run.sh"
    (cd "$dir" && bash -euo pipefail run.sh) || {
        echo "readme-test.sh: the commands of ${readme#"$root"/} failed" >&2
        exit 1
    }
done

after="$(state)"
if [ "$before" != "$after" ]; then
    echo "readme-test.sh: the docs' commands changed the checkout:" >&2
    diff <(echo "$before") <(echo "$after") >&2 || true
    exit 1
fi
if [ -n "$(git -C "$root" status --porcelain)" ]; then
    echo "readme-test.sh: the docs' commands ran; the checkout was already changed before them (git status not empty)" >&2
else
    echo "readme-test.sh: the docs' commands ran; git status --porcelain is empty"
fi
