"""The queries behind the template tags and the context processor.

Each answers from a short-lived per-process cache (``CACHE_SECONDS``) and,
when herenow cannot answer, a harmless fallback (an empty list, ``None``)
after logging once a minute: a "who's online" box never breaks a page.
"""

from __future__ import annotations

from typing import Any, List, Optional

from ..models import Count, Member, SeenAnywhere
from . import conf

__all__ = ["online", "count", "last_seen", "user_id_of", "Presence"]


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
) -> List[Member]:
    """Who's online in ``space`` (default ``HERENOW["SPACE"]``), most
    recent first; ``[]`` when herenow cannot answer."""
    s = space or conf.setting("SPACE")
    return conf.cached(
        ("online", s, limit, kind, window),
        lambda: conf.get_client().online(s, limit=limit, kind=kind, window=window).members,
        [],
    )


def count(space: Optional[str] = None, window: Optional[str] = None) -> Optional[Count]:
    """How many users and guests are online; ``None`` when herenow cannot
    answer."""
    s = space or conf.setting("SPACE")
    return conf.cached(
        ("count", s, window), lambda: conf.get_client().count(s, window=window), None
    )


def last_seen(user: Any) -> Optional[SeenAnywhere]:
    """A user's status and last seen anywhere (a user object or an id);
    ``None`` when herenow cannot answer."""
    uid = user_id_of(user)
    if uid is None:
        return None
    return conf.cached(("user", uid), lambda: conf.get_client().user(uid), None)


class Presence:
    """Lazy presence for templates: ``{{ herenow.online }}``,
    ``{{ herenow.count.users }}``; each asked at most once per render."""

    def __init__(self, space: Optional[str] = None) -> None:
        self.space = space
        self._online: Optional[List[Member]] = None
        self._count: Optional[Count] = None
        self._count_asked = False

    @property
    def online(self) -> List[Member]:
        """Who's online."""
        if self._online is None:
            self._online = online(self.space)
        return self._online

    @property
    def count(self) -> Optional[Count]:
        """The online counts."""
        if not self._count_asked:
            self._count = count(self.space)
            self._count_asked = True
        return self._count

    def last_seen(self, user: Any) -> Optional[SeenAnywhere]:
        """A user's last seen anywhere."""
        return last_seen(user)
