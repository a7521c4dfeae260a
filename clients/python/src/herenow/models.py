"""Typed values: what the client sends and what the server answers.

Answers are frozen dataclasses built by ``from_json`` class methods that
check every field the API documents (a missing or mistyped field is a
:class:`~herenow.errors.ProtocolError`) and ignore fields they do not know,
so a newer server with more fields still works with this client.

Times are integers, milliseconds since the UNIX epoch on the server's clock
(``last_seen_ms``); each value with one also offers it as an aware
:class:`~datetime.datetime` in UTC.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, TypeVar, Union

from .errors import InvalidArgument, ProtocolError

__all__ = [
    "Kind",
    "Status",
    "WatchGrant",
    "MemberRef",
    "Heartbeat",
    "Member",
    "HeartbeatResult",
    "OnlinePage",
    "Count",
    "FriendList",
    "SpaceConfig",
    "SpaceSummary",
    "HistorySample",
    "History",
    "SeenAnywhere",
    "Erasure",
    "Token",
    "Meta",
]

#: A member's metadata: a JSON object of at most 1 KiB (checked by the server).
Meta = Mapping[str, Any]

E = TypeVar("E", bound=Enum)


class Kind(str, Enum):
    """A member is a signed-in user or an anonymous guest; a user and a
    guest with the same id are two members."""

    USER = "user"
    GUEST = "guest"


class Status(str, Enum):
    """A member's presence by its space's thresholds."""

    ONLINE = "online"
    AWAY = "away"
    OFFLINE = "offline"


class WatchGrant(str, Enum):
    """Whom a WebSocket token may watch (its ``watch`` claim)."""

    FRIENDS = "friends"
    ANY = "any"
    NONE = "none"


def _ms_to_datetime(ms: Optional[int]) -> Optional[_dt.datetime]:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)


def coerce_enum(cls: Type[E], value: Any, what: str) -> E:
    """``value`` as a member of ``cls``; :class:`InvalidArgument` otherwise."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in cls)
        raise InvalidArgument(f"{what} {value!r} is not one of {allowed}") from None


# --- reading answers -------------------------------------------------------


def _obj(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(data).__name__}")
    return data


def _get(data: Mapping[str, Any], key: str, types: Union[type, Tuple[type, ...]], what: str) -> Any:
    try:
        value = data[key]
    except KeyError:
        raise ProtocolError(f"{what}: the answer has no {key!r}") from None
    # bool is an int in Python; a count must not be a boolean.
    if not isinstance(value, types) or (isinstance(value, bool) and types in (int, (int,))):
        raise ProtocolError(f"{what}: {key!r} is {value!r}, not {types}")
    return value


def _opt(data: Mapping[str, Any], key: str, types: Union[type, Tuple[type, ...]], what: str) -> Any:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, types) or (isinstance(value, bool) and types in (int, (int,))):
        raise ProtocolError(f"{what}: {key!r} is {value!r}, not {types}")
    return value


def _enum(data: Mapping[str, Any], key: str, cls: Type[E], what: str) -> E:
    raw = _get(data, key, str, what)
    try:
        return cls(raw)
    except ValueError:
        raise ProtocolError(f"{what}: {key!r} is {raw!r}, not a known {cls.__name__}") from None


def _list(data: Mapping[str, Any], key: str, what: str) -> List[Any]:
    return list(_get(data, key, list, what))


# --- what the client sends -------------------------------------------------


@dataclass(frozen=True)
class MemberRef:
    """A member named in a request: an id and its kind (user by default)."""

    id: str
    kind: Kind = Kind.USER

    def to_json(self) -> Dict[str, Any]:
        """The request-body form."""
        return {"id": self.id, "kind": coerce_enum(Kind, self.kind, "kind").value}

    @classmethod
    def of(cls, value: Union[str, "MemberRef"]) -> "MemberRef":
        """A plain string is a user id."""
        if isinstance(value, MemberRef):
            return value
        if isinstance(value, str):
            return cls(value)
        raise InvalidArgument(f"a member is a str id or a MemberRef, not {type(value).__name__}")


