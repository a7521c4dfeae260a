"""The shared client scenario (clients/SCENARIO.md), the same steps and
answers as the Go and TypeScript clients' ``shared_scenario`` tests.

It runs against a server of its own, so the ``/metrics`` deltas of the
debounce step are the scenario's alone. The middleware runs on an injected
clock and its sender is flushed by hand: nothing here sleeps for state.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import FakeClock, Server, lines

import herenow
from herenow import Heartbeat, Kind, MemberRef, PresenceTracker, Status
from herenow.wsgi import HerenowWSGIMiddleware

PAGE = b"hello from the site"


@pytest.fixture(scope="module")
def scenario_server() -> Iterator[Server]:
    s = Server().start()
    yield s
    s.stop()


@pytest.fixture
def prefix() -> str:
    return f"sc{uuid.uuid4().hex[:8]}"


def heartbeats_total(client: herenow.Client) -> int:
    """The server's ``herenow_heartbeats_total``: every heartbeat received."""
    m = re.search(r"^herenow_heartbeats_total(?:\{[^}]*\})?\s+(\d+)", client.metrics(), re.M)
    assert m, "/metrics has no herenow_heartbeats_total"
    return int(m.group(1))


def site() -> Callable[[Dict[str, Any], Callable[..., Any]], List[bytes]]:
    def app(environ: Dict[str, Any], start_response: Callable[..., Any]) -> List[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [PAGE]

    return app


def get(app: Any, user: str) -> Tuple[str, bytes]:
    """One GET / as ``user`` (``REMOTE_USER``) through the WSGI stack."""
    status: List[str] = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/",
        "REMOTE_ADDR": "192.0.2.1",
        "REMOTE_USER": user,
        "wsgi.url_scheme": "http",
    }
    body = b"".join(app(environ, lambda s, h, exc_info=None: status.append(s)))
    return status[0], body


def test_shared_scenario(scenario_server: Server, prefix: str) -> None:
    S = f"{prefix}-space"

    def u(name: str) -> str:
        return f"{prefix}-{name}"

    ada, nobody, zed = u("ada"), u("nobody"), u("zed")
    ms = [u(f"m{i:02d}") for i in range(24)]
    guest = MemberRef("10.0.0.7", Kind.GUEST)

    with herenow.Client(scenario_server.url) as hn:
        # 1. A single heartbeat.
        r = hn.heartbeat(S, ada, meta={"name": "Ada"})
        assert (r.accepted, r.joined, r.stale) == (1, 1, 0)
        m = hn.member(S, ada)
        assert m.status is Status.ONLINE
        assert isinstance(m.last_seen_ms, int)
        assert m.meta == {"name": "Ada"}

        # 2. Batches.
        r = hn.heartbeats(S, [*ms, Heartbeat(guest.id, Kind.GUEST)])
        assert (r.accepted, r.joined, r.stale) == (25, 25, 0)
        r = hn.heartbeats(S, [ada, ms[0]])
        assert (r.accepted, r.joined) == (2, 0)

        # 3. Online, paged to the end: 10 + 10 + 5, every user once, in id order.
        everyone = sorted([ada, *ms])
        pages: List[List[str]] = []
        cursor: Optional[str] = None
        while True:
            page = hn.online(S, order="id", limit=10, cursor=cursor)
            assert page.window_ms == 600_000
            pages.append([x.id for x in page.members])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
            assert len(pages) < 10, "paging never ends"
        assert [len(p) for p in pages] == [10, 10, 5]
        assert [i for p in pages for i in p] == everyone
        assert [x.id for x in hn.iter_online(S, order="id", page_size=10)] == everyone

        # 4. Count.
        c = hn.count(S)
        assert (c.users, c.guests, c.total, c.window_ms) == (25, 1, 26, 600_000)

        # 5. Status: unknown is not an error; the batch keeps the order asked.
        m = hn.member(S, nobody)
        assert (m.status, m.last_seen_ms) == (Status.OFFLINE, None)
        got = hn.status(S, [ada, nobody, guest])
        assert [(x.id, x.kind, x.status) for x in got] == [
            (ada, Kind.USER, Status.ONLINE),
            (nobody, Kind.USER, Status.OFFLINE),
            ("10.0.0.7", Kind.GUEST, Status.ONLINE),
        ]
        assert isinstance(got[0].last_seen_ms, int) and got[1].last_seen_ms is None

        # 6. Last seen anywhere.
        a, n = hn.users_status([ada, nobody])
        assert (a.id, a.status, a.space) == (ada, Status.ONLINE, S)
        assert isinstance(a.last_seen_ms, int)
        assert (n.id, n.status, n.last_seen_ms, n.space) == (nobody, Status.OFFLINE, None, None)

        # 7. Friends and online friends.
        assert hn.set_friends(ada, [ms[0], ms[1], zed]) == 3
        assert hn.add_friends(ada, [ms[2]]) == 4
        assert hn.remove_friends(ada, [ms[1]]) == 3
        assert set(hn.friends(ada).friends) == {ms[0], ms[2], zed}
        assert {x.id for x in hn.online_friends(S, ada)} == {ms[0], ms[2]}

        # 8. Leave: offline at once, last seen remembered.
        assert hn.leave(S, [ms[0], nobody]) == 1
        m = hn.member(S, ms[0])
        assert m.status is Status.OFFLINE and isinstance(m.last_seen_ms, int)
        assert hn.count(S).users == 24
        assert [x.id for x in hn.online_friends(S, ada)] == [ms[2]]

        # 9. Erase.
        e = hn.erase_user(ada)
        assert (e.presence, e.remembered, e.friend_set, e.listed_by) == (1, 0, True, 0)
        seen = hn.user(ada)
        assert (seen.status, seen.last_seen_ms, seen.space) == (Status.OFFLINE, None, None)
        assert hn.friends(ada).friends == []

        # 10. The server's 4xx problems are typed errors.
        with pytest.raises(herenow.BadRequest) as bad_id:
            hn.member(S, "x" * 300)
        assert (bad_id.value.status, bad_id.value.code) == (400, "bad-member-id")
        assert bad_id.value.retry_after is None and not bad_id.value.retryable
        with pytest.raises(herenow.ProblemError) as bad_cursor:
            hn.online(S, cursor="not-a-cursor")
        assert isinstance(bad_cursor.value, herenow.BadRequest)
        assert (bad_cursor.value.status, bad_cursor.value.code) == (400, "bad-cursor")


