#!/usr/bin/env python3
"""What herenow's Django middleware costs a request: a bare view against
the same view behind ``HerenowMiddleware``, with herenow up (a real
``herenow serve`` this script starts) and down (a closed port).

Requests go through Django's full handler stack in-process
(``django.test.Client``: request building, the middleware chain, URL
resolving, the view, the response), so what differs between the rows is
the middleware alone, not a network or a WSGI server. Each request is
timed on its own with ``perf_counter_ns``; the table gives the median and
the 99th percentile per request, and the overhead over the bare view.

The tracker runs as in production (its background sender thread, a 1 s
flush interval, 60 s debounce), with a visitor population of ``--users``
signed-in users cycling over the requests, so most requests are debounced
dict look-ups and some queue a heartbeat, as on a real site.

    clients/python/.venv/bin/python clients/python/bench/middleware_overhead.py \\
        --herenow-bin target/release/herenow --requests 20000

Needs Django and this package (``pip install -e "clients/python[django]"``).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import django  # noqa: E402
from django.conf import settings  # noqa: E402

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-only",
    ALLOWED_HOSTS=["testserver"],
    INSTALLED_APPS=["herenow.django"],
    MIDDLEWARE=[],  # set per run
    ROOT_URLCONF=__name__,
    LOGGING_CONFIG=None,
    HERENOW={"URL": "http://127.0.0.1:9"},
)
django.setup()

import logging  # noqa: E402

from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.urls import path  # noqa: E402

from herenow import Visitor  # noqa: E402
from herenow.django import conf  # noqa: E402


def page(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"<html><body>hello</body></html>")


urlpatterns = [path("", page)]

# The visitor is a header here, so no session or auth middleware (and no
# database) is timed; a real site gets it from AuthenticationMiddleware.
IDENTIFY = "middleware_overhead.identify"


def identify(request: HttpRequest) -> Optional[Visitor]:
    uid = request.META.get("HTTP_X_USER")
    return Visitor(uid, meta={"name": uid}) if uid else None


sys.modules.setdefault("middleware_overhead", sys.modules[__name__])


def start_herenow(binary: str) -> "tuple[subprocess.Popen[str], str]":
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "RUST_LOG": "warn"},
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline() if ready else ""
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"herenow did not start: {line!r}")
    url = m.group(1).rstrip("/")
    import httpx

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # process start-up only
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    proc.kill()
    raise SystemExit("herenow never became ready")


def closed_port_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def run(name: str, middleware: List[str], herenow_url: str, requests: int, users: int) -> List[int]:
    conf.reset()
    with override_settings(
        MIDDLEWARE=middleware,
        HERENOW={"URL": herenow_url, "SPACE": "bench", "IDENTIFY": IDENTIFY, "TIMEOUT": 2},
    ):
        client = Client()
        ids = [f"user-{i}" for i in range(users)]
        for i in range(2000):  # warm up (imports, caches, the thread) with other visitors
            client.get("/", HTTP_X_USER=f"warm-{i % users}")
        gc.collect()
        gc.disable()
        times: List[int] = []
        clock = time.perf_counter_ns
        try:
            for i in range(requests):
                t0 = clock()
                response = client.get("/", HTTP_X_USER=ids[i % users])
                times.append(clock() - t0)
                if response.status_code != 200:
                    raise SystemExit(f"{name}: the view answered {response.status_code}")
        finally:
            gc.enable()
        stats = conf.get_tracker().stats() if middleware else None
        conf.reset()
    if stats is not None:
        print(
            f"  {name}: tracked {stats.tracked}, sent {stats.sent}, "
            f"debounced {stats.debounced}, failures {stats.failures}",
            file=sys.stderr,
        )
    return times


def pct(values: List[int], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k] / 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--herenow-bin", default=os.environ.get("HERENOW_BIN", "target/release/herenow"))
    ap.add_argument("--requests", type=int, default=20_000, help="timed requests per row")
    ap.add_argument("--users", type=int, default=1_000, help="distinct signed-in visitors")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; rows interleave, the median round is kept")
    args = ap.parse_args()

    # The tracker's "herenow is down" line, once a minute: keep it off the table.
    logging.getLogger("herenow").setLevel(logging.ERROR)

    proc, up_url = start_herenow(args.herenow_bin)
    down_url = closed_port_url()
    mw = ["herenow.django.middleware.HerenowMiddleware"]
    rows: Dict[str, List[List[int]]] = {"bare view": [], "middleware, herenow up": [], "middleware, herenow down": []}
    try:
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
            rows["bare view"].append(run("bare", [], up_url, args.requests, args.users))
            rows["middleware, herenow up"].append(run("up", mw, up_url, args.requests, args.users))
            rows["middleware, herenow down"].append(run("down", mw, down_url, args.requests, args.users))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)

    def summary(runs: List[List[int]]) -> "tuple[float, float]":
        medians = sorted((statistics.median(t) / 1000.0, pct(t, 99)) for t in runs)
        return medians[len(medians) // 2]

    base_median, base_p99 = summary(rows["bare view"])
    print(
        f"\n{args.requests} requests x {args.rounds} rounds, {args.users} users, "
        f"Python {platform.python_version()}, Django {django.get_version()}, "
        f"{os.cpu_count()} CPUs\n"
    )
    print("| run | median µs/request | p99 µs/request | median overhead | p99 overhead |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, runs in rows.items():
        med, p99 = summary(runs)
        if name == "bare view":
            print(f"| {name} | {med:.1f} | {p99:.1f} | — | — |")
        else:
            print(f"| {name} | {med:.1f} | {p99:.1f} | {med - base_median:+.1f} µs | {p99 - base_p99:+.1f} µs |")


if __name__ == "__main__":
    main()
