"""``{% load herenow %}``: who's online and last seen in templates, as
seed 000 showed its who's-online box with an inclusion tag.

- ``{% whos_online %}`` renders ``herenow/whos_online.html`` (override it
  in your templates): the counts and the members online, by name.
- ``{% herenow_online as members %}`` (``space=``, ``limit=``, ``kind=``,
  ``window=``): a list of :class:`~herenow.Member`.
- ``{% herenow_count as counts %}``: :class:`~herenow.Count`.
- ``{% herenow_last_seen user as seen %}`` (a user object or an id):
  :class:`~herenow.SeenAnywhere` (``None`` for no user);
  ``seen.status.value`` is ``online`` / ``away`` / ``offline``,
  ``seen.last_seen`` a datetime for ``|timesince`` (``None`` if never seen).
- ``{% herenow_seen user %}``: the same as a phrase, ``online``, ``away``,
  ``offline, last seen 3 hours ago`` or ``offline``.
- ``{{ member|herenow_name }}``: a member's ``meta.name``, else its id.

When herenow cannot answer (down, hanging: after one failure or timeout
the process's breaker answers at once for ``BACKOFF`` seconds), each tag
answers :class:`~herenow.Unknown`: falsy, empty, and rendered as nothing,
or as the text of its ``unknown="…"`` argument (default
``HERENOW["UNKNOWN_TEXT"]``). The box then shows that text, never "Nobody
is online"; guard a phrase of your own with ``{% if seen %}``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from django import template
from django.utils.timesince import timesince

from ...breaker import Unknown
from ...models import Count, Member, SeenAnywhere, Status
from .. import presence
from ..conf import unknown as _unknown

register = template.Library()


@register.simple_tag
def herenow_online(
    space: Optional[str] = None,
    limit: int = 50,
    kind: Optional[str] = None,
    window: Optional[str] = None,
    unknown: Optional[str] = None,
) -> Union[List[Member], Unknown]:
    """Who's online, most recent first."""
    return presence.online(space, int(limit), kind, window, unknown)


@register.simple_tag
def herenow_count(
    space: Optional[str] = None, window: Optional[str] = None, unknown: Optional[str] = None
) -> Union[Count, Unknown]:
    """How many users and guests are online."""
    return presence.count(space, window, unknown)


@register.simple_tag
def herenow_last_seen(user: Any, unknown: Optional[str] = None) -> Union[SeenAnywhere, Unknown, None]:
    """A user's status and last seen anywhere."""
    return presence.last_seen(user, unknown)


@register.simple_tag
def herenow_seen(user: Any, unknown: Optional[str] = None) -> str:
    """A user's status as a phrase: ``online``, ``away``, ``offline, last
    seen 3 hours ago``, or ``offline`` (never seen); the unknown text
    (default nothing) when herenow cannot answer."""
    seen = presence.last_seen(user, unknown)
    if seen is None:
        return ""
    if isinstance(seen, Unknown):
        return str(seen)
    if seen.status is not Status.OFFLINE or seen.last_seen is None:
        return str(seen.status.value)
    return f"{seen.status.value}, last seen {timesince(seen.last_seen)} ago"


@register.filter
def herenow_name(member: Any) -> str:
    """A member's display name: ``meta["name"]``, else its id."""
    meta = getattr(member, "meta", None) or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    return str(name) if name else str(getattr(member, "id", member))


@register.inclusion_tag("herenow/whos_online.html")
def whos_online(
    space: Optional[str] = None, limit: int = 50, unknown: Optional[str] = None
) -> Dict[str, Any]:
    """The who's-online box; when herenow cannot answer, only the unknown
    text (default nothing)."""
    members = presence.online(space, int(limit), unknown=unknown)
    count = presence.count(space, unknown=unknown) if not isinstance(members, Unknown) else members
    if isinstance(count, Unknown):
        return {"unknown": True, "unknown_text": str(_unknown(unknown))}
    return {"unknown": False, "members": members, "count": count}
