#!/usr/bin/env bash
# The deployment guide's commands and the Kubernetes manifests
# (deploy/kubernetes): scripts/test.sh runs this.
#
# - Every sh block of docs/DEPLOYMENT.md is marked as run by a test or not
#   run, with a reason (scripts/doc-blocks.py --check).
# - The guide's config blocks run as written, in a copy of deploy/, with the
#   built binary as `herenow` (config-file, redis-config).
# - Each ConfigMap file of the manifests passes `herenow config check` with
#   the example secrets, so every ${VAR} it names is one the Secret gives.
# - Where kubectl (with kustomize 5) is present: the guide's render block
#   (k8s-render) runs as written; kubernetes-validate (PyPI, pinned below, in
#   the venv .venv-kubernetes) accepts every object of both renders against
#   Kubernetes 1.32 and its newest schemas; scripts/check-kubernetes.py checks
#   what herenow needs of them (probes, preStop + drain within the grace,
#   ConfigMap, Secret, Service, PodDisruptionBudget, one server on a volume or
#   several on Redis). Without kubectl that part is skipped, saying why.
#
# HERENOW_BIN: the binary (default target/debug/herenow).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { echo "test-kubernetes.sh: $*"; }
started=$SECONDS
guide=docs/DEPLOYMENT.md
python3 scripts/doc-blocks.py --check "$guide"

bin="$(realpath "${HERENOW_BIN:-target/debug/herenow}")"
[ -x "$bin" ] || { say "no binary at $bin (cargo build -p herenow first)"; exit 1; }
work="$(mktemp -d /tmp/herenow-kubernetes.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/copy"
ln -s "$bin" "$work/bin/herenow"
export PATH="$work/bin:$PATH"
# A copy of what the guide's commands touch, without anyone's real secrets.
cp -r deploy Containerfile "$work/copy/"
find "$work/copy" -name secrets.env -delete

# run_block NAME: the guide's block NAME, as written, in the copy.
run_block() {
  python3 scripts/doc-blocks.py "$guide" "$1" > "$work/$1.sh"
  if ! (cd "$work/copy" && bash -euo pipefail "$work/$1.sh") > "$work/$1.log" 2>&1; then
    cat "$work/$1.log"
    say "the guide's block $1 failed"
    exit 1
  fi
}

# README's deployment blocks are the guide's, word for word.
for name in image-build k8s-render; do
  if ! diff <(python3 scripts/doc-blocks.py README.md "$name") \
            <(python3 scripts/doc-blocks.py "$guide" "$name") >/dev/null; then
    say "README's block $name is not the guide's (docs/DEPLOYMENT.md)"
    exit 1
  fi
done

run_block config-file
grep -q '^# drain = "10s"$' "$work/copy/herenow.toml" \
  || { say "config-file: herenow.toml is not the example"; exit 1; }
run_block redis-config
grep -q '^store = "redis://:\*\*\*\*@valkey:6379"' "$work/redis-config.log" \
  || { cat "$work/redis-config.log"; say "redis-config: the check did not mask the store's password"; exit 1; }

# The manifests' config files, with the example secrets as the pods' env.
k8s=deploy/kubernetes
check_config() { # FILE SECRETS.env…
  local file=$1; shift
  if ! (set -a; for s in "$@"; do . "$s"; done; set +a; herenow config check "$file") > "$work/check.log" 2>&1; then
    cat "$work/check.log"; say "$file does not pass config check"; exit 1
  fi
}
check_config "$k8s/base/herenow.toml" "$k8s/base/secrets.env.example"
check_config "$k8s/overlays/redis/herenow.toml" "$k8s/base/secrets.env.example" \
  "$k8s/overlays/redis/secrets.env.example"
check_config deploy/container/herenow.toml <(echo HERENOW_API_KEYS=image-key-0123:write)
say "guide's config blocks and the manifests' config files ok ($((SECONDS - started)) s)"

if ! command -v kubectl >/dev/null 2>&1; then
  say "SKIPPED the render: kubectl is not installed (Debian's kubernetes-client is 1.20, whose kustomize is too old for these manifests)"
  exit 0
fi
kustomize_version="$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v//p')"
case "$kustomize_version" in
  [5-9].*) ;;
  *) say "SKIPPED the render: kubectl's kustomize is ${kustomize_version:-unknown}, these manifests need 5 or newer"; exit 0 ;;
esac

started=$SECONDS
run_block k8s-render
rendered=("$work/copy/deploy/kubernetes/herenow.yaml" "$work/copy/deploy/kubernetes/herenow-redis.yaml")
for f in "${rendered[@]}"; do [ -s "$f" ] || { say "k8s-render made no $f"; exit 1; }; done

# kubernetes-validate 1.37.0 carries schemas up to Kubernetes 1.37.
KUBERNETES_VALIDATE_VERSION=1.37.0
venv="$root/.venv-kubernetes"
if [ "$("$venv/bin/python" -m pip show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p')" \
  != "$KUBERNETES_VALIDATE_VERSION" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
fi
for version in 1.32.0 "$KUBERNETES_VALIDATE_VERSION"; do
  if ! "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "${rendered[@]}"; then
    say "kubernetes-validate refused an object (Kubernetes $version)"
    exit 1
  fi
done
"$venv/bin/python" scripts/check-kubernetes.py "${rendered[0]}"
"$venv/bin/python" scripts/check-kubernetes.py "${rendered[1]}" --replicas 3 --redis
say "ok: base and overlays/redis render, validate against Kubernetes 1.32 and $KUBERNETES_VALIDATE_VERSION, and hold what herenow needs ($((SECONDS - started)) s)"
