"""``"herenow.django.context_processors.presence"`` puts ``herenow`` in
every template's context: ``{{ herenow.count.users }}``, ``{% for m in
herenow.online %}``. Nothing is asked of herenow unless a template uses it."""

from __future__ import annotations

from typing import Any, Dict

from .presence import Presence


def presence(request: Any) -> Dict[str, Any]:
    """The ``herenow`` context variable, a lazy :class:`Presence`."""
    return {"herenow": Presence()}
