"""Django: the middleware (sync and async), the template tags and the
context processor, with Django's test client, configured in-process, and
the real server."""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from typing import Any, Iterator

import django
import pytest
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="herenow-tests-only",
        ALLOWED_HOSTS=["testserver"],
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "herenow.django",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "herenow.django.middleware.HerenowMiddleware",
        ],
        ROOT_URLCONF=__name__,
        # A file, not :memory:: async views run the ORM in another thread.
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": os.path.join(tempfile.mkdtemp(prefix="herenow-django-"), "db.sqlite3"),
            }
        },
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {"context_processors": ["herenow.django.context_processors.presence"]},
            }
        ],
        USE_TZ=True,
        # Fast hashing: the tests make users, not passwords.
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        HERENOW={"URL": "http://127.0.0.1:9"},
    )
    django.setup()

from conftest import FakeClock, Server, lines, uid  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.template import engines  # noqa: E402
from django.test import AsyncClient, Client, override_settings  # noqa: E402
from django.urls import path  # noqa: E402

import herenow  # noqa: E402
from herenow import Kind, PresenceTracker, Status, Visitor  # noqa: E402
from herenow.django import conf  # noqa: E402
from herenow.django.webhooks import webhook_view  # noqa: E402
from herenow.webhooks import WebhookBatch, WebhookEventType, sign  # noqa: E402

# --- the site under test ---------------------------------------------------


def hello(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"hello {request.user}")