def test_shared_scenario_debounce(
    scenario_server: Server, prefix: str, clock: FakeClock
) -> None:
    """11. 1,000 requests from 10 users → at most 10 heartbeats, counted by
    the server itself."""
    S2 = f"{prefix}-site"
    users = [f"{prefix}-v{i}" for i in range(10)]
    with herenow.Client(scenario_server.url) as hn:
        tracker = PresenceTracker(
            herenow.Client(scenario_server.url),
            space=S2,
            interval=60,
            clock=clock,
            background=False,  # sent by flush(), not by a thread's timing
        )
        app = HerenowWSGIMiddleware(site(), tracker)
        try:
            h0 = heartbeats_total(hn)
            for i in range(1000):
                assert get(app, users[i % 10]) == ("200 OK", PAGE)
                clock.advance(0.05)  # 50 s in all: one interval
            assert tracker.flush() == 10
            h1 = heartbeats_total(hn)
            assert h1 - h0 <= 10
            assert h1 - h0 == 10
            assert sorted(x.id for x in hn.iter_online(S2)) == sorted(users)

            clock.advance(60)  # the next interval: each user once more
            for user in users:
                assert get(app, user) == ("200 OK", PAGE)
            assert tracker.flush() == 10
            assert heartbeats_total(hn) - h1 == 10
            stats = tracker.stats()
            assert (stats.tracked, stats.sent, stats.debounced) == (1010, 20, 990)
        finally:
            tracker.close()


def test_shared_scenario_server_down(
    dead_url: str, prefix: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """12. herenow is down: every request still answers, one log line per
    interval."""
    tracker = PresenceTracker(
        base_url=dead_url, space=f"{prefix}-down", interval=60, clock=clock, background=False
    )
    app = HerenowWSGIMiddleware(site(), tracker)
    try:
        with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
            for i in range(20):
                assert get(app, f"{prefix}-w{i}") == ("200 OK", PAGE)
                assert tracker.flush() == 0  # failed, and did not raise
            assert len(lines(caplog)) == 1
            clock.advance(60)
            assert get(app, f"{prefix}-late") == ("200 OK", PAGE)
            assert tracker.flush() == 0
        logged = lines(caplog)
        assert len(logged) == 2
        assert all(r.levelno == logging.WARNING for r in logged)
        assert tracker.stats().failures == 21
    finally:
        tracker.close()