@dataclass(frozen=True)
class Heartbeat:
    """One heartbeat of a batch: "this member was active".

    ``meta`` absent keeps what the member had; ``at_ms`` absent means now
    (an explicit time needs a write key and is for imports).
    """

    id: str
    kind: Kind = Kind.USER
    meta: Optional[Meta] = None
    at_ms: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        """The request-body form."""
        body: Dict[str, Any] = {"id": self.id, "kind": coerce_enum(Kind, self.kind, "kind").value}
        if self.meta is not None:
            body["meta"] = dict(self.meta)
        if self.at_ms is not None:
            body["at_ms"] = self.at_ms
        return body

    @classmethod
    def of(cls, value: Union[str, "Heartbeat"]) -> "Heartbeat":
        """A plain string is a user id."""
        if isinstance(value, Heartbeat):
            return value
        if isinstance(value, str):
            return cls(value)
        raise InvalidArgument(f"a heartbeat is a str id or a Heartbeat, not {type(value).__name__}")


# --- what the server answers -----------------------------------------------


@dataclass(frozen=True)
class Member:
    """A member's presence in a space."""

    id: str
    kind: Kind
    status: Status
    #: Last seen, ms since the UNIX epoch; ``None`` if never seen, erased or
    #: past the space's ``remember_ms``.
    last_seen_ms: Optional[int]
    meta: Optional[Dict[str, Any]] = None

    @property
    def last_seen(self) -> Optional[_dt.datetime]:
        """:attr:`last_seen_ms` as an aware UTC datetime."""
        return _ms_to_datetime(self.last_seen_ms)

    @property
    def ref(self) -> MemberRef:
        """This member as a :class:`MemberRef`."""
        return MemberRef(self.id, self.kind)

    @classmethod
    def from_json(cls, data: Any) -> "Member":
        d = _obj(data, "member")
        return cls(
            id=_get(d, "id", str, "member"),
            kind=_enum(d, "kind", Kind, "member"),
            status=_enum(d, "status", Status, "member"),
            last_seen_ms=_opt(d, "last_seen_ms", int, "member"),
            meta=_opt(d, "meta", dict, "member"),
        )


def _members(data: Any, what: str) -> List[Member]:
    return [Member.from_json(m) for m in _list(_obj(data, what), "members", what)]


@dataclass(frozen=True)
class HeartbeatResult:
    """What a heartbeat call did."""

    #: Heartbeats that moved a member's last-seen time.
    accepted: int
    #: Of those, members that became present.
    joined: int
    #: Heartbeats ignored: older than what the member had, or past retention.
    stale: int

    @classmethod
    def from_json(cls, data: Any) -> "HeartbeatResult":
        d = _obj(data, "heartbeat answer")
        w = "heartbeat answer"
        return cls(_get(d, "accepted", int, w), _get(d, "joined", int, w), _get(d, "stale", int, w))


@dataclass(frozen=True)
class OnlinePage:
    """One page of who's online."""

    members: List[Member]
    #: Pass back as ``cursor`` for the next page; ``None`` on the last page.
    next_cursor: Optional[str]
    #: The window used, in ms.
    window_ms: int
    #: The order of ``members``, ``"recent"`` or ``"id"``: the one asked for,
    #: or the store's default when none was (``"id"`` on a store that keeps no
    #: last-seen times); ``None`` from a server older than this field.
    order: Optional[str] = None

    @classmethod
    def from_json(cls, data: Any) -> "OnlinePage":
        d = _obj(data, "online page")
        return cls(
            members=_members(d, "online page"),
            next_cursor=_opt(d, "next_cursor", str, "online page"),
            window_ms=_get(d, "window_ms", int, "online page"),
            order=_opt(d, "order", str, "online page"),
        )


@dataclass(frozen=True)
class Count:
    """How many users and guests were seen within a window."""

    users: int
    guests: int
    total: int
    window_ms: int

    @classmethod
    def from_json(cls, data: Any) -> "Count":
        d = _obj(data, "count")
        return cls(*(_get(d, k, int, "count") for k in ("users", "guests", "total", "window_ms")))


@dataclass(frozen=True)
class FriendList:
    """A user's friend set."""

    user: str
    friends: List[str]

    @classmethod
    def from_json(cls, data: Any) -> "FriendList":
        d = _obj(data, "friend list")
        friends = _list(d, "friends", "friend list")
        if not all(isinstance(f, str) for f in friends):
            raise ProtocolError("friend list: 'friends' holds a non-string")
        return cls(_get(d, "user", str, "friend list"), friends)