async def hello_async(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello async")


def render(source: str):
    template = engines["django"].from_string(source)

    def view(request: HttpRequest, **kw: Any) -> HttpResponse:
        return HttpResponse(template.render(kw, request))

    return view


WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
webhook_batches: list = []


def on_presence(batch: WebhookBatch, request: HttpRequest) -> Any:
    webhook_batches.append(batch)
    if any(e.space == "teapot" for e in batch.events):
        return HttpResponse("handled my way", status=202)
    return None


urlpatterns = [
    path("", hello),
    path("hooks/settings", webhook_view(on_presence)),
    path("hooks/fixed", webhook_view(on_presence, secret=WEBHOOK_SECRET)),
    path("hooks/small", webhook_view(on_presence, secret=[WEBHOOK_SECRET], max_body=64)),
    path("async", hello_async),
    path("online", render("{% load herenow %}{% whos_online %}")),
    path(
        "seen/<str:who>",
        render(
            "{% load herenow %}{% herenow_last_seen who as seen %}"
            "{{ seen.status.value }}|{{ seen.space }}"
        ),
    ),
    path(
        "members",
        render(
            "{% load herenow %}{% herenow_online limit=5 as ms %}{% herenow_count as n %}"
            "{% for m in ms %}{{ m|herenow_name }},{% endfor %}|{{ n.users }}"
        ),
    ),
    path("ctx", render("{{ herenow.count.users }}/{{ herenow.online|length }}")),
    # Every tag and query, as a page would use them.
    path(
        "everything/<str:who>",
        render(
            "{% load herenow %}"
            '{% whos_online unknown="(presence unavailable)" %}'
            "[{% herenow_last_seen who as seen %}"
            "{% if seen %}{{ seen.status.value }}, {{ seen.last_seen|timesince }}{% endif %}]"
            "[{% herenow_seen who %}]"
            "[{% herenow_online limit=5 as ms %}{% for m in ms %}{{ m|herenow_name }},{% endfor %}]"
            "[{% herenow_count as n %}{{ n.users }}]"
            "[{{ herenow.count.users }}/{% for m in herenow.online %}{{ m.id }},{% endfor %}]"
        ),
    ),
]


def user_meta(user: Any) -> Any:
    return {"name": user.get_username().title(), "staff": user.is_staff}


# --- fixtures ----------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def database() -> None:
    call_command("migrate", run_syncdb=True, verbosity=0)


@pytest.fixture
def site(server: Server, space: str, clock: FakeClock) -> Iterator[PresenceTracker]:
    """HERENOW points at the test server; the middleware's tracker runs on
    the test's clock, without a thread (the test flushes)."""
    with override_settings(HERENOW={"URL": server.url, "SPACE": space, "CACHE_SECONDS": 0}):
        tracker = PresenceTracker(base_url=server.url, space=space, clock=clock, background=False)
        conf.set_tracker(tracker)
        yield tracker
    tracker.close()


@pytest.fixture
def ada() -> User:
    return User.objects.create_user(uid("ada"), password="x")


def beats(tracker: PresenceTracker) -> list:
    return [(b.kind.value, b.id, b.meta) for _, b in tracker._queue]


# --- the middleware ----------------------------------------------------------


def test_middleware_heartbeats_the_user_once_per_interval(
    site: PresenceTracker, ada: User, clock: FakeClock, space: str
) -> None:
    browser = Client()
    browser.force_login(ada)
    for _ in range(5):
        response = browser.get("/")
        assert response.status_code == 200
        assert response.content.decode() == f"hello {ada.username}"
    assert beats(site) == [("user", str(ada.pk), {"name": ada.username})]
    assert site.flush() == 1

    with herenow.Client(site.client.base_url) as c:
        member = c.member(space, str(ada.pk))
    assert member.status is Status.ONLINE and member.meta == {"name": ada.username}

    clock.advance(60)
    browser.get("/")
    assert site.flush() == 1  # one more after the interval


def test_middleware_heartbeats_guests_by_ip_or_cookie(site: PresenceTracker) -> None:
    Client().get("/")
    Client(REMOTE_ADDR="192.0.2.8").get("/")
    assert beats(site) == [("guest", "127.0.0.1", None), ("guest", "192.0.2.8", None)]

    with override_settings(HERENOW={"GUEST_COOKIE": "visitor", "TRACK_GUESTS": True}):
        conf.set_tracker(site)
        browser = Client()
        browser.cookies["visitor"] = "v-123"
        browser.get("/")
    assert beats(site)[-1] == ("guest", herenow._identity.guest_from_cookie("v-123"), None)

    with override_settings(HERENOW={"TRACK_GUESTS": False}):
        conf.set_tracker(site)
        Client(REMOTE_ADDR="192.0.2.99").get("/")
    assert len(beats(site)) == 3


def test_middleware_hooks(site: PresenceTracker, ada: User) -> None:
    hooks = {
        "USER_ID": lambda user: f"django:{user.username}",
        "USER_META": f"{__name__}.user_meta",
    }
    with override_settings(HERENOW=hooks):
        conf.set_tracker(site)
        browser = Client()
        browser.force_login(ada)
        browser.get("/")
    assert beats(site) == [
        ("user", f"django:{ada.username}", {"name": ada.username.title(), "staff": False})
    ]

    with override_settings(
        HERENOW={"IDENTIFY": lambda request: Visitor(request.path.strip("/"), Kind.GUEST)}
    ):
        conf.set_tracker(site)
        Client().get("/ctx")
    assert beats(site)[-1] == ("guest", "ctx", None)


def test_async_middleware(site: PresenceTracker, ada: User, space: str) -> None:
    async def visit() -> list:
        browser = AsyncClient()
        if hasattr(browser, "aforce_login"):
            await browser.aforce_login(ada)
        else:  # Django < 5
            await asyncio.get_running_loop().run_in_executor(None, browser.force_login, ada)
        return [await browser.get("/async") for _ in range(3)] + [await AsyncClient().get("/async")]

    responses = asyncio.run(visit())
    assert [r.status_code for r in responses] == [200] * 4
    assert beats(site) == [
        ("user", str(ada.pk), {"name": ada.username}),
        ("guest", "127.0.0.1", None),
    ]


def test_middleware_drives_on_when_herenow_is_down(
    dead_url: str, clock: FakeClock, ada: User, caplog: pytest.LogCaptureFixture
) -> None:
    with override_settings(HERENOW={"URL": dead_url, "CACHE_SECONDS": 0}):
        tracker = PresenceTracker(base_url=dead_url, clock=clock, background=False)
        conf.set_tracker(tracker)
        browser = Client()
        browser.force_login(ada)
        with caplog.at_level(logging.WARNING):
            for _minute in range(2):
                for _ in range(10):
                    assert browser.get("/").status_code == 200
                    assert Client(REMOTE_ADDR="192.0.2.1").get("/").status_code == 200
                    tracker.flush()
                    clock.advance(1)
                clock.advance(50)
            # The template helpers drive on too: "unknown", rendered as nothing.
            page = browser.get("/online")
            assert page.status_code == 200 and page.content.decode().strip() == ""
            assert browser.get("/members").content.decode() == "|"
            assert browser.get(f"/seen/{ada.pk}").content.decode() == "|"
        tracker_lines = lines(caplog)
        query_lines = [r for r in caplog.records if r.name == "herenow.django"]
        assert len(tracker_lines) == 2  # one per interval
        assert len(query_lines) == 1  # once a minute, however many queries
        tracker.close()


def test_settings_make_the_tracker(server: Server, space: str) -> None:
    with override_settings(
        HERENOW={"URL": server.url, "SPACE": space, "INTERVAL": 5, "QUEUE_SIZE": 7}
    ):
        tracker = conf.get_tracker()
        assert conf.get_tracker() is tracker
        assert (tracker.space, tracker.interval, tracker.queue_size) == (space, 5.0, 7)
        assert tracker.client.base_url == server.url
    # override_settings ending resets it: the next one is made afresh.
    assert conf.get_tracker() is not tracker
    with pytest.raises(KeyError):
        conf.setting("NO_SUCH_SETTING")


# --- template tags and the context processor ---------------------------------


def test_template_tags_show_who_is_online_and_last_seen(site: PresenceTracker, space: str) -> None:
    grace, linus = uid("grace"), uid("linus")
    with herenow.Client(site.client.base_url) as c:
        c.heartbeat(space, grace, meta={"name": "Grace Hopper"})
        c.heartbeat(space, linus)
        c.heartbeat(space, "10.1.1.1", kind="guest")
        c.heartbeat(space, "gone")
        c.leave(space, ["gone"])

    page = Client().get("/online").content.decode()
    assert "Grace Hopper" in page and linus in page
    assert "2 users and 1 guest online" in page
    assert 'class="herenow-online"' in page

    assert Client().get(f"/seen/{grace}").content.decode() == f"online|{space}"
    assert Client().get("/seen/gone").content.decode() == f"offline|{space}"
    assert Client().get(f"/seen/{uid('never')}").content.decode() == "offline|None"

    members = Client().get("/members").content.decode()
    assert members == f"{linus},Grace Hopper,|2"
    assert Client().get("/ctx").content.decode() == "2/2"


def test_template_answers_are_cached_briefly(site: PresenceTracker, space: str) -> None:
    with override_settings(
        HERENOW={"URL": site.client.base_url, "SPACE": space, "CACHE_SECONDS": 60}
    ):
        conf.set_tracker(site)
        assert Client().get("/members").content.decode() == "|0"
        with herenow.Client(site.client.base_url) as c:
            c.heartbeat(space, "newcomer")
        # Within CACHE_SECONDS the page does not ask again.
        assert Client().get("/members").content.decode() == "|0"
        conf.reset()
        conf.set_tracker(site)
        assert Client().get("/members").content.decode() == "newcomer,|1"


# --- the webhook view ----------------------------------------------------------


def webhook_post(
    url: str, body: bytes, *, secret: str = WEBHOOK_SECRET, at: Any = None, **extra: str
) -> Any:
    import time as _time

    now = int(_time.time()) if at is None else at
    msg = f"msg_{uid('w')}"
    headers = {
        "HTTP_WEBHOOK_ID": msg,
        "HTTP_WEBHOOK_TIMESTAMP": str(now),
        "HTTP_WEBHOOK_SIGNATURE": sign(secret, msg, now, body),
    }
    headers.update(extra)
    return Client().post(url, data=body, content_type="application/json", **headers)


def webhook_body(space: str = "lobby") -> bytes:
    return (
        b'{"type":"presence.events","timestamp":"2026-11-22T10:00:00.000Z","data":{"events":['
        b'{"id":"e-1","type":"join","space":"' + space.encode() + b'","at_ms":1700000000000,'
        b'"member":"ann","kind":"user","status":"online","last_seen_ms":1700000000000}]}}'
    )


def test_the_webhook_view_hands_verified_events_to_the_handler() -> None:
    webhook_batches.clear()
    r = webhook_post("/hooks/fixed", webhook_body())
    assert r.status_code == 204
    (batch,) = webhook_batches
    (event,) = batch.events
    assert (event.type, event.member, event.status) == (WebhookEventType.JOIN, "ann", Status.ONLINE)
    assert batch.webhook_id and batch.webhook_id.startswith("msg_")
    # A handler's own response is passed through.
    assert webhook_post("/hooks/fixed", webhook_body("teapot")).status_code == 202


def test_the_webhook_view_refuses_what_does_not_verify() -> None:
    webhook_batches.clear()
    other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVld4"
    r = webhook_post("/hooks/fixed", webhook_body(), secret=other)
    assert r.status_code == 401
    assert r["Content-Type"] == "application/problem+json"
    assert r.json()["code"] == "no-matching-signature"
    r = webhook_post("/hooks/fixed", webhook_body(), at=1614265330)
    assert (r.status_code, r.json()["code"]) == (401, "timestamp-too-old")
    r = Client().post("/hooks/fixed", data=webhook_body(), content_type="application/json")
    assert (r.status_code, r.json()["code"]) == (401, "missing-header")
    r = webhook_post("/hooks/fixed", b'{"type":"something.else"}')
    assert (r.status_code, r.json()["code"]) == (400, "bad-payload")
    r = webhook_post("/hooks/small", webhook_body())
    assert (r.status_code, r.json()["code"]) == (413, "body-too-large")
    r = Client().get("/hooks/fixed")
    assert (r.status_code, r["Allow"]) == (405, "POST")
    assert webhook_batches == []  # the handler saw none of them


def test_the_webhook_view_reads_its_secret_from_the_settings() -> None:
    webhook_batches.clear()
    with override_settings(HERENOW={"URL": "http://127.0.0.1:9", "WEBHOOK_SECRET": WEBHOOK_SECRET}):
        assert webhook_post("/hooks/settings", webhook_body()).status_code == 204
    assert len(webhook_batches) == 1
    # A list while rotating: the old one still verifies.
    old = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVld4"
    rotating = {"URL": "http://127.0.0.1:9", "WEBHOOK_SECRET": [WEBHOOK_SECRET, old]}
    with override_settings(HERENOW=rotating):
        assert webhook_post("/hooks/settings", webhook_body(), secret=old).status_code == 204
    assert len(webhook_batches) == 2
    # No secret anywhere is the site's configuration error, not a 4xx.
    with override_settings(HERENOW={"URL": "http://127.0.0.1:9"}):
        os.environ.pop("HERENOW_WEBHOOK_SECRET", None)
        with pytest.raises(herenow.InvalidArgument):
            webhook_post("/hooks/settings", webhook_body())
    with pytest.raises(herenow.InvalidArgument):
        webhook_view(on_presence, secret="whsec_not base64!")


# --- herenow hangs: the circuit breaker ---------------------------------------


def test_a_page_with_every_tag_drives_on_when_herenow_hangs(
    space: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 36: with the herenow process stopped (SIGSTOP), a page with
    every tag and query adds at most 50 ms over the same page with herenow
    healthy, from the second request on; the first pays at most one
    timeout (QUERY_TIMEOUT, 2 s by default). "Unknown" renders as nothing
    or as the caller's text, never as "Nobody is online"."""
    import statistics
    import time

    own = Server().start()
    quiet = logging.getLogger("herenow.test.hung")
    tracker = PresenceTracker(base_url=own.url, space=space, logger=quiet)
    grace = uid("grace")
    try:
        with override_settings(HERENOW={"URL": own.url, "SPACE": space, "CACHE_SECONDS": 0}):
            assert conf.setting("QUERY_TIMEOUT") == 2.0 and conf.setting("BACKOFF") == 30.0
            conf.set_tracker(tracker)
            with herenow.Client(own.url) as c:
                c.heartbeat(space, grace, meta={"name": "Grace Hopper"})
            browser = Client()

            def timed() -> "tuple[float, str]":
                started = time.monotonic()
                response = browser.get(f"/everything/{grace}")
                took = time.monotonic() - started
                assert response.status_code == 200
                return took, response.content.decode()

            timed()  # warm: connections, template compilation
            healthy = [timed() for _ in range(10)]
            page = healthy[-1][1]
            assert "Grace Hopper" in page and "1 user and" in page
            assert "[online]" in page and "[Grace Hopper,][1][1/" in page
            healthy_p50 = statistics.median(t for t, _ in healthy)

            conf.get_breaker().clock = clock
            with caplog.at_level(logging.WARNING, logger="herenow.django"):
                own.pause()
                first, page = timed()
                hung = [timed() for _ in range(10)]
            hung_p50 = statistics.median(t for t, _ in hung)
            print(
                f"\nthe page with every tag: healthy p50 {healthy_p50 * 1000:.1f} ms; herenow "
                f"hung: first {first * 1000:.0f} ms, then p50 {hung_p50 * 1000:.1f} ms "
                f"(+{(hung_p50 - healthy_p50) * 1000:.1f} ms)"
            )
            assert first < 2.0 + 0.5  # one query timed out; the rest answered at once
            assert hung_p50 - healthy_p50 <= 0.050
            for _, p in [(first, page)] + hung:
                assert "Nobody is online" not in p
                assert p.strip().startswith("<div class=\"herenow-whos-online herenow-unknown\">"
                                            "(presence unavailable)</div>")
                assert p.strip().endswith("[][][][][/]")  # nothing, not ", " or "0"
            opened = [r for r in caplog.records if r.name == "herenow.django"]
            assert len(opened) == 1 and "answering 'unknown'" in opened[0].getMessage()

            # Back: after the back-off, one probe, and the page is whole again.
            own.resume()
            clock.advance(30)
            _, page = timed()
            assert "Grace Hopper" in page and "[Grace Hopper,][1][1/" in page
            assert conf.get_breaker().state == "closed"
    finally:
        tracker.close(timeout=0)
        own.resume()
        own.stop()


# --- guests by a first-party cookie ----------------------------------------------


def test_set_guest_cookie_counts_two_browsers_behind_one_address_apart(
    site: PresenceTracker, space: str
) -> None:
    with override_settings(
        HERENOW={"URL": site.client.base_url, "SPACE": space, "SET_GUEST_COOKIE": True}
    ):
        conf.set_tracker(site)
        one, two = Client(REMOTE_ADDR="192.0.2.10"), Client(REMOTE_ADDR="192.0.2.10")
        first = one.get("/")
        two.get("/")
        for _ in range(3):
            one.get("/")  # the cookie again: the same guest, debounced
        morsel = first.cookies["herenow_guest"]
        assert len(morsel.value) >= 22  # 128 random bits
        assert morsel["httponly"] is True and morsel["samesite"] == "Lax"
        assert morsel["path"] == "/" and int(morsel["max-age"]) == 365 * 24 * 3600
        assert not morsel["secure"]  # over HTTP; Secure over HTTPS
        assert one.get("/").cookies.get("herenow_guest") is None  # set once
        queued = beats(site)
        assert [k for k, _, _ in queued] == ["guest", "guest"]
        assert queued[0][1] == herenow._identity.guest_from_cookie(morsel.value)
        assert queued[0][1] != queued[1][1]
        assert site.flush() == 2
        assert site.client.count(space).guests == 2
        secure = Client(REMOTE_ADDR="192.0.2.10").get("/", secure=True)
        assert secure.cookies["herenow_guest"]["secure"] is True

    # Off (the default): by IP, one guest, no cookie.
    with override_settings(HERENOW={"URL": site.client.base_url, "SPACE": space}):
        conf.set_tracker(site)
        response = Client(REMOTE_ADDR="192.0.2.11").get("/")
        Client(REMOTE_ADDR="192.0.2.11").get("/")
        assert "herenow_guest" not in response.cookies
        assert beats(site)[-1] == ("guest", "192.0.2.11", None)


# --- the docs' Django snippets, as written -------------------------------------


def readme_blocks(language: str) -> list:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    text = (root / "README.md").read_text()
    guide = (root.parent.parent / "docs" / "CLIENTS.md").read_text()
    start = guide.index("\n## Python\n")
    text += guide[start : guide.index("\n## ", start + 1)]
    return re.findall(r"```" + language + r"\n(.*?)```", text, re.S)


def test_the_readmes_django_settings_name_real_settings() -> None:
    settings_blocks = [b for b in readme_blocks("python") if "HERENOW = {" in b]
    assert len(settings_blocks) == 2
    for block in settings_blocks:
        scope: dict = {"INSTALLED_APPS": [], "MIDDLEWARE": []}
        exec(block, scope)
        assert set(scope["HERENOW"]) <= set(conf.DEFAULTS)
        assert "herenow.django.middleware.HerenowMiddleware" in scope["MIDDLEWARE"]


def test_the_readmes_templates_render_as_documented(
    site: PresenceTracker, space: str, ada: User, dead_url: str
) -> None:
    blocks = readme_blocks("django")
    assert len(blocks) == 2
    with herenow.Client(site.client.base_url) as c:
        c.heartbeat(space, str(ada.pk), meta={"name": "Ada"})
    for block in blocks:
        page = engines["django"].from_string(block).render({"user": ada})
        assert "1 user and 0 guests online" in page and "Ada" in page and "online" in page
    # herenow down: nothing rendered but the blocks' own whitespace.
    with override_settings(HERENOW={"URL": dead_url, "SPACE": space, "CACHE_SECONDS": 0}):
        for block in blocks:
            page = engines["django"].from_string(block).render({"user": ada})
            assert page.split() == [], page
