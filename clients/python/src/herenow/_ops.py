"""Every HTTP call of the API as a plain value: method, path, query, body
and the parser of its answer. No I/O here: the sync and the asyncio client
both send these, so the two cannot drift apart.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, TypeVar, Union
from urllib.parse import quote

from .errors import InvalidArgument, ProtocolError
from .models import (
    Count,
    Erasure,
    FriendList,
    Heartbeat,
    HeartbeatResult,
    History,
    Kind,
    Member,
    MemberRef,
    Meta,
    OnlinePage,
    SeenAnywhere,
    SpaceConfig,
    SpaceSummary,
    Token,
    WatchGrant,
    WebhooksState,
    _get,
    _list,
    _members,
    _obj,
    coerce_enum,
)

T = TypeVar("T")

#: A duration: a humantime string the server reads (``"10m"``, ``"90s"``,
#: ``"1500ms"``), a :class:`~datetime.timedelta`, or a number of seconds.
Duration = Union[str, _dt.timedelta, int, float]

MemberLike = Union[str, MemberRef]
HeartbeatLike = Union[str, Heartbeat]


@dataclass(frozen=True)
class Op(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: Optional[Dict[str, str]] = None
    json: Any = None
    #: ``"json"``: the answer is JSON for :attr:`parse`; ``"text"``: its text.
    expect: str = "json"


def seg(value: Any, what: str) -> str:
    """``value`` as one URL path segment.

    Ids may hold ``/``, ``?``, ``#``, ``%`` or spaces, so everything but
    unreserved characters is percent-encoded; ``.`` and ``..`` alone would be
    collapsed by URL normalisation, so their dots are encoded too. An empty
    value would change which endpoint is called, so it is refused here.
    """
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{what} must not be empty")
    encoded = quote(value, safe="")
    if value in (".", ".."):
        encoded = value.replace(".", "%2E")
    return encoded


def duration(value: Duration, what: str) -> str:
    """A duration in the server's humantime form."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise InvalidArgument(f"{what} must be a duration, not a bool")
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    else:
        raise InvalidArgument(
            f"{what} must be a str, a timedelta or seconds, not {type(value).__name__}"
        )
    # Whole milliseconds: the server's resolution. Negative values are sent
    # as they are and refused by the server with its own code.
    return f"{int(round(seconds * 1000))}ms"


def _limit(value: Optional[int], what: str = "limit") -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an int, not {type(value).__name__}")
    return str(value)


def _query(**params: Optional[str]) -> Optional[Dict[str, str]]:
    q = {k: v for k, v in params.items() if v is not None}
    return q or None


def _refs(members: Iterable[MemberLike]) -> List[Dict[str, Any]]:
    if isinstance(members, (str, MemberRef)):
        raise InvalidArgument("members must be an iterable of ids, not a single member")
    return [MemberRef.of(m).to_json() for m in members]


def _ids(ids: Iterable[str], what: str) -> List[str]:
    if isinstance(ids, str):
        raise InvalidArgument(f"{what} must be an iterable of ids, not a single str")
    out = list(ids)
    for i in out:
        if not isinstance(i, str):
            raise InvalidArgument(f"{what} must hold str ids, not {type(i).__name__}")
    return out


def _friend_count(data: Any) -> int:
    return int(_get(_obj(data, "friend count"), "friends", int, "friend count"))


def _left(data: Any) -> int:
    return int(_get(_obj(data, "leave answer"), "left", int, "leave answer"))


def _users(data: Any) -> List[SeenAnywhere]:
    return [SeenAnywhere.from_json(u) for u in _list(_obj(data, "users"), "users", "users")]


def _spaces(data: Any) -> List[SpaceSummary]:
    return [SpaceSummary.from_json(s) for s in _list(_obj(data, "spaces"), "spaces", "spaces")]


def _text(data: Any) -> str:
    if not isinstance(data, str):
        raise ProtocolError("expected a text answer")
    return data


def _document(data: Any) -> Dict[str, Any]:
    return dict(_obj(data, "OpenAPI document"))


def _space_path(space: str) -> str:
    return f"/v1/spaces/{seg(space, 'space')}"


# --- heartbeats and leaves -------------------------------------------------


