"""Driving on for real (issue 36): the circuit breaker, the sender's
batching as documented, and a bounded close() against a herenow process
that hangs (stopped with SIGSTOP, so the kernel still accepts connections
and nothing answers). The Django page measured against a hung server is in
test_django.py."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Iterator, List, Tuple

import httpx
import pytest
from conftest import FakeClock, Server, uid

import herenow
from herenow import CircuitBreaker, PresenceTracker, Status, Unknown

# --- the breaker -----------------------------------------------------------------


def test_unknown_renders_as_nothing_or_the_callers_text() -> None:
    blank, text = Unknown(), Unknown("presence unavailable")
    assert (str(blank), str(text)) == ("", "presence unavailable")
    assert not blank and not text and len(text) == 0 and list(text) == []
    # What a template reads of it is blank too, never the text again.
    assert str(text.status.value) == "" and str(text["users"]) == "" and not text.last_seen
    assert blank == text and Unknown() != [] and Unknown() is not None


def test_the_breaker_opens_once_answers_at_once_then_probes(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("herenow.test.breaker")
    breaker = CircuitBreaker(clock=clock, logger=logger)  # the default back-off, 30 s
    calls: List[str] = []

    def hung() -> Any:
        calls.append("hung")
        raise herenow.Timeout("timed out")

    def answers() -> Any:
        calls.append("answers")
        return ["ada"]

    with caplog.at_level(logging.INFO, logger=logger.name):
        assert breaker.call(hung, Unknown()) == Unknown()
        for _ in range(100):  # every later call answers at once, asking nothing
            assert breaker.call(answers, Unknown("?")) == Unknown()
            clock.advance(0.25)
        assert calls == ["hung"] and breaker.short_circuited == 100
        assert breaker.state == "open"
        clock.advance(5)  # 30 s after the failure: one probe, which fails again
        assert breaker.call(hung, Unknown()) == Unknown()
        assert breaker.call(answers, Unknown()) == Unknown()  # open again at once
        assert calls == ["hung", "hung"] and breaker.openings == 2
        clock.advance(30)
        assert breaker.call(answers, Unknown()) == ["ada"]  # the probe answers: closed
        assert breaker.state == "closed" and breaker.call(answers, None) == ["ada"]
    records = [r for r in caplog.records if r.name == logger.name]
    # One warning per opening (not per call), one line when it closes.
    assert [r.levelno for r in records] == [logging.WARNING, logging.WARNING, logging.INFO]
    assert "answering 'unknown' for 30 s" in records[0].getMessage()


def test_one_probe_at_a_time(clock: FakeClock) -> None:
    breaker = CircuitBreaker(10, clock=clock, logger=logging.getLogger("herenow.test.breaker"))
    breaker.failed(herenow.TransportError("refused", sent=False))
    clock.advance(10)
    assert breaker.allow() is True  # the probe
    assert breaker.allow() is False and breaker.state == "probing"
    breaker.succeeded()
    assert breaker.allow() is True and breaker.state == "closed"


def test_a_refusal_is_an_answer(clock: FakeClock) -> None:
    """A 4xx fails its own call; the server answered, so nothing opens. A
    5xx or 429 opens it, as no answer does."""
    breaker = CircuitBreaker(clock=clock, logger=logging.getLogger("herenow.test.breaker"))

    def refused() -> Any:
        raise herenow.BadRequest(400, "bad-member-id")

    assert breaker.call(refused, "unknown") == "unknown"
    assert breaker.state == "closed" and breaker.openings == 0

    def unavailable() -> Any:
        raise herenow.ServiceUnavailable(503, "store-unavailable")

    breaker.call(unavailable, None)
    assert breaker.state == "open"


# --- batching as documented ----------------------------------------------------


class Counting(httpx.BaseTransport):
    """Sends to the real server; counts the heartbeat POSTs and when each
    went out."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.posts: List[Tuple[float, int]] = []
        self.lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/heartbeats"):
            with self.lock:
                self.posts.append((time.monotonic(), len(json.loads(request.content)["heartbeats"])))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def test_100_heartbeats_in_half_a_second_are_one_batch(server: Server, space: str) -> None:
    """The default flush_interval (1 s): the sender gathers for that long
    after the first queued heartbeat. 100 heartbeats 5 ms apart (0.5 s)
    are one POST."""
    counting = Counting()
    tracker = PresenceTracker(herenow.Client(server.url, transport=counting), space=space)
    assert tracker.flush_interval == 1.0
    ids = [uid("b") for _ in range(100)]
    started = time.monotonic()
    for i, member in enumerate(ids):
        assert tracker.track(member)
        pause = started + (i + 1) * 0.005 - time.monotonic()  # on schedule, however slow
        if pause > 0:
            time.sleep(pause)
    spent = time.monotonic() - started
    assert tracker.wait_idle(timeout=10)
    print(f"\n100 heartbeats tracked in {spent:.3f} s: {len(counting.posts)} POST(s) "
          f"{[n for _, n in counting.posts]}, the first "
          f"{counting.posts[0][0] - started:.3f} s after the first heartbeat")
    assert spent < 1.0, f"tracking took {spent:.3f} s: the machine is too slow for this test"
    assert [n for _, n in counting.posts] == [100]
    assert counting.posts[0][0] - started >= 0.95  # it gathered for flush_interval
    assert tracker.stats().sent == 100
    assert tracker.client.count(space).users == 100
    tracker.close()


