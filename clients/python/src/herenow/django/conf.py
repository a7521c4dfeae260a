"""The ``HERENOW`` setting, and the per-process objects made from it: the
middleware's :class:`~herenow.PresenceTracker` and the template helpers'
:class:`~herenow.Client` with its small answer cache.

``settings.HERENOW`` is a dict; every key is optional:

========================  ==============================  =====================================
key                       default                         meaning
========================  ==============================  =====================================
``URL``                   ``$HERENOW_SERVER`` or          the herenow server
                          ``http://127.0.0.1:7700``
``API_KEY``               ``$HERENOW_API_KEY``            a ``write`` key (heartbeats)
``SPACE``                 ``"site"``                      the space the site's visitors are in
``INTERVAL``              ``60``                          seconds: at most one heartbeat per member
``TRACK_GUESTS``          ``True``                        heartbeat visitors not signed in
``GUEST_COOKIE``          ``None``                        a cookie naming a guest (hashed); else IP
``SET_GUEST_COOKIE``      ``False``                       give a guest without one a random,
                                                          HttpOnly, SameSite=Lax cookie
                                                          (``GUEST_COOKIE``, default
                                                          ``herenow_guest``) and know it by it
``GUEST_COOKIE_AGE``      ``31536000``                    seconds that cookie lasts (a year)
``TRUST_X_FORWARDED_FOR`` ``False``                       the guest's IP from ``X-Forwarded-For``
``USER_ID``               ``str(user.pk)``                ``user -> id`` (callable or dotted path)
``USER_META``             ``{"name": username}``          ``user -> dict | None``
``IDENTIFY``              ``None``                        ``request -> Visitor | None``, replacing
                                                          all of the above
``TIMEOUT``               ``5``                           seconds, for the heartbeat batches
``QUERY_TIMEOUT``         ``2``                           seconds, for the template helpers
``CACHE_SECONDS``         ``10``                          how long template answers are reused
``BACKOFF``               ``30``                          seconds the template helpers answer
                                                          "unknown" at once after a failure or
                                                          timeout, before one probe
``UNKNOWN_TEXT``          ``""``                          what "unknown" renders as
``CLOSE_TIMEOUT``         ``1``                           seconds closing the tracker may take
``MAX_MEMBERS``           ``100000``                      the debounce map's cap
``QUEUE_SIZE``            ``10000``                       the heartbeat queue's cap
``BATCH_SIZE``            ``1000``                        heartbeats per request
``FLUSH_INTERVAL``        ``1``                           seconds the sender gathers a batch
``WEBHOOK_SECRET``        ``$HERENOW_WEBHOOK_SECRET``     ``whsec_…`` (a list while rotating)
                                                          of the webhook view (``webhooks.py``)
========================  ==============================  =====================================
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Dict, Hashable, Optional, Tuple, TypeVar, Union, cast

from django.conf import settings
from django.utils.module_loading import import_string

from ..breaker import CircuitBreaker, Unknown, trips
from ..client import Client
from ..tracker import PresenceTracker, _FailureLog

__all__ = [
    "setting",
    "get_tracker",
    "set_tracker",
    "get_client",
    "get_breaker",
    "unknown",
    "cached",
    "reset",
]

T = TypeVar("T")

log = logging.getLogger("herenow.django")

DEFAULTS: Dict[str, Any] = {
    "URL": None,
    "API_KEY": None,
    "SPACE": "site",
    "INTERVAL": 60.0,
    "TRACK_GUESTS": True,
    "GUEST_COOKIE": None,
    "SET_GUEST_COOKIE": False,
    "GUEST_COOKIE_AGE": 365 * 24 * 3600,
    "TRUST_X_FORWARDED_FOR": False,
    "USER_ID": None,
    "USER_META": None,
    "IDENTIFY": None,
    "TIMEOUT": 5.0,
    "QUERY_TIMEOUT": 2.0,
    "CACHE_SECONDS": 10.0,
    "BACKOFF": 30.0,
    "UNKNOWN_TEXT": "",
    "CLOSE_TIMEOUT": 1.0,
    "MAX_MEMBERS": 100_000,
    "QUEUE_SIZE": 10_000,
    "BATCH_SIZE": 1_000,
    "FLUSH_INTERVAL": 1.0,
    "WEBHOOK_SECRET": None,
}

#: Template answers kept at once.
CACHE_ENTRIES = 256


def setting(name: str) -> Any:
    """``settings.HERENOW[name]``, or its default."""
    if name not in DEFAULTS:
        raise KeyError(f"HERENOW has no setting {name!r}")
    configured = getattr(settings, "HERENOW", None) or {}
    return configured.get(name, DEFAULTS[name])


def hook(name: str) -> Optional[Callable[..., Any]]:
    """A setting that is a callable or the dotted path of one."""
    value = setting(name)
    if value is None:
        return None
    if callable(value):
        return cast(Callable[..., Any], value)
    return cast(Callable[..., Any], import_string(value))


_lock = threading.Lock()
_tracker: Optional[PresenceTracker] = None
_tracker_owned = False  # made here from the settings, so closed here
_client: Optional[Client] = None
_breaker: Optional[CircuitBreaker] = None
_cache: "OrderedDict[Hashable, Tuple[float, Any]]" = OrderedDict()
_query_log = _FailureLog(log, 60.0, time.monotonic)


def get_tracker() -> PresenceTracker:
    """The process's tracker, made from the settings on first use."""
    global _tracker, _tracker_owned
    with _lock:
        if _tracker is None:
            _tracker_owned = True
            _tracker = PresenceTracker(
                base_url=setting("URL"),
                api_key=setting("API_KEY"),
                space=setting("SPACE"),
                interval=float(setting("INTERVAL")),
                timeout=float(setting("TIMEOUT")),
                max_members=int(setting("MAX_MEMBERS")),
                queue_size=int(setting("QUEUE_SIZE")),
                batch_size=int(setting("BATCH_SIZE")),
                flush_interval=float(setting("FLUSH_INTERVAL")),
                close_timeout=float(setting("CLOSE_TIMEOUT")),
            )
        return _tracker


