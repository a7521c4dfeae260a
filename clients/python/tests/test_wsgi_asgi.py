"""The WSGI and ASGI middleware: who a request is, the request never
delayed or broken by herenow, and end to end against the real server."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Dict, List, Optional
from wsgiref.util import setup_testing_defaults

import httpx
import pytest
from conftest import FakeClock, Server, lines, uid

import herenow
from herenow import Kind, PresenceTracker, Status
from herenow._identity import guest_from_cookie
from herenow.asgi import HerenowASGIMiddleware
from herenow.wsgi import HerenowWSGIMiddleware, Visitor

# --- WSGI --------------------------------------------------------------------


def hello_app(environ: Dict[str, Any], start_response: Callable[..., Any]) -> List[bytes]:
    start_response("200 OK", [("content-type", "text/plain")])
    return [b"hello"]


def call_wsgi(app: Any, **environ: Any) -> str:
    env: Dict[str, Any] = dict(environ)
    setup_testing_defaults(env)
    status: List[str] = []
    body = b"".join(app(env, lambda s, h, exc_info=None: status.append(s)))
    assert body == b"hello"
    return status[0]


def queued(tracker: PresenceTracker) -> List[tuple]:
    """What the tracker would send (it has no thread in these tests)."""
    return [(space, b.kind.value, b.id, b.meta) for space, b in tracker._queue]


@pytest.fixture
def offline_tracker(clock: FakeClock, dead_url: str) -> PresenceTracker:
    t = PresenceTracker(base_url=dead_url, space="site", clock=clock, background=False)
    yield t
    t.close(timeout=0)


def test_wsgi_tracks_the_user_or_a_guest(offline_tracker: PresenceTracker) -> None:
    app = HerenowWSGIMiddleware(hello_app, offline_tracker, guest_cookie="visitor")
    assert call_wsgi(app, REMOTE_USER="ann", REMOTE_ADDR="10.0.0.1") == "200 OK"
    assert call_wsgi(app, REMOTE_ADDR="10.0.0.2") == "200 OK"
    call_wsgi(app, REMOTE_ADDR="10.0.0.3", HTTP_COOKIE="a=1; visitor=secret-session; b=2")
    call_wsgi(app, REMOTE_USER="ann")  # debounced
    assert queued(offline_tracker) == [
        ("site", "user", "ann", None),
        ("site", "guest", "10.0.0.2", None),
        ("site", "guest", guest_from_cookie("secret-session"), None),
    ]
    # The cookie's value itself never leaves the site.
    assert "secret-session" not in repr(queued(offline_tracker))


def test_wsgi_options(offline_tracker: PresenceTracker) -> None:
    no_guests = HerenowWSGIMiddleware(hello_app, offline_tracker, track_guests=False)
    call_wsgi(no_guests, REMOTE_ADDR="10.0.0.9")
    assert queued(offline_tracker) == []

    proxied = HerenowWSGIMiddleware(hello_app, offline_tracker, trust_forwarded=True, space="shop")
    call_wsgi(proxied, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5, 10.0.0.1")
    custom = HerenowWSGIMiddleware(
        hello_app,
        offline_tracker,
        identify=lambda env: Visitor(env["PATH_INFO"].strip("/"), Kind.USER, {"via": "path"}),
        space=lambda env: "by-path",
    )
    call_wsgi(custom, PATH_INFO="/zoe")
    assert queued(offline_tracker) == [
        ("shop", "guest", "203.0.113.5", None),
        ("by-path", "user", "zoe", {"via": "path"}),
    ]


def test_wsgi_a_failing_identify_never_reaches_the_app(
    offline_tracker: PresenceTracker, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(environ: Dict[str, Any]) -> Optional[Visitor]:
        raise KeyError("no user table")

    app = HerenowWSGIMiddleware(hello_app, offline_tracker, identify=broken)
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        for _ in range(5):
            assert call_wsgi(app) == "200 OK"
    assert len(lines(caplog)) == 1 and "no user table" in lines(caplog)[0].getMessage()


def test_wsgi_drives_on_when_herenow_is_down(
    dead_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Every request succeeds, and the failure is one log line per interval."""
    tracker = PresenceTracker(base_url=dead_url, interval=60, clock=clock, background=False)
    app = HerenowWSGIMiddleware(hello_app, tracker)
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        for _minute in range(2):
            for n in range(20):
                assert call_wsgi(app, REMOTE_USER=f"user{n % 4}") == "200 OK"
                tracker.flush()
                clock.advance(1)
            clock.advance(40)
    assert len(lines(caplog)) == 2
    assert tracker.stats().failures == 8  # 4 members x 2 intervals, one try each
    tracker.close()