@dataclass(frozen=True)
class SpaceConfig:
    """A space's time policy, in ms.

    The server requires ``0 < online_ms <= away_ms <= retention_ms <= 24h``
    and ``0 < window_ms <= retention_ms``. ``remember_ms``,
    ``remember_guests`` and ``grace_ms`` left ``None`` in
    :meth:`~herenow.Client.set_config` keep what the space has.
    ``grace_ms``: how long a member whose last live connection ended without
    a goodbye (a page reload, a dropped network, its server stopping) stays
    present; a connection of the same user back within it shows nobody
    anything (``0``: none, at most 300,000).
    """

    online_ms: int
    away_ms: int
    window_ms: int
    retention_ms: int
    remember_ms: Optional[int] = None
    remember_guests: Optional[bool] = None
    grace_ms: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        """The request-body form; ``None`` fields are left out."""
        body: Dict[str, Any] = {
            "online_ms": self.online_ms,
            "away_ms": self.away_ms,
            "window_ms": self.window_ms,
            "retention_ms": self.retention_ms,
        }
        if self.remember_ms is not None:
            body["remember_ms"] = self.remember_ms
        if self.remember_guests is not None:
            body["remember_guests"] = self.remember_guests
        if self.grace_ms is not None:
            body["grace_ms"] = self.grace_ms
        return body

    @classmethod
    def from_json(cls, data: Any) -> "SpaceConfig":
        d = _obj(data, "space config")
        w = "space config"
        return cls(
            online_ms=_get(d, "online_ms", int, w),
            away_ms=_get(d, "away_ms", int, w),
            window_ms=_get(d, "window_ms", int, w),
            retention_ms=_get(d, "retention_ms", int, w),
            remember_ms=_opt(d, "remember_ms", int, w),
            remember_guests=_opt(d, "remember_guests", bool, w),
            grace_ms=_opt(d, "grace_ms", int, w),
        )


@dataclass(frozen=True)
class SpaceSummary:
    """A space holding members, and how many."""

    space: str
    users: int
    guests: int

    @classmethod
    def from_json(cls, data: Any) -> "SpaceSummary":
        d = _obj(data, "space")
        members = _obj(_get(d, "members", dict, "space"), "space members")
        return cls(
            space=_get(d, "space", str, "space"),
            users=_get(members, "users", int, "space members"),
            guests=_get(members, "guests", int, "space members"),
        )


@dataclass(frozen=True)
class HistorySample:
    """The online count of a space at one time."""

    at_ms: int
    users: int
    guests: int

    @property
    def at(self) -> _dt.datetime:
        """:attr:`at_ms` as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self.at_ms / 1000, tz=_dt.timezone.utc)

    @classmethod
    def from_json(cls, data: Any) -> "HistorySample":
        d = _obj(data, "history sample")
        return cls(*(_get(d, k, int, "history sample") for k in ("at_ms", "users", "guests")))


@dataclass(frozen=True)
class History:
    """A space's online count over time, oldest first."""

    interval_ms: int
    samples: List[HistorySample]

    @classmethod
    def from_json(cls, data: Any) -> "History":
        d = _obj(data, "history")
        return cls(
            interval_ms=_get(d, "interval_ms", int, "history"),
            samples=[HistorySample.from_json(s) for s in _list(d, "samples", "history")],
        )


@dataclass(frozen=True)
class SeenAnywhere:
    """A user's last seen over every space: what a contact list shows."""

    id: str
    #: The best over the spaces the user is present in; offline when none.
    status: Status
    #: Newest last seen over every space; ``None`` if never seen.
    last_seen_ms: Optional[int]
    #: The space :attr:`last_seen_ms` is from.
    space: Optional[str]

    @property
    def last_seen(self) -> Optional[_dt.datetime]:
        """:attr:`last_seen_ms` as an aware UTC datetime."""
        return _ms_to_datetime(self.last_seen_ms)

    @classmethod
    def from_json(cls, data: Any) -> "SeenAnywhere":
        d = _obj(data, "user")
        return cls(
            id=_get(d, "id", str, "user"),
            status=_enum(d, "status", Status, "user"),
            last_seen_ms=_opt(d, "last_seen_ms", int, "user"),
            space=_opt(d, "space", str, "user"),
        )


@dataclass(frozen=True)
class Erasure:
    """What erasing a user forgot."""

    #: Spaces it was present in.
    presence: int
    #: Remembered last-seen times forgotten.
    remembered: int
    #: Whether it had a friend set.
    friend_set: bool
    #: Friend sets it was removed from.
    listed_by: int

    @classmethod
    def from_json(cls, data: Any) -> "Erasure":
        d = _obj(data, "erasure")
        w = "erasure"
        return cls(
            presence=_get(d, "presence", int, w),
            remembered=_get(d, "remembered", int, w),
            friend_set=_get(d, "friend_set", bool, w),
            listed_by=_get(d, "listed_by", int, w),
        )


