#!/usr/bin/env bash
# The Go client's checks: gofmt, go vet, and go test against a real
# herenow server that the tests start themselves from $HERENOW_BIN
# (default: the repository's target/debug/herenow).
#
# Needs only Debian's golang-go (Go 1.19 or newer; installed with apt when
# `go` is missing). The module is the standard library only: no module is
# downloaded (GOPROXY=off), and no newer toolchain either (GOTOOLCHAIN=local).
# The tests run under the race detector when gcc is there (cgo needs it;
# about 45 s more on a cold build cache); HERENOW_GO_RACE=0 or 1 decides.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || (cd "$here/../.." && pwd))"
export HERENOW_BIN="${HERENOW_BIN:-$root/target/debug/herenow}"
if [ ! -x "$HERENOW_BIN" ]; then
    echo "clients/go: no server at $HERENOW_BIN; build it (cargo build -p herenow) or set HERENOW_BIN" >&2
    exit 1
fi

if ! command -v go >/dev/null 2>&1; then
    echo "clients/go: installing golang-go with apt" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go >/dev/null
fi

export GOTOOLCHAIN=local GOPROXY=off GOFLAGS="${GOFLAGS:-}"
# A machine without $HOME still gets a build cache (inside the client's
# folder, git-ignored).
if [ -z "$(go env GOCACHE 2>/dev/null)" ] || [ "$(go env GOCACHE)" = "off" ]; then
    export GOCACHE="$here/.gocache"
fi
if [ -z "$(go env GOPATH 2>/dev/null)" ]; then
    export GOPATH="$here/.gopath"
fi

version="$(go env GOVERSION)" # go1.19.8
minor="$(echo "$version" | sed -E 's/^go1\.([0-9]+).*/\1/')"
if ! [ "$minor" -ge 19 ] 2>/dev/null; then
    echo "clients/go: needs Go 1.19 or newer, found $version" >&2
    exit 1
fi

cd "$here"
echo "clients/go: $version, server $HERENOW_BIN"

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
    echo "clients/go: not gofmt-formatted:" >&2
    echo "$unformatted" >&2
    exit 1
fi
go vet ./...

race=()
want_race="${HERENOW_GO_RACE:-auto}"
if [ "$want_race" = "auto" ]; then
    want_race=0
    if command -v gcc >/dev/null 2>&1 && [ "$(go env CGO_ENABLED)" = "1" ]; then want_race=1; fi
fi
if [ "$want_race" = "1" ]; then race=(-race); fi
echo "clients/go: gofmt and go vet clean; go test ${race[*]:-}"
go test "${race[@]}" -count=1 -timeout 110s ./...

# The install and usage commands of clients/go/README.md and docs/CLIENTS.md,
# exactly as written (the blocks marked `<!-- tested: go -->`, printed by
# clients/readme-blocks.py), run in a temporary directory against a
# `herenow serve` of their own, with HERENOW_REPO (this checkout) and
# HERENOW_URL (that server) as they say; the Go fragments
# (`<!-- tested: go-fragment -->`) are compiled by readme-fragments.py, so
# the docs name only calls that exist. The
# checkout must be left as it was (`git status --porcelain` unchanged:
# empty on a clean checkout).
before="$(git -C "$root" status --porcelain 2>/dev/null || true)"
tmp="$(mktemp -d)"
srvpid=""
cleanup() {
    if [ -n "$srvpid" ]; then
        kill "$srvpid" 2>/dev/null || true
        wait "$srvpid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
bin="$(cd "$(dirname "$HERENOW_BIN")" && pwd)/$(basename "$HERENOW_BIN")"
(cd "$tmp" && exec "$bin" serve --listen 127.0.0.1:0 >"$tmp/server.out" 2>"$tmp/server.err") &
srvpid=$!
url=""
for _ in $(seq 1 200); do
    url="$(sed -nE 's/.*listening on (http:[^ ]+).*/\1/p' "$tmp/server.out" | head -n 1)"
    if [ -n "$url" ] && python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/readyz", timeout=1)' "$url" 2>/dev/null; then
        break
    fi
    url=""
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "clients/go: the docs' server did not start: $(cat "$tmp/server.err")" >&2
    exit 1
fi
export HERENOW_REPO="$root" HERENOW_URL="$url"
blocks="$root/clients/readme-blocks.py"

echo "clients/go: clients/go/README.md's commands (tested: go), in $tmp/readme"
mkdir "$tmp/readme"
out="$(cd "$tmp/readme" && bash -euo pipefail -c "$(python3 "$blocks" "$here/README.md" go)")"
echo "$out"
if ! grep -qx '1 online: ada Ada' <<<"$out" || ! grep -qx '1 user and 0 guests online - ada: online' <<<"$out"; then
    echo "clients/go: the README's first program did not print what the README says" >&2
    exit 1
fi

echo "clients/go: docs/CLIENTS.md's Go commands (tested: go), in $tmp/top"
mkdir "$tmp/top"
(cd "$tmp/top" && bash -euo pipefail -c "$(python3 "$blocks" "$root/docs/CLIENTS.md" go)")

echo "clients/go: the docs' Go fragments (tested: go-fragment) compile"
python3 "$here/readme-fragments.py" "$here/README.md" "$root/docs/CLIENTS.md" >"$tmp/top/site/main.go"
(cd "$tmp/top/site" && go build -o /dev/null . && go vet .)

after="$(git -C "$root" status --porcelain 2>/dev/null || true)"
if [ "$before" != "$after" ]; then
    echo "clients/go: the docs' commands changed the checkout:" >&2
    diff <(echo "$before") <(echo "$after") >&2 || true
    exit 1
fi
echo "clients/go: the docs' commands ran as written; the checkout is as it was"
