#!/usr/bin/env bash
# Schema-driven fuzzing of the HTTP API: schemathesis (from PyPI) generates
# requests from herenow's own /openapi.json and checks that nothing answers
# 5xx, and that every status and content type is one the document declares.
#
# Starts its own server (debug build, memory store) on a free port; installs
# schemathesis into a throwaway virtualenv. MAX_EXAMPLES (default 60) per
# operation. The event stream is left out: it never ends by design.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d)
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q schemathesis
cargo build -q -p herenow
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
RUST_LOG=warn target/debug/herenow serve --listen "127.0.0.1:$port" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

"$dir/venv/bin/schemathesis" run "http://127.0.0.1:$port/openapi.json" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "${MAX_EXAMPLES:-60}" --exclude-path-regex '/events' --request-timeout 5