@dataclass(frozen=True)
class Token:
    """A WebSocket token for a browser or device (``/v1/ws``)."""

    #: The JWT; left out of ``repr`` so it does not end up in logs.
    token: str = field(repr=False)
    expires_at_ms: int

    @property
    def expires_at(self) -> _dt.datetime:
        """:attr:`expires_at_ms` as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self.expires_at_ms / 1000, tz=_dt.timezone.utc)

    @classmethod
    def from_json(cls, data: Any) -> "Token":
        d = _obj(data, "token")
        return cls(_get(d, "token", str, "token"), _get(d, "expires_at_ms", int, "token"))


class EndpointHealth(str, Enum):
    """A webhook endpoint's state: ``ok`` (its last request succeeded),
    ``retrying`` (fewer than five failures in a row) or ``failing``."""

    OK = "ok"
    RETRYING = "retrying"
    FAILING = "failing"


@dataclass(frozen=True)
class WebhookEndpoint:
    """One webhook endpoint in ``GET /v1/webhooks`` (its secret never shown;
    a URL's password or query as ``***``)."""

    name: str
    url: str
    #: The event types it wants.
    events: List[str]
    #: The glob its spaces must match; ``None``: every space.
    spaces: Optional[str]
    state: EndpointHealth
    #: Events waiting for it on this server, and how many it may hold.
    queue_depth: int
    queue_limit: int
    #: Events delivered (answered 2xx).
    delivered: int
    #: Requests sent again after a failure, and requests that failed.
    retried: int
    failed: int
    #: Events it will never get, by reason.
    dropped_overflow: int
    dropped_rejected: int
    dropped_expired: int
    failures_in_row: int
    last_success_ms: Optional[int]
    #: The last failed request: when, and what went wrong (``HTTP 503``, …).
    last_error_ms: Optional[int]
    last_error: Optional[str]

    @classmethod
    def from_json(cls, data: Any) -> "WebhookEndpoint":
        w = "webhook endpoint"
        d = _obj(data, w)
        queue = _obj(_get(d, "queue", dict, w), "webhook queue")
        dropped = _obj(_get(d, "dropped", dict, w), "webhook dropped")
        error = _opt(d, "last_error", dict, w)
        events = _list(d, "events", w)
        if not all(isinstance(e, str) for e in events):
            raise ProtocolError(f"{w}: 'events' holds a non-string")
        return cls(
            name=_get(d, "name", str, w),
            url=_get(d, "url", str, w),
            events=events,
            spaces=_opt(d, "spaces", str, w),
            state=_enum(d, "state", EndpointHealth, w),
            queue_depth=_get(queue, "depth", int, w),
            queue_limit=_get(queue, "limit", int, w),
            delivered=_get(d, "delivered", int, w),
            retried=_get(d, "retried", int, w),
            failed=_get(d, "failed", int, w),
            dropped_overflow=_get(dropped, "overflow", int, w),
            dropped_rejected=_get(dropped, "rejected", int, w),
            dropped_expired=_get(dropped, "expired", int, w),
            failures_in_row=_get(d, "failures_in_row", int, w),
            last_success_ms=_opt(d, "last_success_ms", int, w),
            last_error_ms=_get(error, "at_ms", int, w) if error is not None else None,
            last_error=_get(error, "error", str, w) if error is not None else None,
        )


@dataclass(frozen=True)
class WebhooksState:
    """``GET /v1/webhooks`` (a write key): each endpoint's state on the
    server asked, and the store's outbox. ``enabled`` is false, with no
    endpoints and no outbox numbers, on a server without webhooks."""

    enabled: bool
    #: This server's consumer name in the outbox.
    consumer: Optional[str]
    endpoints: List[WebhookEndpoint]
    #: Events kept until every endpoint finished them, of which claimed
    #: by a server, and those the outbox's cap trimmed before delivery.
    outbox_depth: Optional[int]
    outbox_pending: Optional[int]
    outbox_trimmed: Optional[int]

    @classmethod
    def from_json(cls, data: Any) -> "WebhooksState":
        w = "webhooks"
        d = _obj(data, w)
        outbox = _opt(d, "outbox", dict, w)
        return cls(
            enabled=_get(d, "enabled", bool, w),
            consumer=_opt(d, "consumer", str, w),
            endpoints=[WebhookEndpoint.from_json(e) for e in _list(d, "endpoints", w)],
            outbox_depth=_get(outbox, "depth", int, w) if outbox is not None else None,
            outbox_pending=_get(outbox, "pending", int, w) if outbox is not None else None,
            outbox_trimmed=_get(outbox, "trimmed", int, w) if outbox is not None else None,
        )
