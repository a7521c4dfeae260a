"""Live events: the typed events of the two Server-Sent Event streams, and
the SSE decoder that reads them.

``GET /v1/spaces/{space}/events`` sends a :class:`Snapshot`, then one
:class:`PresenceEvent` per change (``join``, ``away``, ``back``, ``leave``,
``update``, ``connect``, ``disconnect``); a reader that fell behind gets
:class:`Lagged` then a fresh :class:`Snapshot` with ``resync=True``.

``POST /v1/watch`` sends :class:`WatchingPage` pages, then a
:class:`StatusChange` whenever a watched user goes online, away, back or
offline, :class:`Unwatched` when followed friends leave the set, and
:class:`StreamError` before the server ends a stream whose store failed.

Both streams are read through :func:`parse_event`, which is public on
purpose: it is the extension point for webhooks (not in the server yet,
see the README), whose bodies will be these same event objects.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from .errors import ProtocolError
from .models import (
    Kind,
    Member,
    SpaceConfig,
    Status,
    _enum,
    _get,
    _list,
    _ms_to_datetime,
    _obj,
    _opt,
)

__all__ = [
    "Snapshot",
    "PresenceEvent",
    "Lagged",
    "WatchedUser",
    "WatchingPage",
    "StatusChange",
    "Unwatched",
    "StreamError",
    "UnknownEvent",
    "Event",
    "SpaceEvent",
    "WatchEvent",
    "PRESENCE_EVENT_TYPES",
    "parse_event",
    "ServerSentEvent",
    "SSEDecoder",
]

#: The ``type`` of a :class:`PresenceEvent`.
PRESENCE_EVENT_TYPES = frozenset(
    {"join", "away", "back", "leave", "update", "connect", "disconnect"}
)


@dataclass(frozen=True)
class Snapshot:
    """The members present in a space: a stream's first event, and after
    :class:`Lagged` or a reconnect, a fresh picture (``resync=True``) that
    replaces everything the reader knew of the space."""

    space: str
    members: List[Member]
    #: Present members beyond the snapshot's limit of 10,000.
    omitted: int
    config: SpaceConfig
    resync: bool = False


@dataclass(frozen=True)
class PresenceEvent:
    """A change in a space: ``type`` is one of :data:`PRESENCE_EVENT_TYPES`."""

    type: str
    space: str
    id: str
    kind: Kind
    status: Status
    last_seen_ms: Optional[int]
    meta: Optional[Dict[str, Any]] = None
    #: The WebSocket connection that caused it, if one did.
    conn: Optional[str] = None
    #: For ``leave``: ``explicit``, ``timeout`` or ``expired``.
    reason: Optional[str] = None

    @property
    def member(self) -> Member:
        """The member as it is after this event."""
        return Member(self.id, self.kind, self.status, self.last_seen_ms, self.meta)

    @property
    def last_seen(self) -> Optional[_dt.datetime]:
        """:attr:`last_seen_ms` as an aware UTC datetime (or ``None``)."""
        return _ms_to_datetime(self.last_seen_ms)


@dataclass(frozen=True)
class Lagged:
    """The reader fell behind and ``missed`` events; a ``Snapshot`` with
    ``resync=True`` follows."""

    missed: int


@dataclass(frozen=True)
class WatchedUser:
    """A watched user's state."""

    id: str
    status: Status
    last_seen_ms: Optional[int]
    #: When watching anywhere: the space of :attr:`last_seen_ms`.
    space: Optional[str] = None

    @property
    def last_seen(self) -> Optional[_dt.datetime]:
        """:attr:`last_seen_ms` as an aware UTC datetime (or ``None``)."""
        return _ms_to_datetime(self.last_seen_ms)

    @classmethod
    def from_json(cls, data: Any) -> "WatchedUser":
        d = _obj(data, "watched user")
        return cls(
            id=_get(d, "id", str, "watched user"),
            status=_enum(d, "status", Status, "watched user"),
            last_seen_ms=_opt(d, "last_seen_ms", int, "watched user"),
            space=_opt(d, "space", str, "watched user"),
        )


@dataclass(frozen=True)
class WatchingPage:
    """A page of watched users' states. With ``resync=True`` the answer's
    pages replace everything watched; apply them once ``last`` is in."""

    space: Optional[str]
    users: List[WatchedUser]
    last: bool
    resync: bool


@dataclass(frozen=True)
class StatusChange(WatchedUser):
    """A watched user went online, away, back or offline."""


@dataclass(frozen=True)
class Unwatched:
    """Users no longer watched: they left the followed friend set."""

    users: List[str]


@dataclass(frozen=True)
class StreamError:
    """The server's store failed mid-stream; the server ends the stream
    after this, and the client's stream reconnects for a fresh picture."""

    code: str
    detail: str


@dataclass(frozen=True)
class UnknownEvent:
    """An event this client does not know (from a newer server)."""

    event: str
    data: str


SpaceEvent = Union[Snapshot, PresenceEvent, Lagged, UnknownEvent]
"""What :meth:`herenow.Client.events` yields."""

WatchEvent = Union[WatchingPage, StatusChange, Unwatched, StreamError, UnknownEvent]
"""What :meth:`herenow.Client.watch` yields."""

Event = Union[
    Snapshot,
    PresenceEvent,
    Lagged,
    WatchingPage,
    StatusChange,
    Unwatched,
    StreamError,
    UnknownEvent,
]


