"""ASGI middleware: heartbeat every HTTP request's user (or guest),
debounced and in the background (see :mod:`herenow.tracker`).

::

    from herenow import PresenceTracker
    from herenow.asgi import HerenowASGIMiddleware

    tracker = PresenceTracker(base_url="http://127.0.0.1:7700", space="site")
    app = HerenowASGIMiddleware(app, tracker)

The user is ``scope["user"]`` when an authentication middleware outside
this one put an authenticated user there (Starlette's
``AuthenticationMiddleware``: its ``identity``, else its
``display_name``); otherwise a guest by ``guest_cookie`` (hashed) or by
the client's IP (``set_guest_cookie=True``: a random first-party cookie it
sets, as :mod:`herenow.wsgi` does). Pass ``identify(scope) -> Visitor | None`` to decide
yourself. Tracking does no I/O on the event loop (a dict look-up and a
queue append); the batches go out from the tracker's thread. WebSocket and
lifespan scopes pass through untouched.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, MutableMapping, Optional

from ._identity import (
    GUEST_COOKIE,
    GUEST_COOKIE_AGE,
    NEW_COOKIE_KEY,
    Visitor,
    forwarded_ip,
    guest,
    header,
    parse_cookies,
    set_cookie_header,
)
from .models import Kind
from .tracker import PresenceTracker

__all__ = ["HerenowASGIMiddleware", "Visitor", "default_identify"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Dict[str, Any]]]
Send = Callable[[Dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _user_id(user: Any) -> Optional[str]:
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    try:
        ident = user.identity  # Starlette's BaseUser raises when not defined
    except (AttributeError, NotImplementedError):
        ident = None
    if not ident:
        ident = getattr(user, "display_name", None)
    return str(ident) if ident else None


def default_identify(
    scope: Scope,
    *,
    track_guests: bool = True,
    guest_cookie: Optional[str] = None,
    trust_forwarded: bool = False,
    set_guest_cookie: bool = False,
) -> Optional[Visitor]:
    """An authenticated ``scope["user"]``; otherwise a guest by cookie or IP
    (or, with ``set_guest_cookie``, by a new cookie value noted in
    ``scope["herenow.new_guest_cookie"]`` for the middleware to set)."""
    uid = _user_id(scope.get("user"))
    if uid:
        return Visitor(uid, Kind.USER)
    if not track_guests:
        return None
    headers = scope.get("headers") or ()
    ip = forwarded_ip(header(headers, b"x-forwarded-for")) if trust_forwarded else None
    client = scope.get("client")
    ip = ip or (client[0] if client else None)
    if set_guest_cookie and not guest_cookie:
        guest_cookie = GUEST_COOKIE
    cookies = parse_cookies(header(headers, b"cookie") or "") if guest_cookie else {}

    def note(value: str) -> None:
        scope[NEW_COOKIE_KEY] = value

    return guest(cookies, guest_cookie, ip, note if set_guest_cookie else None)


class HerenowASGIMiddleware:
    """Wraps an ASGI app; the options are :class:`~herenow.wsgi.HerenowWSGIMiddleware`'s,
    with ``identify`` and ``space`` taking the ASGI scope."""

    def __init__(
        self,
        app: ASGIApp,
        tracker: PresenceTracker,
        *,
        identify: Optional[Callable[[Scope], Optional[Visitor]]] = None,
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

            def identify(scope: Scope) -> Optional[Visitor]:
                return default_identify(
                    scope,
                    track_guests=track_guests,
                    guest_cookie=guest_cookie,
                    trust_forwarded=trust_forwarded,
                    set_guest_cookie=set_guest_cookie,
                )

        self.identify = identify
        self.space = space

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http":
            try:
                visitor = self.identify(scope)
                if visitor is not None:
                    space = self.space(scope) if callable(self.space) else self.space
                    self.tracker.track(
                        visitor.id, kind=visitor.kind, meta=visitor.meta, space=space
                    )
            except Exception as e:
                self.tracker.note_failure(f"identifying a request failed ({type(e).__name__}: {e})")
            minted = scope.get(NEW_COOKIE_KEY)
            if minted:
                cookie = set_cookie_header(
                    self.guest_cookie, minted, self.guest_cookie_age, scope.get("scheme") == "https"
                ).encode("latin-1")
                inner = send

                async def send(message: Dict[str, Any]) -> None:
                    if message.get("type") == "http.response.start":
                        message = dict(message)
                        message["headers"] = list(message.get("headers") or ()) + [
                            (b"set-cookie", cookie)
                        ]
                    await inner(message)

        await self.app(scope, receive, send)
