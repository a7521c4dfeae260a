"""WSGI middleware: heartbeat every request's user (or guest), debounced
and in the background (see :mod:`herenow.tracker`).

::

    from herenow import PresenceTracker
    from herenow.wsgi import HerenowWSGIMiddleware

    tracker = PresenceTracker(base_url="http://127.0.0.1:7700", space="site")
    app = HerenowWSGIMiddleware(app, tracker)

The user is ``REMOTE_USER`` (what the server or an auth middleware sets);
without one, a guest by ``guest_cookie`` (hashed) or by IP. Pass
``identify(environ) -> Visitor | None`` to decide yourself. The request
is handed to the app at once; a failure of herenow or of ``identify`` is
logged once per interval and never reaches the app.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

from ._identity import Visitor, forwarded_ip, guest, parse_cookies
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
) -> Optional[Visitor]:
    """``REMOTE_USER`` as a user; otherwise a guest by cookie or IP."""
    user = environ.get("REMOTE_USER")
    if user:
        return Visitor(str(user), Kind.USER)
    if not track_guests:
        return None
    ip = forwarded_ip(environ.get("HTTP_X_FORWARDED_FOR")) if trust_forwarded else None
    ip = ip or environ.get("REMOTE_ADDR") or None
    cookies = parse_cookies(environ.get("HTTP_COOKIE", "")) if guest_cookie else {}
    return guest(cookies, guest_cookie, ip)


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
    ) -> None:
        self.app = app
        self.tracker = tracker
        if identify is None:

            def identify(environ: Environ) -> Optional[Visitor]:
                return default_identify(
                    environ,
                    track_guests=track_guests,
                    guest_cookie=guest_cookie,
                    trust_forwarded=trust_forwarded,
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
        return self.app(environ, start_response)
