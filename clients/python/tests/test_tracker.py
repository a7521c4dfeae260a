"""The presence tracker: debounce per member per interval (on an injected
clock), batching, bounds, driving on when herenow is down, and the
background thread."""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections import Counter
from typing import Any, Dict, List, Tuple

import httpx
import pytest
from conftest import FakeClock, Server, lines, uid

import herenow
from herenow import Kind, PresenceTracker, Status


class Recording(httpx.BaseTransport):
    """Sends to the real server, and keeps every heartbeat batch sent."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.batches: List[Tuple[str, List[Dict[str, Any]]]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/heartbeats"):
            space = request.url.path.split("/")[3]
            self.batches.append((space, json.loads(request.content)["heartbeats"]))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()

    def beats(self) -> Counter:
        return Counter((space, b["kind"], b["id"]) for space, batch in self.batches for b in batch)


@pytest.fixture
def recording() -> Recording:
    return Recording()


def make(server: Server, recording: Recording, clock: FakeClock, **kw: Any) -> PresenceTracker:
    client = herenow.Client(server.url, transport=recording)
    kw.setdefault("background", False)
    return PresenceTracker(client, clock=clock, **kw)


def test_one_heartbeat_per_member_per_interval(
    server: Server, recording: Recording, clock: FakeClock, space: str
) -> None:
    tracker = make(server, recording, clock, space=space, interval=60)
    members = [uid("m") for _ in range(3)]
    # A busy minute: 300 requests from three members, a fifth of a second apart.
    for i in range(300):
        tracker.track(members[i % 3])
        clock.advance(0.2)
    assert clock.now - 1000 == pytest.approx(60.0)
    tracker.flush()
    assert recording.beats() == Counter({(space, "user", m): 1 for m in members})
    assert len(recording.batches) == 1  # one request for the whole minute
    stats = tracker.stats()
    assert (stats.tracked, stats.queued, stats.debounced, stats.sent) == (300, 3, 297, 3)

    # The next interval: each member once more, however many requests.
    for i in range(300):
        tracker.track(members[i % 3])
        clock.advance(0.2)
    tracker.flush()
    assert recording.beats() == Counter({(space, "user", m): 2 for m in members})

    # And the server really has them.
    client = tracker.client
    assert sorted(m.id for m in client.online(space).members) == sorted(members)
    tracker.close()


def test_debounce_is_per_member_kind_and_space(
    server: Server, recording: Recording, clock: FakeClock, space: str
) -> None:
    tracker = make(server, recording, clock, space=space)
    other = f"{space}-2"
    assert tracker.track("ann") is True
    assert tracker.track("ann") is False
    assert tracker.track("ann", kind=Kind.GUEST) is True
    assert tracker.track("ann", space=other) is True
    assert tracker.track("ann", space=other) is False
    clock.advance(59.9)
    assert tracker.track("ann") is False
    clock.advance(0.1)
    assert tracker.track("ann") is True
    assert tracker.flush() == 4
    assert sorted(recording.beats()) == sorted(
        [(space, "user", "ann"), (space, "guest", "ann"), (other, "user", "ann")]
    )
    assert len(recording.batches) == 2  # one request per space
    assert client_member(tracker, other, "ann").status is Status.ONLINE
    tracker.close()


def client_member(tracker: PresenceTracker, space: str, id: str) -> herenow.Member:
    return tracker.client.member(space, id)


def test_batches_are_bounded(
    server: Server, recording: Recording, clock: FakeClock, space: str
) -> None:
    tracker = make(server, recording, clock, space=space, batch_size=100)
    for i in range(250):
        tracker.track(f"m{i}", meta={"n": i})
    assert tracker.flush() == 250
    assert [len(b) for _, b in recording.batches] == [100, 100, 50]
    assert tracker.client.count(space).users == 250
    assert tracker.client.member(space, "m7").meta == {"n": 7}
    tracker.close()


def test_the_debounce_map_is_capped(server: Server, recording: Recording, clock: FakeClock) -> None:
    tracker = make(server, recording, clock, max_members=5)
    for i in range(50):
        tracker.track(f"m{i}")
    assert tracker.stats().members == 5
    # The least recently sent were forgotten: m0 may be sent again early
    # (never late); the newest are still debounced.
    assert tracker.track("m0") is True
    assert tracker.track("m49") is False
    # Entries older than the interval age out by themselves.
    clock.advance(61)
    tracker.track("fresh")
    assert tracker.stats().members == 1
    tracker.close(timeout=0)


def test_the_queue_is_capped_and_a_dropped_member_tries_again(
    server: Server,
    recording: Recording,
    clock: FakeClock,
    space: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracker = make(server, recording, clock, space=space, queue_size=3)
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        results = [tracker.track(m) for m in ("a", "b", "c", "d", "e")]
    assert results == [True, True, True, False, False]
    stats = tracker.stats()
    assert (stats.queued, stats.dropped, stats.pending) == (3, 2, 3)
    assert len([r for r in lines(caplog) if "queue is full" in r.getMessage()]) == 1
    tracker.flush()
    assert tracker.track("d") is True  # not debounced: it was never sent
    assert tracker.track("a") is False
    tracker.flush()
    assert set(recording.beats()) == {(space, "user", m) for m in "abcd"}
    tracker.close()


def test_drives_on_when_herenow_is_down_logging_once_per_interval(
    dead_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    tracker = PresenceTracker(base_url=dead_url, interval=60, clock=clock, background=False)
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        for minute in range(3):
            for second in range(0, 60, 10):
                # A new member each time, so each flush really tries to send.
                assert tracker.track(f"m{minute}-{second}") is True
                assert tracker.flush() == 0  # never raises
                clock.advance(10)
    logged = lines(caplog)
    assert len(logged) == 3  # one per minute, not one per failure
    assert all(r.levelno == logging.WARNING for r in logged)
    assert "6 heartbeat(s) lost" in logged[1].getMessage()  # those of the minute before
    stats = tracker.stats()
    assert (stats.sent, stats.failures, stats.dropped) == (0, 18, 18)
    tracker.close()


def test_recovery_is_logged_once(
    server: Server, dead_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture, space: str
) -> None:
    up = herenow.Client(server.url)
    tracker = PresenceTracker(
        herenow.Client(dead_url, retries=0), space=space, clock=clock, background=False
    )
    with caplog.at_level(logging.INFO, logger="herenow.tracker"):
        tracker.track("a")
        tracker.flush()
        tracker.client.close()
        tracker.client = up  # herenow is back
        for m in "bcd":
            tracker.track(m)
            tracker.flush()
    messages = [r.getMessage() for r in lines(caplog)]
    assert len(messages) == 2
    assert "failed" in messages[0] and "going through again" in messages[1]
    tracker.close()
    up.close()


def test_track_never_raises_on_bad_input(
    clock: FakeClock, dead_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    tracker = PresenceTracker(base_url=dead_url, clock=clock, background=False)
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        assert tracker.track("") is False
        assert tracker.track(None) is False  # type: ignore[arg-type]
        assert tracker.track("ann", kind="robot") is False
    assert tracker.stats().queued == 0
    assert len(lines(caplog)) == 1  # once per interval, however many
    tracker.close()


def test_the_server_refusing_a_batch_is_driven_on(
    server: Server,
    recording: Recording,
    clock: FakeClock,
    space: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracker = make(server, recording, clock, space=space)
    tracker.track("ann", space="bad space!")  # the server refuses the batch
    tracker.track("bob")  # another space, another batch: it goes through
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        assert tracker.flush() == 1
    assert "bad-space-name" in lines(caplog)[0].getMessage()
    assert tracker.client.member(space, "bob").status is Status.ONLINE
    tracker.close()


def test_heartbeats_the_server_would_refuse_are_not_queued(
    server: Server,
    recording: Recording,
    clock: FakeClock,
    space: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One bad heartbeat would have the server refuse its whole batch."""
    tracker = make(server, recording, clock, space=space)
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        assert tracker.track("x" * 257) is False
        assert tracker.track("é" * 129) is False  # 258 bytes
        assert tracker.track("tab\there") is False
        assert tracker.track("nul\x00") is False
        assert tracker.track("c1\x85") is False
        assert tracker.track("big", meta={"x": "y" * 1020}) is False
        assert tracker.track("odd", meta={"when": object()}) is False
        assert tracker.track("list", meta=["not", "an", "object"]) is False  # type: ignore[arg-type]
        assert tracker.track("nan", meta={"x": float("nan")}) is False
        # The good ones, at the limits, in the same batch.
        assert tracker.track("x" * 256) is True
        assert tracker.track("é" * 128) is True
        assert tracker.track("fits", meta={"x": "y" * 1016}) is True  # 1024 bytes
    assert len(lines(caplog)) == 1  # once per interval
    assert tracker.flush() == 3
    assert tracker.client.member(space, "fits").meta == {"x": "y" * 1016}
    assert tracker.client.count(space).users == 3
    tracker.close()


