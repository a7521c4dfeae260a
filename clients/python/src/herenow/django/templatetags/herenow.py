"""``{% load herenow %}``: who's online and last seen in templates, as
seed 000 showed its who's-online box with an inclusion tag.

- ``{% whos_online %}`` renders ``herenow/whos_online.html`` (override it
  in your templates): the counts and the members online, by name.
- ``{% herenow_online as members %}`` (``space=``, ``limit=``, ``kind=``,
  ``window=``): a list of :class:`~herenow.Member`.
- ``{% herenow_count as counts %}``: :class:`~herenow.Count` or ``None``.
- ``{% herenow_last_seen user as seen %}`` (a user object or an id):
  :class:`~herenow.SeenAnywhere` or ``None``; ``seen.status.value`` is
  ``online`` / ``away`` / ``offline``, ``seen.last_seen`` a datetime for
  ``|timesince``.
- ``{{ member|herenow_name }}``: a member's ``meta.name``, else its id.

Every tag answers from a short cache and shows nothing rather than fail
when herenow is down.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from django import template

from ...models import Count, Member, SeenAnywhere
from .. import presence

register = template.Library()


@register.simple_tag
def herenow_online(
    space: Optional[str] = None,
    limit: int = 50,
    kind: Optional[str] = None,
    window: Optional[str] = None,
) -> List[Member]:
    """Who's online, most recent first."""
    return presence.online(space, int(limit), kind, window)


@register.simple_tag
def herenow_count(space: Optional[str] = None, window: Optional[str] = None) -> Optional[Count]:
    """How many users and guests are online."""
    return presence.count(space, window)


@register.simple_tag
def herenow_last_seen(user: Any) -> Optional[SeenAnywhere]:
    """A user's status and last seen anywhere."""
    return presence.last_seen(user)


@register.filter
def herenow_name(member: Any) -> str:
    """A member's display name: ``meta["name"]``, else its id."""
    meta = getattr(member, "meta", None) or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    return str(name) if name else str(getattr(member, "id", member))


@register.inclusion_tag("herenow/whos_online.html")
def whos_online(space: Optional[str] = None, limit: int = 50) -> Dict[str, Any]:
    """The who's-online box."""
    return {
        "members": presence.online(space, int(limit)),
        "count": presence.count(space),
    }