def set_tracker(tracker: Optional[PresenceTracker]) -> Optional[PresenceTracker]:
    """Uses ``tracker`` from now on (a custom one, or a test's), or with
    ``None`` one made from the settings on next use. The caller owns
    ``tracker`` (and closes it); answers the previous tracker if it was one
    the caller gave, else closes it and answers ``None``."""
    global _tracker, _tracker_owned
    with _lock:
        previous, owned = _tracker, _tracker_owned
        _tracker, _tracker_owned = tracker, False
    if previous is not None and owned:
        previous.close()
        return None
    return previous


def get_client() -> Client:
    """The template helpers' client: short timeouts, no retries (a page
    render must not wait long for a "who's online" box)."""
    global _client
    with _lock:
        if _client is None:
            t = float(setting("QUERY_TIMEOUT"))
            _client = Client(
                setting("URL"),
                api_key=setting("API_KEY"),
                timeout=t,
                connect_timeout=min(t, 1.0),
                retries=0,
            )
        return _client


def get_breaker() -> CircuitBreaker:
    """The process's circuit breaker for the template helpers: after a
    failure or timeout they answer "unknown" at once for ``BACKOFF``
    seconds, then let one query through (see :mod:`herenow.breaker`)."""
    global _breaker
    with _lock:
        if _breaker is None:
            _breaker = CircuitBreaker(float(setting("BACKOFF")), logger=log)
        return _breaker


def unknown(text: Optional[str] = None) -> Unknown:
    """"Unknown", rendered as ``text`` (default ``UNKNOWN_TEXT``)."""
    return Unknown(str(setting("UNKNOWN_TEXT")) if text is None else str(text))


def cached(key: Hashable, compute: Callable[[], T], text: Optional[str] = None) -> Union[T, Unknown]:
    """``compute()``, reused for ``CACHE_SECONDS``; when herenow cannot
    answer, :func:`unknown` (never an exception into the page). Behind the
    process's breaker: after a failure or timeout, "unknown" at once for
    ``BACKOFF`` seconds, logged once per opening."""
    ttl = float(setting("CACHE_SECONDS"))
    now = time.monotonic()
    if ttl > 0:
        with _lock:
            hit = _cache.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]  # type: ignore[no-any-return]
    breaker = get_breaker()
    if not breaker.allow():
        return unknown(text)
    try:
        value = compute()
    except Exception as e:
        if not breaker.failed(e) and not trips(e):  # a 4xx: this query's own
            _query_log.failed(f"a presence query failed ({type(e).__name__}: {e})", 0)
        return unknown(text)
    breaker.succeeded()
    if ttl > 0:
        with _lock:
            _cache[key] = (now + ttl, value)
            _cache.move_to_end(key)
            while len(_cache) > CACHE_ENTRIES:
                _cache.popitem(last=False)
    return value


def reset() -> None:
    """Forgets the tracker (closing it if it was made from the settings),
    the client, the cache, the breaker and the failure log: the next use makes them
    again from the settings."""
    global _client, _query_log, _breaker
    set_tracker(None)
    with _lock:
        client, _client = _client, None
        _breaker = None
        _cache.clear()
        _query_log = _FailureLog(log, 60.0, time.monotonic)
    if client is not None:
        client.close()


def on_setting_changed(*, setting: str, **_: Any) -> None:
    """``override_settings(HERENOW=…)`` takes effect at once."""
    if setting == "HERENOW":
        reset()
