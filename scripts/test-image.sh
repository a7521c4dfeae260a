#!/usr/bin/env bash
# The container image (Containerfile), built as docs/DEPLOYMENT.md says and
# checked from the inside: scripts/test.sh runs this.
#
# 1. Podman, from Debian when missing. No registry is reachable here, so the
#    base the Containerfile names (ARG BASE) is made locally: a root file
#    system of the Debian packages the image needs (libc, libgcc, a shell and
#    coreutils for its RUN, root certificates), from `apt-get download` and
#    `dpkg-deb -x`, imported under that name.
# 2. The guide's build block (<!-- test: image-build -->) is run as written,
#    with `cargo` and `podman` standing in: no release build (the debug
#    binary the tests built is passed as BINARY) and Podman's private
#    storage under a temporary directory, chroot isolation, no pulls.
# 3. The image's settings (user, port, volume, config) are read back, its
#    file system exported (`podman create` + `podman export`), and the binary
#    in it started with `chroot` as the image's user, with the image's
#    environment and config: it must answer /readyz, take a heartbeat with
#    the key it was given, and leave its journal in the volume's directory.
#    With a network namespace of its own (unshare) it listens where the
#    image says, 0.0.0.0:7700; without, HERENOW_LISTEN moves it to a free
#    port. Containers themselves cannot run on these machines (crun refuses
#    setrlimit and cgroups), so `podman run` is not used.
#
# Skipped, saying why, only where Podman cannot be had or cannot build.
# HERENOW_BIN: the binary to put in the image (default target/debug/herenow).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=lib/ports.sh
. scripts/lib/ports.sh

