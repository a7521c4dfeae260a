#!/usr/bin/env python3
"""What the rendered Kubernetes manifests must do for herenow, beyond their
schema (kubernetes-validate checks that): scripts/test-kubernetes.sh runs it
on `kubectl kustomize` of deploy/kubernetes/base and of each overlay.

    check-kubernetes.py RENDERED.yaml [--replicas N] [--redis]

- the Deployment's pods: readiness on /readyz, liveness on /healthz, both on
  the container's port; HERENOW_CONFIG names the file the ConfigMap mounts;
- the shutdown: a preStop pause, then the server's drain (the ConfigMap
  file's `drain`, default 10s), within terminationGracePeriodSeconds with
  at least 10 s to spare for closing the store;
- every ${VAR} of the ConfigMap's file is a key of the Secret the pods take
  their environment from;
- a Service and a PodDisruptionBudget that select the pods;
- --replicas N: that many servers; --redis: a Redis store and no data
  directory or volume claim (the state lives in Redis).
Needs PyYAML (the kubernetes-validate venv has it) and Python 3.11's tomllib.
"""
import argparse
import re
import sys
import tomllib

import yaml


def fail(message):
    sys.exit(f"check-kubernetes.py: {message}")


def seconds(duration):
    """A humantime duration of the config (`10s`, `1m`, `1500ms`) in seconds."""
    total = 0.0
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+)\s*(ms|s|m|h)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration.replace(" ", ""):
        fail(f"cannot read the duration {duration!r}")
    for number, unit in parts:
        total += int(number) * units[unit]
    return total


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rendered")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--redis", action="store_true")
    args = ap.parse_args()
    docs = [d for d in yaml.safe_load_all(open(args.rendered)) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)

    deployments = [d for d in by_kind.get("Deployment", []) if d["metadata"]["name"] == "herenow"]
    if len(deployments) != 1:
        fail("expected one Deployment named herenow")
    deployment = deployments[0]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"]["labels"]
    container = next(c for c in pod["containers"] if c["name"] == "herenow")
    if spec.get("replicas", 1) != args.replicas:
        fail(f"replicas {spec.get('replicas', 1)}, expected {args.replicas}")

    port_names = {p.get("name"): p["containerPort"] for p in container["ports"]}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in (*port_names, *port_names.values()):
            fail(f"{probe} must ask {path} on the container's port, not {get}")

    # The config file the pods read.
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    config_path = env.get("HERENOW_CONFIG")
    if not config_path:
        fail("HERENOW_CONFIG is not set")
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    directory, _, file_name = config_path.rpartition("/")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    volume = volumes.get(mounts.get(directory))
    if not volume or "configMap" not in volume:
        fail(f"{config_path} is not mounted from a ConfigMap")
    config_maps = {c["metadata"]["name"]: c for c in by_kind.get("ConfigMap", [])}
    config_map = config_maps.get(volume["configMap"]["name"])
    if not config_map or file_name not in config_map.get("data", {}):
        fail(f"the ConfigMap holds no {file_name}")
    text = config_map["data"][file_name]
    config = tomllib.loads(text)

    # Secrets: every ${VAR} of the file is in the Secret the pods read.
    secret_names = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]
    secrets = {s["metadata"]["name"]: s for s in by_kind.get("Secret", [])}
    keys = set()
    for name in secret_names:
        if name not in secrets:
            fail(f"the pods read a Secret {name} that is not rendered")
        keys |= set(secrets[name].get("data", {})) | set(secrets[name].get("stringData", {}))
    values = [v for value in config.values() for v in (value if isinstance(value, list) else [value])]
    wanted = {name for v in values if isinstance(v, str)
              for name in re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}", v)}
    if not wanted:
        fail("the config names no ${VAR}: where do its secrets come from?")
    if wanted - keys:
        fail(f"the config names {sorted(wanted - keys)}, which no Secret of the pods holds")

    # The shutdown: preStop pause + drain + room to close, within the grace.
    pause = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
    if not pause:
        fail("no preStop sleep: the server would stop listening before the pod leaves the endpoints")
    drain = seconds(config.get("drain", "10s"))
    grace_period = pod.get("terminationGracePeriodSeconds", 30)
    if grace_period < pause + drain + 10:
        fail(f"terminationGracePeriodSeconds {grace_period} < preStop {pause} + drain {drain} + 10")

    services = [s for s in by_kind.get("Service", []) if selects(s["spec"].get("selector", {}), pod_labels)]
    if not services:
        fail("no Service selects the pods")
    budgets = [b for b in by_kind.get("PodDisruptionBudget", [])
               if selects(b["spec"]["selector"].get("matchLabels", {}), pod_labels)]
    if not budgets:
        fail("no PodDisruptionBudget selects the pods")
    budget = budgets[0]["spec"]
    if budget.get("minAvailable") == args.replicas or budget.get("maxUnavailable") == 0:
        fail("the PodDisruptionBudget would block every voluntary disruption")

    claims = by_kind.get("PersistentVolumeClaim", [])
    if args.redis:
        if not str(config.get("store", "")).startswith(("redis://", "rediss://", "redis+cluster://")):
            fail("the overlay's store is not Redis")
        if "data_dir" in config or claims or "/var/lib/herenow" in mounts:
            fail("a Redis store has no data directory")
        if spec.get("strategy", {}).get("type") != "RollingUpdate":
            fail("several servers on Redis roll one at a time (RollingUpdate)")
    else:
        if config.get("data_dir") not in mounts:
            fail("the data directory is not a mounted volume")
        if spec.get("strategy", {}).get("type") != "Recreate":
            fail("the embedded store's single server must be replaced (Recreate), not doubled")
    print(f"check-kubernetes.py: {args.rendered}: ok ({len(docs)} objects; "
          f"preStop {pause} s + drain {drain:g} s within {grace_period} s)")


if __name__ == "__main__":
    main()
