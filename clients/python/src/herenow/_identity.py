"""Who a request is, for the middleware: its signed-in user, or a guest
known by a cookie or by its IP address (seed 000 tracked guests by IP).

A cookie's value is never sent to herenow as it is: it may be a session
key, a credential. The guest id is a hash of it instead, stable for as
long as the cookie is.

Known by IP (the default), every visitor behind one address (an office, a
phone carrier's NAT) is one guest. With ``set_guest_cookie`` on, the
middleware gives a guest without one a first-party cookie of its own
(:func:`new_guest_cookie`: random, ``HttpOnly``, ``SameSite=Lax``) and
knows the guest by it, from that first request on.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Callable, Iterable, Mapping, Optional, Tuple

from .models import Heartbeat, Kind

#: The cookie ``set_guest_cookie`` sets when no ``guest_cookie`` is named.
GUEST_COOKIE = "herenow_guest"
#: How long that cookie lasts by default: a year, in seconds.
GUEST_COOKIE_AGE = 365 * 24 * 3600
#: Where a middleware notes a cookie it minted for this request (the WSGI
#: environ, the ASGI scope).
NEW_COOKIE_KEY = "herenow.new_guest_cookie"

#: The middleware's ``identify`` hooks answer this: who to heartbeat
#: (``id``, ``kind`` and optional ``meta``), or ``None`` for nobody.
Visitor = Heartbeat


def guest_from_cookie(value: str) -> str:
    """The guest id for a cookie value: ``c-`` and 32 hex digits of its
    SHA-256, so the cookie itself never leaves the site."""
    return "c-" + hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def parse_cookies(header: str) -> Mapping[str, str]:
    """A ``Cookie`` header's pairs (the first of a repeated name wins)."""
    out = {}
    for part in header.split(";"):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name or name in out:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        out[name] = value
    return out


def forwarded_ip(header: Optional[str]) -> Optional[str]:
    """The client's address from ``X-Forwarded-For``: its first entry."""
    if not header:
        return None
    first = header.split(",")[0].strip()
    return first or None


def new_guest_cookie() -> str:
    """A new guest cookie's value: 128 random bits (``secrets``), URL-safe."""
    return secrets.token_urlsafe(16)


def set_cookie_header(name: str, value: str, max_age: int, secure: bool) -> str:
    """The ``Set-Cookie`` value of a guest cookie: ``Path=/``, ``Max-Age``,
    ``HttpOnly``, ``SameSite=Lax`` and, over HTTPS, ``Secure``."""
    header = f"{name}={value}; Max-Age={int(max_age)}; Path=/; HttpOnly; SameSite=Lax"
    return header + "; Secure" if secure else header


def guest(
    cookies: Mapping[str, str],
    guest_cookie: Optional[str],
    ip: Optional[str],
    new_cookie: Optional[Callable[[str], None]] = None,
) -> Optional[Visitor]:
    """A guest by ``guest_cookie`` when the request has it, else by IP;
    or, given ``new_cookie``, by a new cookie value handed to it (for the
    middleware to set)."""
    if guest_cookie:
        value = cookies.get(guest_cookie)
        if value:
            return Visitor(guest_from_cookie(value), Kind.GUEST)
        if new_cookie is not None:
            value = new_guest_cookie()
            new_cookie(value)
            return Visitor(guest_from_cookie(value), Kind.GUEST)
    if ip:
        return Visitor(ip, Kind.GUEST)
    return None


def header(headers: Iterable[Tuple[bytes, bytes]], name: bytes) -> Optional[str]:
    """An ASGI header's value (latin-1, as HTTP headers are); repeated
    headers are joined with ``, `` (cookies with ``; ``)."""
    values = [v.decode("latin-1") for k, v in headers if k.lower() == name]
    if not values:
        return None
    return ("; " if name == b"cookie" else ", ").join(values)
