"""WSGI middleware: heartbeat every request's user (or guest), debounced
and in the background (see :mod:`herenow.tracker`).

::

    from herenow import PresenceTracker
    from herenow.wsgi import HerenowWSGIMiddleware

    tracker = PresenceTracker(base_url="http://127.0.0.1:7700", space="site")
    app = HerenowWSGIMiddleware(app, tracker)

The user is ``REMOTE_USER`` (what the server or an auth middleware sets);
without one, a guest by ``guest_cookie`` (hashed) or by IP; with
``set_guest_cookie=True``, a guest without the cookie is given one
(random, ``HttpOnly``, ``SameSite=Lax``; named ``guest_cookie``, default
``herenow_guest``) and known by it, so visitors sharing an address count
apart. Pass
``identify(environ) -> Visitor | None`` to decide yourself. The request
is handed to the app at once; a failure of herenow or of ``identify`` is
logged once per interval and never reaches the app.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

from ._identity import (
    GUEST_COOKIE,
    GUEST_COOKIE_AGE,
    NEW_COOKIE_KEY,
    Visitor,
    forwarded_ip,
    guest,
    parse_cookies,
    set_cookie_header,
)
from .models import Kind
from .tracker import PresenceTracker

__all__ = ["HerenowWSGIMiddleware", "Visitor", "default_identify"]

Environ = Dict[str, Any]
WSGIApp = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]


def default_identify(
    environ: Environ,
    *,
    track_guests: bool = True,
    guest_cookie: Optional[str] = None,
    trust_forwarded: bool = False,
    set_guest_cookie: bool = False,
) -> Optional[Visitor]:
    """``REMOTE_USER`` as a user; otherwise a guest by cookie or IP. With
    ``set_guest_cookie``, a guest without ``guest_cookie`` gets a new value,
    noted in ``environ["herenow.new_guest_cookie"]`` for the middleware to
    set."""
    user = environ.get("REMOTE_USER")
    if user:
        return Visitor(str(user), Kind.USER)
    if not track_guests:
        return None
    ip = forwarded_ip(environ.get("HTTP_X_FORWARDED_FOR")) if trust_forwarded else None
    ip = ip or environ.get("REMOTE_ADDR") or None
    if set_guest_cookie and not guest_cookie:
        guest_cookie = GUEST_COOKIE
    cookies = parse_cookies(environ.get("HTTP_COOKIE", "")) if guest_cookie else {}

    def note(value: str) -> None:
        environ[NEW_COOKIE_KEY] = value

    return guest(cookies, guest_cookie, ip, note if set_guest_cookie else None)


class HerenowWSGIMiddleware:
    """Wraps a WSGI app; see the module's documentation.

    Args:
        app: the WSGI application.
        tracker: the :class:`~herenow.PresenceTracker` that sends.
        identify: ``environ -> Visitor | None``; default
            :func:`default_identify` with the options below.
        space: ``environ -> space name``, or a name; default the
            tracker's space.
        track_guests: heartbeat visitors who are not signed in.
        guest_cookie: a cookie naming a guest (its value is hashed).
        trust_forwarded: take the guest's IP from ``X-Forwarded-For`` (only
            behind a proxy that sets it).
        set_guest_cookie: give a guest without ``guest_cookie`` (default
            name ``herenow_guest``) a random one and know it by it, rather
            than by IP (off by default).
        guest_cookie_age: that cookie's ``Max-Age`` in seconds (a year).
    """

    def __init__(
        self,
        app: WSGIApp,
        tracker: PresenceTracker,
        *,
        identify: Optional[Callable[[Environ], Optional[Visitor]]] = None,
        space: Optional[Any] = None,
        track_guests: bool = True,
        guest_cookie: Optional[str] = None,
        trust_forwarded: bool = False,
        set_guest_cookie: bool = False,
        guest_cookie_age: int = GUEST_COOKIE_AGE,
    ) -> None:
        self.app = app
        self.tracker = tracker
        self.guest_cookie = guest_cookie or GUEST_COOKIE
        self.guest_cookie_age = guest_cookie_age
        if identify is None:

            def identify(environ: Environ) -> Optional[Visitor]:
                return default_identify(
                    environ,
                    track_guests=track_guests,
                    guest_cookie=guest_cookie,
                    trust_forwarded=trust_forwarded,
                    set_guest_cookie=set_guest_cookie,
                )

        self.identify = identify
        self.space = space

    def __call__(self, environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            visitor = self.identify(environ)
            if visitor is not None:
                space = self.space(environ) if callable(self.space) else self.space
                self.tracker.track(visitor.id, kind=visitor.kind, meta=visitor.meta, space=space)
        except Exception as e:
            self.tracker.note_failure(f"identifying a request failed ({type(e).__name__}: {e})")
        minted = environ.get(NEW_COOKIE_KEY)
        if minted:
            cookie = set_cookie_header(
                self.guest_cookie,
                minted,
                self.guest_cookie_age,
                environ.get("wsgi.url_scheme") == "https",
            )
            inner = start_response

            def start_response(status: str, headers: Any, *exc_info: Any) -> Any:
                return inner(status, list(headers) + [("Set-Cookie", cookie)], *exc_info)

        return self.app(environ, start_response)