def heartbeat(
    space: str,
    id: str,
    kind: Union[Kind, str] = Kind.USER,
    meta: Optional[Meta] = None,
    at_ms: Optional[int] = None,
) -> Op[HeartbeatResult]:
    body = Heartbeat(id, coerce_enum(Kind, kind, "kind"), meta, at_ms).to_json()
    return Op("POST", f"{_space_path(space)}/heartbeat", HeartbeatResult.from_json, json=body)


def heartbeats(space: str, beats: Iterable[HeartbeatLike]) -> Op[HeartbeatResult]:
    if isinstance(beats, (str, Heartbeat)):
        raise InvalidArgument("beats must be an iterable of heartbeats, not a single one")
    body = {"heartbeats": [Heartbeat.of(b).to_json() for b in beats]}
    return Op("POST", f"{_space_path(space)}/heartbeats", HeartbeatResult.from_json, json=body)


def leave(space: str, members: Iterable[MemberLike]) -> Op[int]:
    return Op("POST", f"{_space_path(space)}/leave", _left, json={"members": _refs(members)})


# --- status and last seen ---------------------------------------------------


def member(space: str, id: str, kind: Union[Kind, str] = Kind.USER) -> Op[Member]:
    k = coerce_enum(Kind, kind, "kind")
    return Op(
        "GET",
        f"{_space_path(space)}/members/{seg(id, 'id')}",
        Member.from_json,
        params=_query(kind=None if k is Kind.USER else k.value),
    )


def status(space: str, members: Iterable[MemberLike]) -> Op[List[Member]]:
    return Op(
        "POST",
        f"{_space_path(space)}/status",
        lambda d: _members(d, "status answer"),
        json={"members": _refs(members)},
    )


def user(id: str) -> Op[SeenAnywhere]:
    return Op("GET", f"/v1/users/{seg(id, 'id')}", SeenAnywhere.from_json)


def users_status(ids: Iterable[str]) -> Op[List[SeenAnywhere]]:
    return Op("POST", "/v1/users/status", _users, json={"ids": _ids(ids, "ids")})


def erase_user(id: str) -> Op[Erasure]:
    return Op("DELETE", f"/v1/users/{seg(id, 'id')}", Erasure.from_json)


# --- who's online -----------------------------------------------------------


_KINDS = ("users", "guests", "all")
_ORDERS = ("recent", "id")


def online(
    space: str,
    *,
    window: Optional[Duration] = None,
    kind: Optional[str] = None,
    order: Optional[str] = None,
    limit: Optional[int] = None,
    cursor: Optional[str] = None,
) -> Op[OnlinePage]:
    if kind is not None and kind not in _KINDS:
        raise InvalidArgument(f"kind {kind!r} is not one of {', '.join(_KINDS)}")
    if order is not None and order not in _ORDERS:
        raise InvalidArgument(f"order {order!r} is not one of {', '.join(_ORDERS)}")
    return Op(
        "GET",
        f"{_space_path(space)}/online",
        OnlinePage.from_json,
        params=_query(
            window=None if window is None else duration(window, "window"),
            kind=kind,
            order=order,
            limit=_limit(limit),
            cursor=cursor,
        ),
    )


def count(space: str, *, window: Optional[Duration] = None) -> Op[Count]:
    return Op(
        "GET",
        f"{_space_path(space)}/count",
        Count.from_json,
        params=_query(window=None if window is None else duration(window, "window")),
    )


def online_among(
    space: str,
    members: Iterable[MemberLike],
    *,
    window: Optional[Duration] = None,
    limit: Optional[int] = None,
) -> Op[List[Member]]:
    body: Dict[str, Any] = {"members": _refs(members)}
    if window is not None:
        body["window"] = duration(window, "window")
    if limit is not None:
        _limit(limit)
        body["limit"] = limit
    return Op(
        "POST",
        f"{_space_path(space)}/online-among",
        lambda d: _members(d, "online-among answer"),
        json=body,
    )


# --- friends ----------------------------------------------------------------


def set_friends(user: str, friends: Iterable[str]) -> Op[int]:
    return Op(
        "PUT",
        f"/v1/friends/{seg(user, 'user')}",
        _friend_count,
        json={"friends": _ids(friends, "friends")},
    )