def test_the_background_thread_sends(server: Server, space: str) -> None:
    tracker = PresenceTracker(base_url=server.url, space=space, flush_interval=0.01)
    members = [uid() for _ in range(20)]
    for m in members:
        tracker.track(m)
    assert tracker.wait_idle(timeout=10)
    stats = tracker.stats()
    assert (stats.sent, stats.pending) == (20, 0)
    assert {m.id for m in tracker.client.iter_online(space)} == set(members)
    tracker.close()
    assert tracker.track(uid()) is False  # closed


def test_close_sends_what_is_queued(server: Server, space: str) -> None:
    tracker = PresenceTracker(base_url=server.url, space=space, flush_interval=60)
    tracker.track("late")
    tracker.close(timeout=5)
    with herenow.Client(server.url) as c:
        assert c.member(space, "late").status is Status.ONLINE


def test_wait_idle_without_a_thread_says_so(clock: FakeClock, dead_url: str) -> None:
    tracker = PresenceTracker(base_url=dead_url, clock=clock, background=False)
    tracker.track("ann")
    assert tracker.wait_idle(timeout=0.1) is False
    tracker.close()


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        PresenceTracker(base_url="http://x", batch_size=20_000)
    with pytest.raises(ValueError):
        PresenceTracker(base_url="http://x", queue_size=0)
    with pytest.raises(ValueError):
        PresenceTracker(base_url="http://x", interval=-1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_worker_sends_its_own_heartbeats(server: Server, space: str) -> None:
    """A prefork server (gunicorn, uWSGI) forks after the app loaded: the
    child gets no sender thread and a copy of the parent's sockets. The
    tracker starts afresh there."""
    tracker = PresenceTracker(base_url=server.url, space=space, flush_interval=0.01)
    tracker.track("parent")
    assert tracker.wait_idle(10)  # the parent's thread and a pooled connection exist
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
        pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 1
        try:
            tracker.track("child")
            if tracker.wait_idle(10) and tracker.stats().sent == 2:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert tracker.client.member(space, "child").status is Status.ONLINE
    tracker.close()