def test_wsgi_never_waits_for_herenow(blackhole_url: str) -> None:
    """herenow accepts and never answers: the request is not slowed."""
    # Its own logger: its thread outlives the test, stuck until the timeout,
    # and must not log into another test's records.
    quiet = logging.getLogger("herenow.test.blackhole")
    tracker = PresenceTracker(base_url=blackhole_url, timeout=3.0, flush_interval=0, logger=quiet)
    app = HerenowWSGIMiddleware(hello_app, tracker)
    started = time.monotonic()
    for n in range(50):
        assert call_wsgi(app, REMOTE_USER=f"u{n}") == "200 OK"
    elapsed = time.monotonic() - started
    assert elapsed < 1.0
    stats = tracker.stats()
    assert stats.sent == 0 and stats.failures == 0  # still stuck in the air
    tracker.close(timeout=0)


def test_wsgi_end_to_end(server: Server, space: str) -> None:
    tracker = PresenceTracker(base_url=server.url, space=space, flush_interval=0.01)
    app = HerenowWSGIMiddleware(hello_app, tracker)
    ann = uid("ann")
    for _ in range(10):
        call_wsgi(app, REMOTE_USER=ann)
    call_wsgi(app, REMOTE_ADDR="192.0.2.44")
    assert tracker.wait_idle(10)
    with herenow.Client(server.url) as c:
        assert c.member(space, ann).status is Status.ONLINE
        assert c.member(space, "192.0.2.44", kind="guest").status is Status.ONLINE
    assert tracker.stats().sent == 2
    tracker.close()


# --- ASGI --------------------------------------------------------------------


class User:
    """Like Starlette's SimpleUser: no ``identity``, a ``display_name``."""

    is_authenticated = True

    def __init__(self, name: str) -> None:
        self.display_name = name

    @property
    def identity(self) -> str:
        raise NotImplementedError()


async def hello_asgi(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        }
    )
    await send({"type": "http.response.body", "body": b"hello"})


