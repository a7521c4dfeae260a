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