def add_friends(user: str, friends: Iterable[str]) -> Op[int]:
    return Op(
        "POST",
        f"/v1/friends/{seg(user, 'user')}/add",
        _friend_count,
        json={"friends": _ids(friends, "friends")},
    )


def remove_friends(user: str, friends: Iterable[str]) -> Op[int]:
    return Op(
        "POST",
        f"/v1/friends/{seg(user, 'user')}/remove",
        _friend_count,
        json={"friends": _ids(friends, "friends")},
    )


def friends(user: str) -> Op[FriendList]:
    return Op("GET", f"/v1/friends/{seg(user, 'user')}", FriendList.from_json)


def online_friends(
    space: str,
    user: str,
    *,
    window: Optional[Duration] = None,
    limit: Optional[int] = None,
) -> Op[List[Member]]:
    return Op(
        "GET",
        f"{_space_path(space)}/friends/{seg(user, 'user')}/online",
        lambda d: _members(d, "online friends"),
        params=_query(
            window=None if window is None else duration(window, "window"),
            limit=_limit(limit),
        ),
    )


# --- spaces -----------------------------------------------------------------


def config(space: str) -> Op[SpaceConfig]:
    return Op("GET", f"{_space_path(space)}/config", SpaceConfig.from_json)


def set_config(space: str, cfg: SpaceConfig) -> Op[SpaceConfig]:
    if not isinstance(cfg, SpaceConfig):
        raise InvalidArgument(f"config must be a SpaceConfig, not {type(cfg).__name__}")
    return Op("PUT", f"{_space_path(space)}/config", SpaceConfig.from_json, json=cfg.to_json())


def spaces(*, after: Optional[str] = None, limit: Optional[int] = None) -> Op[List[SpaceSummary]]:
    return Op("GET", "/v1/spaces", _spaces, params=_query(after=after, limit=_limit(limit)))


def history(space: str, *, range: Optional[Duration] = None) -> Op[History]:
    return Op(
        "GET",
        f"{_space_path(space)}/history",
        History.from_json,
        params=_query(range=None if range is None else duration(range, "range")),
    )


# --- tokens -----------------------------------------------------------------


def mint_token(
    user: str,
    spaces: Iterable[str],
    *,
    kind: Union[Kind, str] = Kind.USER,
    ttl: Optional[Union[int, _dt.timedelta]] = None,
    watch: Optional[Union[WatchGrant, str]] = None,
) -> Op[Token]:
    body: Dict[str, Any] = {
        "user": user,
        "kind": coerce_enum(Kind, kind, "kind").value,
        "spaces": _ids(spaces, "spaces"),
    }
    if ttl is not None:
        if isinstance(ttl, _dt.timedelta):
            body["ttl_s"] = int(ttl.total_seconds())
        elif isinstance(ttl, int) and not isinstance(ttl, bool):
            body["ttl_s"] = ttl
        else:
            raise InvalidArgument(f"ttl must be whole seconds or a timedelta, not {ttl!r}")
    if watch is not None:
        body["watch"] = coerce_enum(WatchGrant, watch, "watch").value
    return Op("POST", "/v1/tokens", Token.from_json, json=body)


# --- streams ----------------------------------------------------------------


def events_request(space: str) -> Op[None]:
    """The request of a space's event stream (its answer is read as SSE)."""
    return Op("GET", f"{_space_path(space)}/events", lambda d: None)


def watch_request(
    users: Optional[Iterable[str]] = None,
    *,
    friends_of: Optional[str] = None,
    space: Optional[str] = None,
) -> Op[None]:
    """The request of a watch stream (its answer is read as SSE)."""
    body: Dict[str, Any] = {}
    if users is not None:
        body["users"] = _ids(users, "users")
    if friends_of is not None:
        body["friends_of"] = friends_of
    if space is not None:
        body["space"] = space
    return Op("POST", "/v1/watch", lambda d: None, json=body)


# --- operations -------------------------------------------------------------


def openapi() -> Op[Dict[str, Any]]:
    return Op("GET", "/openapi.json", _document)


def webhooks() -> Op[WebhooksState]:
    return Op("GET", "/v1/webhooks", WebhooksState.from_json)


def metrics() -> Op[str]:
    return Op("GET", "/metrics", _text, expect="text")
