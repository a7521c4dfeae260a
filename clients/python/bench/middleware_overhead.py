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
flush interval, 60 s debounce, what ``settings.HERENOW`` would make),
with a visitor population of ``--users``
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
from typing import Callable, Dict, List, Optional

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
    # The trackers are the script's own (conf.set_tracker); IDENTIFY is
    # read per request.
    HERENOW={"URL": "http://127.0.0.1:9", "IDENTIFY": "middleware_overhead.identify"},
)
django.setup()

import logging  # noqa: E402

from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.urls import path  # noqa: E402

from herenow import PresenceTracker, Visitor  # noqa: E402
from herenow.django import conf  # noqa: E402


def page(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"<html><body>hello</body></html>")


urlpatterns = [path("", page)]

# The visitor is a header here, so no session or auth middleware (and no
# database) is timed; a real site gets it from AuthenticationMiddleware.


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


def make_client(middleware: List[str]) -> Client:
    """A test client whose handler has loaded ``middleware`` (Django loads
    the chain on a handler's first request, from the settings then)."""
    with override_settings(MIDDLEWARE=middleware):
        client = Client()
        client.get("/", HTTP_X_USER="warm-0")
    return client


def tracker(url: str) -> PresenceTracker:
    """What ``HERENOW = {"URL": url, "SPACE": "bench"}`` makes (conf.get_tracker)."""
    return PresenceTracker(base_url=url, space="bench", interval=60.0, timeout=2.0)


def measure(args: argparse.Namespace, up_url: str, down_url: str) -> Dict[str, List[int]]:
    """Every row's requests, interleaved in chunks (the order rotating), so
    the shared machine's noise falls on every row alike."""
    mw = ["herenow.django.middleware.HerenowMiddleware"]
    bare, behind = make_client([]), make_client(mw)
    trackers = {"up": tracker(up_url), "down": tracker(down_url)}
    rows = [
        ("bare view", bare, None),
        ("middleware, herenow up", behind, "up"),
        ("middleware, herenow down", behind, "down"),
    ]
    times: Dict[str, List[int]] = {name: [] for name, _, _ in rows}
    ids = [f"user-{i}" for i in range(args.users)]
    clock = time.perf_counter_ns
    chunk = 500
    try:
        for name, client, which in rows:  # warm up, with other visitors
            conf.set_tracker(trackers[which] if which else None)
            for i in range(2000):
                client.get("/", HTTP_X_USER=f"warm-{i % args.users}")
        done = {name: 0 for name, _, _ in rows}
        n = 0
        while any(v < args.requests for v in done.values()):
            order = rows[n % 3 :] + rows[: n % 3]
            n += 1
            for name, client, which in order:
                conf.set_tracker(trackers[which] if which else None)
                start = done[name]
                gc.collect()
                gc.disable()
                try:
                    for i in range(start, min(args.requests, start + chunk)):
                        t0 = clock()
                        response = client.get("/", HTTP_X_USER=ids[i % args.users])
                        times[name].append(clock() - t0)
                        if response.status_code != 200:
                            raise SystemExit(f"{name}: the view answered {response.status_code}")
                finally:
                    gc.enable()
                done[name] = min(args.requests, start + chunk)
    finally:
        conf.set_tracker(None)
        for which, t in trackers.items():
            s = t.stats()
            print(
                f"  tracker {which}: tracked {s.tracked}, sent {s.sent}, "
                f"debounced {s.debounced}, failures {s.failures}",
                file=sys.stderr,
            )
            t.close(timeout=2)
    return times


def pct(values: List[int], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k] / 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--herenow-bin", default=os.environ.get("HERENOW_BIN", "target/release/herenow")
    )
    ap.add_argument("--requests", type=int, default=20_000, help="timed requests per row")
    ap.add_argument("--users", type=int, default=1_000, help="distinct signed-in visitors")
    ap.add_argument(
        "--rounds", type=int, default=3, help="rounds; each figure is the median over them"
    )
    args = ap.parse_args()

    # The tracker's "herenow is down" line, once a minute: keep it off the table.
    logging.getLogger("herenow").setLevel(logging.ERROR)

    proc, up_url = start_herenow(args.herenow_bin)
    down_url = closed_port_url()
    rounds: List[Dict[str, List[int]]] = []
    try:
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
            rounds.append(measure(args, up_url, down_url))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)

    def stat(name: str, f: Callable[[List[int]], float]) -> float:
        """The median over the rounds of ``f`` of a round's requests."""
        return statistics.median(f(r[name]) for r in rounds)

    def median(t: List[int]) -> float:
        return statistics.median(t) / 1000.0

    def p99(t: List[int]) -> float:
        return pct(t, 99)

    base_med, base_p99 = stat("bare view", median), stat("bare view", p99)
    print(
        f"\n{args.requests} requests per row x {args.rounds} rounds (rows interleaved in "
        f"chunks of 500), {args.users} users, Python {platform.python_version()}, "
        f"Django {django.get_version()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}\n"
    )
    print("| run | median µs/request | p99 µs/request | median overhead | p99 overhead |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in rounds[0]:
        med, tail = stat(name, median), stat(name, p99)
        if name == "bare view":
            print(f"| {name} | {med:.1f} | {tail:.1f} | — | — |")
        else:
            print(
                f"| {name} | {med:.1f} | {tail:.1f} | {med - base_med:+.1f} µs | "
                f"{tail - base_p99:+.1f} µs |"
            )


if __name__ == "__main__":
    main()