def test_a_full_batch_goes_at_once(server: Server, space: str) -> None:
    counting = Counting()
    tracker = PresenceTracker(
        herenow.Client(server.url, transport=counting), space=space, batch_size=50,
        flush_interval=60,
    )
    for _ in range(100):
        tracker.track(uid("f"))
    assert tracker.wait_idle(timeout=10)  # long before flush_interval
    assert [n for _, n in counting.posts] == [50, 50]
    tracker.close()


# --- bounded shutdown ------------------------------------------------------------


@pytest.fixture
def own_server() -> Iterator[Server]:
    """A server of this test's own, to stop with SIGSTOP; continued and
    stopped by pid at the end."""
    s = Server().start()
    try:
        yield s
    finally:
        s.resume()
        s.stop()


def test_close_returns_within_its_deadline_against_a_hung_server(
    own_server: Server, space: str
) -> None:
    quiet = logging.getLogger("herenow.test.hung")  # its thread outlives the test
    tracker = PresenceTracker(
        base_url=own_server.url, space=space, flush_interval=0.05, logger=quiet
    )
    assert tracker.close_timeout == 1.0
    tracker.track("before")
    assert tracker.wait_idle(10) and tracker.stats().sent == 1  # a pooled connection
    own_server.pause()
    for _ in range(30):
        tracker.track(uid("air"))
    deadline = time.monotonic() + 5
    while tracker.stats().pending and time.monotonic() < deadline:
        time.sleep(0.01)  # the batch of 30 is in the air, waiting for its 5 s timeout
    time.sleep(0.1)
    for _ in range(10):
        tracker.track(uid("queued"))
    started = time.monotonic()
    abandoned = tracker.close()
    took = time.monotonic() - started
    print(f"\nclose() against a hung server: {took:.3f} s, {abandoned} heartbeat(s) abandoned")
    assert took < 1.25  # the 1 s deadline, and a scheduler's slack on a busy machine
    assert abandoned == 40  # 30 in the air, 10 queued
    stats = tracker.stats()
    assert stats.abandoned == 40 and stats.dropped == 10 and stats.pending == 0
    assert tracker.track("after") is False


def test_close_without_a_thread_is_bounded_too(own_server: Server, space: str) -> None:
    quiet = logging.getLogger("herenow.test.hung")
    tracker = PresenceTracker(
        base_url=own_server.url, space=space, background=False, logger=quiet
    )
    own_server.pause()
    tracker.track("a")
    tracker.track("b")
    started = time.monotonic()
    assert tracker.close(timeout=0.3) == 2
    assert time.monotonic() - started < 0.55


def test_close_still_sends_to_a_healthy_server(server: Server, space: str) -> None:
    tracker = PresenceTracker(base_url=server.url, space=space, flush_interval=60)
    tracker.track("late")
    assert tracker.close() == 0
    with herenow.Client(server.url) as c:
        assert c.member(space, "late").status is Status.ONLINE
