#!/usr/bin/env bash
# Runs the Python client's tests against a herenow server binary.
#
#   clients/python/test.sh            # uses $HERENOW_BIN, or target/debug/herenow
#   HERENOW_BIN=/path/to/herenow clients/python/test.sh -k events   # pytest args pass through
#
# Without arguments it then runs the READMEs' install and usage commands as
# written (readme-test.sh), in a temporary directory, and checks that they
# left the checkout as it was.
#
# Needs python3 (3.9+) with pip; installs python3-venv with apt-get when the
# venv module is missing, and the package with its test dependencies into
# clients/python/.venv (git-ignored), again only when pyproject.toml changed.
# The tests start and stop their own servers on free ports.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel)"
export HERENOW_BIN="${HERENOW_BIN:-$root/target/debug/herenow}"

if [ ! -x "$HERENOW_BIN" ]; then
    echo "clients/python/test.sh: no herenow binary at $HERENOW_BIN (build it, or set HERENOW_BIN)" >&2
    exit 1
fi

if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "clients/python/test.sh: installing python3-venv" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi

# Reinstall only when the package's metadata changed (the package itself
# is installed editable, so source changes need nothing).
stamp="$venv/.herenow-installed"
want="$(sha256sum "$here/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here[test]"
    echo "$want" >"$stamp"
fi

cd "$here"
if [ $# -gt 0 ]; then
    exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
fi
"$venv/bin/python" -m pytest -q -p no:cacheprovider
"$here/readme-test.sh"

