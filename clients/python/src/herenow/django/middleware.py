"""Django middleware: heartbeat the request's user (or guest), debounced
and in the background.

Add it after ``AuthenticationMiddleware``::

    MIDDLEWARE = [
        ...,
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "herenow.django.middleware.HerenowMiddleware",
    ]

It works in sync and async stacks. The user is tracked after the view
answers (so a request that logs in counts as the user), as
``HERENOW["USER_ID"](user)`` (default ``str(user.pk)``) with
``HERENOW["USER_META"](user)`` as metadata (default its username as
``name``, which the template tags show); a visitor not signed in is a
guest by ``GUEST_COOKIE`` (hashed) or IP; with ``SET_GUEST_COOKIE``, a
guest without the cookie is given one (random, ``HttpOnly``,
``SameSite=Lax``, ``Secure`` over HTTPS; named ``GUEST_COOKIE``, default
``herenow_guest``) and known by it from that request on. Nothing here does network I/O
on the request path, and nothing here raises into the view: a failure is
logged once per interval.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, Optional

from .._identity import GUEST_COOKIE, Visitor, forwarded_ip, guest
from ..models import Kind
from . import conf

try:  # asgiref >= 3.5.2 (Django >= 4.1)
    from asgiref.sync import iscoroutinefunction, markcoroutinefunction
except ImportError:  # pragma: no cover - Django 3.2 / 4.0
    iscoroutinefunction = asyncio.iscoroutinefunction  # type: ignore[assignment]

    def markcoroutinefunction(func: Any) -> Any:
        func._is_coroutine = asyncio.coroutines._is_coroutine  # type: ignore[attr-defined]
        return func


__all__ = ["HerenowMiddleware", "identify"]


def _user_id(user: Any) -> str:
    hook = conf.hook("USER_ID")
    return str(hook(user)) if hook else str(user.pk)


def _user_meta(user: Any) -> Optional[Dict[str, Any]]:
    hook = conf.hook("USER_META")
    if hook:
        meta = hook(user)
        return dict(meta) if meta is not None else None
    return {"name": user.get_username()}


def identify(request: Any, user: Any) -> Optional[Visitor]:
    """Who ``request`` is: its signed-in ``user``, else a guest."""
    custom = conf.hook("IDENTIFY")
    if custom is not None:
        return custom(request)  # type: ignore[no-any-return]
    if user is not None and getattr(user, "is_authenticated", False):
        return Visitor(_user_id(user), Kind.USER, _user_meta(user))
    if not conf.setting("TRACK_GUESTS"):
        return None
    meta = request.META
    ip = (
        forwarded_ip(meta.get("HTTP_X_FORWARDED_FOR"))
        if conf.setting("TRUST_X_FORWARDED_FOR")
        else None
    )
    ip = ip or meta.get("REMOTE_ADDR") or None
    name = conf.setting("GUEST_COOKIE")
    if conf.setting("SET_GUEST_COOKIE"):

        def note(value: str) -> None:
            request._herenow_new_guest_cookie = value

        return guest(request.COOKIES, name or GUEST_COOKIE, ip, note)
    return guest(request.COOKIES, name, ip)


def _set_cookie(request: Any, response: Any) -> None:
    value = getattr(request, "_herenow_new_guest_cookie", None)
    if value is None:
        return
    try:
        response.set_cookie(
            conf.setting("GUEST_COOKIE") or GUEST_COOKIE,
            value,
            max_age=int(conf.setting("GUEST_COOKIE_AGE")),
            path="/",
            secure=request.is_secure(),
            httponly=True,
            samesite="Lax",
        )
    except Exception as e:  # never into the view
        conf.log.debug("herenow: could not set the guest cookie: %s", e)


def _track(request: Any, user: Any) -> None:
    try:
        tracker = conf.get_tracker()
    except Exception as e:  # a bad setting: say so, keep serving
        conf.log.error("herenow: cannot make the presence tracker: %s", e)
        return
    try:
        visitor = identify(request, user)
        if visitor is not None:
            tracker.track(visitor.id, kind=visitor.kind, meta=visitor.meta)
    except Exception as e:
        tracker.note_failure(f"identifying a request failed ({type(e).__name__}: {e})")


class HerenowMiddleware:
    """See the module's documentation."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self._async:
            return self.__acall__(request)
        response = self.get_response(request)
        _track(request, getattr(request, "user", None))
        _set_cookie(request, response)
        return response

    async def __acall__(self, request: Any) -> Any:
        response = await self.get_response(request)
        user = None
        try:
            if hasattr(request, "auser"):  # Django >= 5.0
                user = await request.auser()
            elif hasattr(request, "user"):
                from asgiref.sync import sync_to_async

                def load() -> Any:
                    # The lazy user reads the session and the database:
                    # resolve it in a thread, not on the event loop.
                    u = request.user
                    u.is_authenticated  # noqa: B018 - forces the lazy object
                    return u

                user = await sync_to_async(load)()
        except Exception as e:
            conf.log.debug("herenow: no user for this request: %s", e)
        _track(request, user)
        _set_cookie(request, response)
        return response