def parse_event(event: str, data: str) -> Event:
    """The typed event for an SSE event name and its data (JSON text).

    An unknown event name gives :class:`UnknownEvent`; a known one whose
    data does not have the documented shape raises
    :class:`~herenow.errors.ProtocolError`.
    """
    known = event in PRESENCE_EVENT_TYPES or event in (
        "snapshot",
        "lagged",
        "watching",
        "status",
        "unwatched",
        "error",
    )
    if not known:
        return UnknownEvent(event, data)
    try:
        payload = json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"the {event!r} event's data is not JSON: {e}") from None
    d = _obj(payload, f"{event} event")
    w = f"{event} event"
    if event == "snapshot":
        return Snapshot(
            space=_get(d, "space", str, w),
            members=[Member.from_json(m) for m in _list(d, "members", w)],
            omitted=_get(d, "omitted", int, w),
            config=SpaceConfig.from_json(_get(d, "config", dict, w)),
            resync=bool(_opt(d, "resync", bool, w)),
        )
    if event in PRESENCE_EVENT_TYPES:
        return PresenceEvent(
            type=event,
            space=_get(d, "space", str, w),
            id=_get(d, "id", str, w),
            kind=_enum(d, "kind", Kind, w),
            status=_enum(d, "status", Status, w),
            last_seen_ms=_opt(d, "last_seen_ms", int, w),
            meta=_opt(d, "meta", dict, w),
            conn=_opt(d, "conn", str, w),
            reason=_opt(d, "reason", str, w),
        )
    if event == "lagged":
        return Lagged(_get(d, "missed", int, w))
    if event == "watching":
        return WatchingPage(
            space=_opt(d, "space", str, w),
            users=[WatchedUser.from_json(u) for u in _list(d, "users", w)],
            last=_get(d, "last", bool, w),
            resync=_get(d, "resync", bool, w),
        )
    if event == "status":
        user = WatchedUser.from_json(d)
        return StatusChange(user.id, user.status, user.last_seen_ms, user.space)
    if event == "unwatched":
        users = _list(d, "users", w)
        if not all(isinstance(u, str) for u in users):
            raise ProtocolError("unwatched event: 'users' holds a non-string")
        return Unwatched(users)
    # event == "error"
    return StreamError(_get(d, "code", str, w), str(d.get("detail", "")))


# --- the wire format -------------------------------------------------------


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched SSE event, before typing."""

    event: str
    data: str
    #: The last ``id:`` field seen on this stream (sent back as
    #: ``Last-Event-ID`` on reconnect), if any.
    id: Optional[str] = None
    #: A ``retry:`` field: the server's reconnection delay in ms.
    retry: Optional[int] = None


@dataclass
class SSEDecoder:
    """An incremental ``text/event-stream`` decoder (the WHATWG algorithm).

    Feed it text as it arrives with :meth:`feed`; it returns the events
    completed by that text. Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``,
    split anywhere across chunks. Bounded: an event (its data plus the line
    being read) larger than ``max_event_chars`` raises
    :class:`~herenow.errors.ProtocolError` instead of growing without end.
    """

    #: A snapshot holds up to 10,000 members of up to ~1.3 KiB each.
    max_event_chars: int = 32 * 1024 * 1024
    _line: List[str] = field(default_factory=list, init=False, repr=False)
    _line_len: int = field(default=0, init=False, repr=False)
    _data: List[str] = field(default_factory=list, init=False, repr=False)
    _data_len: int = field(default=0, init=False, repr=False)
    _event: str = field(default="", init=False, repr=False)
    _last_id: Optional[str] = field(default=None, init=False, repr=False)
    _retry: Optional[int] = field(default=None, init=False, repr=False)
    _pending_cr: bool = field(default=False, init=False, repr=False)

    @property
    def last_event_id(self) -> Optional[str]:
        """The last ``id:`` seen (the stream's resume point), if any."""
        return self._last_id

    def feed(self, text: str) -> List[ServerSentEvent]:
        """Decodes ``text``; the events it completes."""
        out: List[ServerSentEvent] = []
        start = 0
        n = len(text)
        if self._pending_cr and n and text[0] == "\n":
            start = 1  # the \n of a \r\n split across chunks
        self._pending_cr = False
        i = start
        while i < n:
            c = text[i]
            if c == "\n" or c == "\r":
                self._append(text[start:i])
                self._line_done(out)
                if c == "\r":
                    if i + 1 < n:
                        if text[i + 1] == "\n":
                            i += 1
                    else:
                        self._pending_cr = True
                start = i + 1
            i += 1
        if start < n:
            self._append(text[start:n])
        return out

    def _append(self, part: str) -> None:
        if not part:
            return
        self._line.append(part)
        self._line_len += len(part)
        if self._line_len + self._data_len > self.max_event_chars:
            raise ProtocolError(f"an event stream event is over {self.max_event_chars} characters")

    def _line_done(self, out: List[ServerSentEvent]) -> None:
        line = "".join(self._line)
        self._line.clear()
        self._line_len = 0
        if not line:
            self._dispatch(out)
            return
        if line.startswith(":"):
            return  # a comment: the server's keep-alive
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._data_len += len(value) + 1
            if self._data_len > self.max_event_chars:
                raise ProtocolError(
                    f"an event stream event is over {self.max_event_chars} characters"
                )
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        # Other fields are ignored, as the specification says.

    def _dispatch(self, out: List[ServerSentEvent]) -> None:
        if not self._data:
            self._event = ""
            return
        out.append(
            ServerSentEvent(
                event=self._event or "message",
                data="\n".join(self._data),
                id=self._last_id,
                retry=self._retry,
            )
        )
        self._data.clear()
        self._data_len = 0
        self._event = ""
