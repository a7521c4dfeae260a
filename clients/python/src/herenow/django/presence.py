"""The queries behind the template tags and the context processor.

Each answers from a short-lived per-process cache (``CACHE_SECONDS``) and,
when herenow cannot answer, :class:`~herenow.Unknown`: falsy, empty,
rendered as nothing (or as ``UNKNOWN_TEXT``, or the ``unknown`` given
here). Behind the process's circuit breaker: after a failure or timeout,
every query answers "unknown" at once for ``BACKOFF`` seconds (30), then
one query probes; the log says so once per opening. A "who's online" box
never breaks or slows down a page.
"""

from __future__ import annotations

from typing import Any, List, Optional, Union

from ..breaker import Unknown
from ..models import Count, Member, SeenAnywhere
from . import conf

__all__ = ["online", "count", "last_seen", "user_id_of", "Presence", "Unknown"]


def user_id_of(user: Any) -> Optional[str]:
    """The herenow id of a Django user object, or of an id given as such."""
    if user is None or user == "":
        return None
    if hasattr(user, "pk"):
        hook = conf.hook("USER_ID")
        return str(hook(user)) if hook else str(user.pk)
    return str(user)


def online(
    space: Optional[str] = None,
    limit: int = 50,
    kind: Optional[str] = None,
    window: Optional[str] = None,
    unknown: Optional[str] = None,
) -> Union[List[Member], Unknown]:
    """Who's online in ``space`` (default ``HERENOW["SPACE"]``), most
    recent first; :class:`~herenow.Unknown` when herenow cannot answer."""
    s = space or conf.setting("SPACE")
    return conf.cached(
        ("online", s, limit, kind, window),
        lambda: conf.get_client().online(s, limit=limit, kind=kind, window=window).members,
        unknown,
    )


def count(
    space: Optional[str] = None, window: Optional[str] = None, unknown: Optional[str] = None
) -> Union[Count, Unknown]:
    """How many users and guests are online; :class:`~herenow.Unknown`
    when herenow cannot answer."""
    s = space or conf.setting("SPACE")
    return conf.cached(
        ("count", s, window), lambda: conf.get_client().count(s, window=window), unknown
    )


def last_seen(user: Any, unknown: Optional[str] = None) -> Union[SeenAnywhere, Unknown, None]:
    """A user's status and last seen anywhere (a user object or an id);
    ``None`` for no user, :class:`~herenow.Unknown` when herenow cannot
    answer."""
    uid = user_id_of(user)
    if uid is None:
        return None
    return conf.cached(("user", uid), lambda: conf.get_client().user(uid), unknown)


_NOT_ASKED = object()


class Presence:
    """Lazy presence for templates: ``{{ herenow.online }}``,
    ``{{ herenow.count.users }}``; each asked at most once per render,
    and :class:`~herenow.Unknown` when herenow cannot answer (test it with
    ``{% if herenow.count %}``)."""

    def __init__(self, space: Optional[str] = None) -> None:
        self.space = space
        self._online: Any = _NOT_ASKED
        self._count: Any = _NOT_ASKED

    @property
    def online(self) -> Union[List[Member], Unknown]:
        """Who's online."""
        if self._online is _NOT_ASKED:
            self._online = online(self.space)
        return self._online  # type: ignore[no-any-return]

    @property
    def count(self) -> Union[Count, Unknown]:
        """The online counts."""
        if self._count is _NOT_ASKED:
            self._count = count(self.space)
        return self._count  # type: ignore[no-any-return]

    def last_seen(self, user: Any) -> Union[SeenAnywhere, Unknown, None]:
        """A user's last seen anywhere."""
        return last_seen(user)