say() { echo "test-image.sh: $*"; }
skip() { say "SKIPPED: $*"; exit 0; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

bin="${HERENOW_BIN:-target/debug/herenow}"
bin="$(realpath --relative-to="$root" "$bin")"
[ -x "$bin" ] || { say "no binary at $bin (cargo build -p herenow first)"; exit 1; }
case "$bin" in ../*) say "the binary must be inside the repository (the build context): $bin"; exit 1 ;; esac
[ "$(id -u)" = 0 ] || skip "chroot and podman's chroot isolation need root"

if ! command -v podman >/dev/null 2>&1; then
  say "installing podman"
  as_root apt-get update -qq || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman \
    || skip "podman is not installed and apt-get cannot install it"
fi

work="$(mktemp -d /tmp/herenow-image.XXXXXX)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
podman_args=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs
  --cgroup-manager cgroupfs --events-backend file)
pm() { command podman "${podman_args[@]}" "$@"; }

# 1. The base image, from Debian packages.
started=$SECONDS
base="$(sed -n 's/^ARG BASE=//p' Containerfile)"
[ -n "$base" ] || { say "Containerfile names no ARG BASE"; exit 1; }
mkdir -p "$work/debs" "$work/base"
packages=(libc6 libgcc-s1 gcc-12-base dash coreutils libacl1 libattr1 libgmp10
  libpcre2-8-0 libselinux1 ca-certificates)
(cd "$work/debs" && apt-get download -qq "${packages[@]}" 2>/dev/null) \
  || skip "cannot download the Debian packages of the base image (${packages[*]})"
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/base"; done
(
  cd "$work/base"
  rm -rf usr/share/doc usr/share/man usr/share/info usr/share/locale usr/lib/x86_64-linux-gnu/gconv
  mkdir -p tmp root var/lib etc/ssl/certs proc sys dev
  chmod 1777 tmp
  # What ca-certificates' postinst would make.
  cat usr/share/ca-certificates/mozilla/*.crt > etc/ssl/certs/ca-certificates.crt
  printf 'root:x:0:0:root:/root:/bin/sh\n' > etc/passwd
  printf 'root:x:0:\n' > etc/group
)
tar -C "$work/base" -c . | pm import --quiet - "$base" >/dev/null \
  || skip "podman cannot import an image here"
# Whether Podman can build here at all: the one reason to skip.
mkdir -p "$work/probe"
printf 'FROM %s\nRUN true\n' "$base" > "$work/probe/Containerfile"
if ! pm build --isolation=chroot --pull=never --layers=false --quiet -t localhost/probe "$work/probe" \
  > "$work/probe.log" 2>&1; then
  cat "$work/probe.log"
  skip "podman cannot build an image with chroot isolation here"
fi
say "base $base from ${#packages[@]} Debian packages ($((SECONDS - started)) s)"

# 2. The guide's build, as written.
started=$SECONDS
block="$(python3 scripts/doc-blocks.py docs/DEPLOYMENT.md image-build)"
# Stand-ins the block's shell sources: no release build (the image gets
# $bin), and Podman with the storage and options above.
podman_quoted="$(printf '%q ' "${podman_args[@]}")"
cat > "$work/shims.sh" <<EOF
cargo() {
  case "\$*" in
    "build --release -p herenow") echo "(test: the image gets $bin, not a release build)" ;;
    *) command cargo "\$@" ;;
  esac
}
podman() {
  if [ "\${1:-}" = build ]; then
    shift
    command podman $podman_quoted build --isolation=chroot --pull=never --layers=false \\
      --build-arg BINARY=$bin "\$@"
  else
    command podman $podman_quoted "\$@"
  fi
}
EOF
if ! bash -euo pipefail -c ". '$work/shims.sh'; $block" > "$work/build.log" 2>&1; then
  cat "$work/build.log"
  say "the guide's image build failed"
  exit 1
fi
say "image built by the guide's commands ($((SECONDS - started)) s)"

# 3. The image, from the inside.
image=localhost/herenow:latest
pm image inspect --format '{{json .Config}}' "$image" > "$work/config.json"
python3 - "$work/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
def want(what, got, expected):
    if got != expected:
        sys.exit(f"test-image.sh: image {what}: {got!r}, expected {expected!r}")
want("user", c.get("User"), "10001:10001")
want("ports", sorted(c.get("ExposedPorts") or {}), ["7700/tcp"])
want("volumes", sorted(c.get("Volumes") or {}), ["/var/lib/herenow"])
want("entrypoint", c.get("Entrypoint"), ["/usr/local/bin/herenow"])
want("command", c.get("Cmd"), ["serve"])
want("config", [e for e in c.get("Env", []) if e.startswith("HERENOW_")],
     ["HERENOW_CONFIG=/etc/herenow/herenow.toml"])
EOF
fs="$work/fs"
mkdir -p "$fs"
id="$(pm create "$image")"
pm export "$id" | tar -C "$fs" -x
pm rm "$id" >/dev/null
[ "$(stat -c %u:%g "$fs/var/lib/herenow")" = 10001:10001 ] \
  || { say "/var/lib/herenow is not the server user's"; exit 1; }
python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["Env"]))' \
  "$work/config.json" > "$work/image.env"
mapfile -t image_env < "$work/image.env"

key=image-test-writer-key
# The image's settings, checked by the image's binary.
env -i "${image_env[@]}" HERENOW_API_KEYS="$key:write" \
  chroot --userspec=10001:10001 "$fs" /usr/local/bin/herenow config check /etc/herenow/herenow.toml \
  > "$work/check.txt"
grep -q '^listen = "0.0.0.0:7700"' "$work/check.txt" && grep -q '^data_dir = "/var/lib/herenow"' "$work/check.txt" \
  || { cat "$work/check.txt"; say "the image's config is not 0.0.0.0:7700 with its volume"; exit 1; }

# Starts the image's server, waits for /readyz, sends a heartbeat, stops it.
# $1: the port it listens on; the rest: extra environment.
serve_and_check() {
  local port=$1; shift
  local image_env
  mapfile -t image_env < "$work/image.env"
  env -i "${image_env[@]}" HERENOW_API_KEYS="$key:write" "$@" \
    chroot --userspec=10001:10001 "$fs" /usr/local/bin/herenow serve \
    > "$work/serve.out" 2> "$work/serve.err" &
  local pid=$! ready=""
  for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$ready" ]; then
    cat "$work/serve.err"; kill "$pid" 2>/dev/null || true
    echo "the image's server did not answer /readyz on port $port"; return 1
  fi
  curl -sf "http://127.0.0.1:$port/v1/spaces/lobby/heartbeat" \
    -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"id":"alice"}' >/dev/null \
    || { echo "a heartbeat was refused"; kill "$pid"; return 1; }
  kill -TERM "$pid"
  wait "$pid" || { cat "$work/serve.err"; echo "the server did not stop cleanly"; return 1; }
}
export -f serve_and_check
export fs work key
started=$SECONDS
if unshare --net true 2>/dev/null; then
  unshare --net bash -euo pipefail -c 'ip link set lo up; serve_and_check 7700' \
    || { say "FAILED in a network namespace"; exit 1; }
  where="0.0.0.0:7700 in a network namespace of its own"
else
  port="$(free_port)"
  serve_and_check "$port" HERENOW_LISTEN="0.0.0.0:$port" || { say "FAILED"; exit 1; }
  where="0.0.0.0:$port (HERENOW_LISTEN; no network namespace here)"
fi
[ -n "$(find "$fs/var/lib/herenow" -mindepth 1 -user 10001 -print -quit)" ] \
  || { say "no journal in the volume's directory"; exit 1; }
say "ok: the image's server answered /readyz on $where, as user 10001, journal in /var/lib/herenow ($((SECONDS - started)) s)"