def with_user(app: Any) -> Any:
    """An outer auth middleware: ``?as=NAME`` signs in as NAME."""

    async def outer(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        qs = scope.get("query_string", b"").decode()
        if qs.startswith("as="):
            scope = dict(scope, user=User(qs[3:]))
        await app(scope, receive, send)

    return outer


def get_all(app: Any, *requests: Dict[str, Any]) -> List[httpx.Response]:
    async def run() -> List[httpx.Response]:
        transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://site.test") as c:
            return [await c.get(r.pop("path", "/"), **r) for r in requests]

    return asyncio.run(run())


def test_asgi_tracks_the_user_or_a_guest(offline_tracker: PresenceTracker) -> None:
    app = with_user(HerenowASGIMiddleware(hello_asgi, offline_tracker, guest_cookie="visitor"))
    answers = get_all(
        app,
        {"params": {"as": "ann"}},
        {"params": {"as": "ann"}},  # debounced
        {},
        {"headers": {"cookie": "visitor=abc"}},
    )
    assert [(r.status_code, r.text) for r in answers] == [(200, "hello")] * 4
    assert queued(offline_tracker) == [
        ("site", "user", "ann", None),
        ("site", "guest", "198.51.100.7", None),
        ("site", "guest", guest_from_cookie("abc"), None),
    ]


def test_asgi_forwarded_and_custom(offline_tracker: PresenceTracker) -> None:
    app = HerenowASGIMiddleware(
        hello_asgi, offline_tracker, trust_forwarded=True, space=lambda s: s["path"].strip("/")
    )
    get_all(app, {"path": "/room1", "headers": {"x-forwarded-for": "203.0.113.9"}})
    assert queued(offline_tracker) == [("room1", "guest", "203.0.113.9", None)]


def test_asgi_passes_other_scopes_through(offline_tracker: PresenceTracker) -> None:
    seen: List[str] = []

    async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    middleware = HerenowASGIMiddleware(app, offline_tracker)
    asyncio.run(middleware({"type": "lifespan"}, None, None))
    asyncio.run(middleware({"type": "websocket", "client": ("1.2.3.4", 1)}, None, None))
    assert seen == ["lifespan", "websocket"] and queued(offline_tracker) == []


def test_asgi_a_failing_identify_never_reaches_the_app(
    offline_tracker: PresenceTracker, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(scope: Dict[str, Any]) -> Optional[Visitor]:
        raise RuntimeError("boom")

    app = HerenowASGIMiddleware(hello_asgi, offline_tracker, identify=broken)
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        answers = get_all(app, {}, {}, {})
    assert [r.status_code for r in answers] == [200, 200, 200]
    assert len(lines(caplog)) == 1


def test_asgi_drives_on_when_herenow_is_down(
    dead_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    tracker = PresenceTracker(base_url=dead_url, interval=60, clock=clock, background=False)
    app = with_user(HerenowASGIMiddleware(hello_asgi, tracker))
    with caplog.at_level(logging.WARNING, logger="herenow.tracker"):
        for _minute in range(3):
            answers = get_all(app, *({"params": {"as": f"u{n}"}} for n in range(5)))
            assert all(r.status_code == 200 for r in answers)
            tracker.flush()
            tracker.flush()
            clock.advance(60)
    assert len(lines(caplog)) == 3
    tracker.close()


def test_asgi_end_to_end(server: Server, space: str) -> None:
    tracker = PresenceTracker(base_url=server.url, space=space, flush_interval=0.01)
    app = with_user(HerenowASGIMiddleware(hello_asgi, tracker))
    bob = uid("bob")
    get_all(app, *({"params": {"as": bob}} for _ in range(10)))
    assert tracker.wait_idle(10)
    with herenow.Client(server.url) as c:
        online = c.online(space, kind="all").members
    assert {(m.id, m.kind) for m in online} == {(bob, Kind.USER)}
    tracker.close()


# --- guests by a first-party cookie (set_guest_cookie=True) -------------------


def check_cookie(header: str) -> str:
    """A guest cookie's Set-Cookie: random, HttpOnly, SameSite=Lax; answers
    its value."""
    parts = [p.strip() for p in header.split(";")]
    name, _, value = parts[0].partition("=")
    assert name == "herenow_guest" and len(value) >= 22  # 128 random bits
    assert set(parts[1:]) == {"Max-Age=31536000", "Path=/", "HttpOnly", "SameSite=Lax"}
    return value


def test_wsgi_set_guest_cookie(server: Server, space: str, clock: FakeClock) -> None:
    """Two anonymous browsers from one address are two guests with the
    option on; a browser sending its cookie back stays one guest."""
    tracker = PresenceTracker(base_url=server.url, space=space, clock=clock, background=False)
    app = HerenowWSGIMiddleware(hello_app, tracker, set_guest_cookie=True)

    def visit(cookie: Optional[str] = None) -> Optional[str]:
        env: Dict[str, Any] = {"REMOTE_ADDR": "192.0.2.20"}
        if cookie:
            env["HTTP_COOKIE"] = f"theme=dark; herenow_guest={cookie}"
        setup_testing_defaults(env)
        got: List[Any] = []
        assert b"".join(app(env, lambda s, h, exc_info=None: got.append(h))) == b"hello"
        set_cookie = [v for k, v in got[0] if k == "Set-Cookie"]
        return check_cookie(set_cookie[0]) if set_cookie else None

    one, two = visit(), visit()
    assert one and two and one != two
    assert visit(one) is None and visit(two) is None  # known: no new cookie
    assert queued(tracker) == [
        (space, "guest", guest_from_cookie(one), None),
        (space, "guest", guest_from_cookie(two), None),
    ]
    assert tracker.flush() == 2
    assert tracker.client.count(space).guests == 2

    # Off (the default): one guest by IP, no cookie.
    plain = HerenowWSGIMiddleware(hello_app, tracker)
    headers: List[Any] = []
    env: Dict[str, Any] = {"REMOTE_ADDR": "192.0.2.21"}
    setup_testing_defaults(env)
    b"".join(plain(env, lambda s, h, exc_info=None: headers.extend(h)))
    assert not [v for k, v in headers if k == "Set-Cookie"]
    assert queued(tracker)[-1] == (space, "guest", "192.0.2.21", None)
    tracker.close()


def test_asgi_set_guest_cookie(server: Server, space: str, clock: FakeClock) -> None:
    tracker = PresenceTracker(base_url=server.url, space=space, clock=clock, background=False)
    app = with_user(HerenowASGIMiddleware(hello_asgi, tracker, set_guest_cookie=True))
    # Each get_all is one browser (its own cookie jar), all from one address.
    one = get_all(app, {}, {}, {})
    two = get_all(app, {})
    first = check_cookie(one[0].headers["set-cookie"])
    assert "set-cookie" not in one[1].headers  # sent back: known
    second = check_cookie(two[0].headers["set-cookie"])
    assert first != second
    signed_in = get_all(app, {"params": {"as": "ann"}})
    assert "set-cookie" not in signed_in[0].headers  # users get none
    assert [(k, i) for _, k, i, _ in queued(tracker)] == [
        ("guest", guest_from_cookie(first)),
        ("guest", guest_from_cookie(second)),
        ("user", "ann"),
    ]
    assert tracker.flush() == 3
    assert tracker.client.count(space).guests == 2
    tracker.close()
