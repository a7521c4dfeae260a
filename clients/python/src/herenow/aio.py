"""The asyncio client: :class:`AsyncClient`.

One :class:`AsyncClient` holds one pool of keep-alive connections (httpx), so
make one per process and share it within its event loop. Every method sends
one request (or, for the ``iter_*`` methods, one per page) and answers a
typed value from :mod:`herenow.models`, or raises a typed error from
:mod:`herenow.errors`.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import random
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    TypeVar,
    Union,
)

import httpx

from . import _ops as ops
from ._http import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_STREAM_READ_TIMEOUT,
    DEFAULT_TIMEOUT,
    TimeoutLike,
    decode,
    env_api_key,
    env_url,
    error_of,
    make_headers,
    make_limits,
    make_timeout,
    retry_delay,
    transport_error,
)
from ._ops import Duration, HeartbeatLike, MemberLike, Op
from ._stream import AsyncEventStream, Reconnect
from .errors import HerenowError
from .events import SpaceEvent, WatchEvent
from .models import (
    Count,
    Erasure,
    FriendList,
    HeartbeatResult,
    History,
    Kind,
    Member,
    Meta,
    OnlinePage,
    SeenAnywhere,
    SpaceConfig,
    SpaceSummary,
    Token,
    WatchGrant,
    WebhooksState,
)

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """A herenow server, over HTTP, for asyncio (the methods of
    :class:`~herenow.Client`, awaited).

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:7700"``; default
            ``$HERENOW_SERVER`` or that.
        api_key: sent as ``Authorization: Bearer``; default
            ``$HERENOW_API_KEY``. A ``read`` key may query; heartbeats,
            leaves, friends, config, tokens and erasure need ``write``.
        timeout: seconds to wait at each step of a request (sending, each
            read, a free pooled connection), or an ``httpx.Timeout``.
        connect_timeout: seconds to open a connection.
        stream_read_timeout: seconds an event stream may stay silent before
            it is deemed dead and reconnected (the server sends a keep-alive
            every 15 s).
        retries: how many times a request is sent again after a refused
            connection or a ``429`` / ``503`` (after its ``Retry-After``).
        max_retry_wait: a ``Retry-After`` longer than this is not waited
            for: the error is raised at once.
        max_connections: the connection pool's size.
        headers: more headers for every request.
        transport: an ``httpx.AsyncBaseTransport`` (tests, proxies, unix sockets).
        sleep: how the client waits between retries (tests inject one).
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        *,
        api_key: Optional[str] = None,
        timeout: TimeoutLike = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        stream_read_timeout: float = DEFAULT_STREAM_READ_TIMEOUT,
        retries: int = 2,
        max_retry_wait: float = 10.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        headers: Optional[Mapping[str, str]] = None,
        transport: Optional[httpx.AsyncBaseTransport] = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.base_url = (base_url or env_url()).rstrip("/")
        self._timeout = make_timeout(timeout, connect_timeout)
        self._stream_timeout = httpx.Timeout(
            connect=connect_timeout,
            read=stream_read_timeout,
            write=connect_timeout,
            pool=connect_timeout,
        )
        self._retries = retries
        self._max_retry_wait = max_retry_wait
        self._sleep = sleep
        self._rng = random.Random()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=make_headers(api_key if api_key is not None else env_api_key(), headers),
            timeout=self._timeout,
            limits=make_limits(max_connections),
            transport=transport,
            follow_redirects=False,
        )

    # --- lifecycle ---------------------------------------------------------

    async def aclose(self) -> None:
        """Closes the pooled connections."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    async def _call(self, op: Op[T]) -> T:
        attempt = 0
        while True:
            err: HerenowError
            try:
                response = await self._http.request(
                    op.method, op.path, params=op.params, json=op.json
                )
            except httpx.HTTPError as e:
                err = transport_error(e, op.method, op.path)
            else:
                if response.is_success:
                    return decode(op, response)
                err = error_of(response)
            delay = (
                None
                if attempt >= self._retries
                else retry_delay(err, attempt, self._max_retry_wait, self._rng)
            )
            if delay is None:
                raise err
            await self._sleep(delay)
            attempt += 1

    # --- heartbeats and leaves ---------------------------------------------

    async def heartbeat(
        self,
        space: str,
        id: str,
        *,
        kind: Union[Kind, str] = Kind.USER,
        meta: Optional[Meta] = None,
        at_ms: Optional[int] = None,
    ) -> HeartbeatResult:
        """Records that member ``id`` of ``space`` was active now (or at
        ``at_ms``, which needs a write key). ``meta`` replaces the member's
        metadata; absent, it keeps what it had."""
        return await self._call(ops.heartbeat(space, id, kind, meta, at_ms))

    async def heartbeats(self, space: str, beats: Iterable[HeartbeatLike]) -> HeartbeatResult:
        """Records a batch of 1 to 10,000 heartbeats (plain strings are user
        ids) in one request; the answer sums them."""
        return await self._call(ops.heartbeats(space, beats))

    async def leave(self, space: str, members: Iterable[MemberLike]) -> int:
        """Members leave ``space`` now (offline at once, last seen
        remembered); answers how many were present."""
        return await self._call(ops.leave(space, members))

    # --- status and last seen ----------------------------------------------

    async def member(self, space: str, id: str, *, kind: Union[Kind, str] = Kind.USER) -> Member:
        """One member's status and last seen in ``space``. A member never
        seen is ``offline`` with ``last_seen_ms=None`` (not an error)."""
        return await self._call(ops.member(space, id, kind))

    async def status(self, space: str, members: Iterable[MemberLike]) -> List[Member]:
        """Status and last seen of 1 to 10,000 members, in the order asked."""
        return await self._call(ops.status(space, members))

    async def user(self, id: str) -> SeenAnywhere:
        """A user's last seen anywhere: its newest over every space."""
        return await self._call(ops.user(id))

    async def users_status(self, ids: Iterable[str]) -> List[SeenAnywhere]:
        """Last seen anywhere of 1 to 10,000 users, in the order asked."""
        return await self._call(ops.users_status(ids))

    async def erase_user(self, id: str) -> Erasure:
        """Forgets a user everywhere (account deletion, GDPR erasure):
        presence, remembered times, friend set, place in others' sets."""
        return await self._call(ops.erase_user(id))

    # --- who's online ------------------------------------------------------

    async def online(
        self,
        space: str,
        *,
        window: Optional[Duration] = None,
        kind: Optional[str] = None,
        order: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> OnlinePage:
        """One page of who's online: members seen within ``window``
        (default: the space's), ``kind`` ``"users"`` (default), ``"guests"``
        or ``"all"``, ``order`` ``"recent"`` or ``"id"`` (default: the store's,
        named by the page's ``order``)."""
        return await self._call(
            ops.online(space, window=window, kind=kind, order=order, limit=limit, cursor=cursor)
        )

    async def iter_online(
        self,
        space: str,
        *,
        window: Optional[Duration] = None,
        kind: Optional[str] = None,
        order: Optional[str] = None,
        page_size: Optional[int] = None,
    ) -> AsyncIterator[Member]:
        """Every member online, page after page (``page_size`` per request)."""
        cursor: Optional[str] = None
        while True:
            page = await self.online(
                space, window=window, kind=kind, order=order, limit=page_size, cursor=cursor
            )
            for m in page.members:
                yield m
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def count(self, space: str, *, window: Optional[Duration] = None) -> Count:
        """How many users and guests were seen within ``window``."""
        return await self._call(ops.count(space, window=window))

    async def online_among(
        self,
        space: str,
        members: Iterable[MemberLike],
        *,
        window: Optional[Duration] = None,
        limit: Optional[int] = None,
    ) -> List[Member]:
        """Of these members, the ones seen within ``window``, most recent
        first."""
        return await self._call(ops.online_among(space, members, window=window, limit=limit))

    # --- friends -----------------------------------------------------------

    async def set_friends(self, user: str, friends: Iterable[str]) -> int:
        """Replaces ``user``'s friend set (at most 5,000; empty clears it);
        answers its new size."""
        return await self._call(ops.set_friends(user, friends))

    async def add_friends(self, user: str, friends: Iterable[str]) -> int:
        """Adds to ``user``'s friend set; answers its new size."""
        return await self._call(ops.add_friends(user, friends))

    async def remove_friends(self, user: str, friends: Iterable[str]) -> int:
        """Removes from ``user``'s friend set; answers its new size."""
        return await self._call(ops.remove_friends(user, friends))

    async def friends(self, user: str) -> FriendList:
        """``user``'s friend set."""
        return await self._call(ops.friends(user))

    async def online_friends(
        self,
        space: str,
        user: str,
        *,
        window: Optional[Duration] = None,
        limit: Optional[int] = None,
    ) -> List[Member]:
        """``user``'s friends seen in ``space`` within ``window``, most
        recent first."""
        return await self._call(ops.online_friends(space, user, window=window, limit=limit))

    # --- spaces ------------------------------------------------------------

    async def config(self, space: str) -> SpaceConfig:
        """``space``'s time policy."""
        return await self._call(ops.config(space))

    async def set_config(self, space: str, config: SpaceConfig) -> SpaceConfig:
        """Sets ``space``'s time policy; answers the policy now in force."""
        return await self._call(ops.set_config(space, config))

    async def spaces(
        self, *, after: Optional[str] = None, limit: Optional[int] = None
    ) -> List[SpaceSummary]:
        """One page of the spaces holding members, by name, after ``after``."""
        return await self._call(ops.spaces(after=after, limit=limit))

    async def iter_spaces(self, *, page_size: int = 100) -> AsyncIterator[SpaceSummary]:
        """Every space holding members, by name, page after page."""
        after: Optional[str] = None
        while True:
            page = await self.spaces(after=after, limit=page_size)
            for s in page:
                yield s
            if len(page) < page_size:
                return
            after = page[-1].space

    async def history(self, space: str, *, range: Optional[Duration] = None) -> History:
        """``space``'s online count over the last ``range`` (default 1 h,
        at most 24 h), oldest first."""
        return await self._call(ops.history(space, range=range))

    # --- tokens ------------------------------------------------------------

    async def mint_token(
        self,
        user: str,
        spaces: Iterable[str],
        *,
        kind: Union[Kind, str] = Kind.USER,
        ttl: Optional[Union[int, _dt.timedelta]] = None,
        watch: Optional[Union[WatchGrant, str]] = None,
    ) -> Token:
        """Mints a WebSocket token for a browser or device: ``user`` may join
        and subscribe to ``spaces`` (``["*"]``: any) for ``ttl`` (seconds or
        a timedelta, default 1 h, at most 24 h) and watch whom ``watch``
        says (``friends`` by default). Needs a write key."""
        return await self._call(ops.mint_token(user, spaces, kind=kind, ttl=ttl, watch=watch))

    # --- live events -------------------------------------------------------

    def events(
        self, space: str, *, reconnect: Optional[Reconnect] = None
    ) -> "AsyncEventStream[SpaceEvent]":
        """``space``'s live events: a :class:`~herenow.events.Snapshot`, then
        a :class:`~herenow.events.PresenceEvent` per change. A dropped
        stream reconnects by itself and yields a fresh snapshot with
        ``resync=True``. The stream connects when first read, so its
        snapshot is the space at that moment. Close the stream when done (``async with``)."""
        op = ops.events_request(space)
        return AsyncEventStream(
            self._http,
            f"event stream of {space!r}",
            op,
            self._stream_timeout,
            reconnect or Reconnect(),
        )

    def watch(
        self,
        users: Optional[Iterable[str]] = None,
        *,
        friends_of: Optional[str] = None,
        space: Optional[str] = None,
        reconnect: Optional[Reconnect] = None,
    ) -> "AsyncEventStream[WatchEvent]":
        """Watches ``users`` and/or ``friends_of``'s friend set (followed as
        it changes), anywhere or within ``space``: ``watching`` pages, then
        a :class:`~herenow.events.StatusChange` whenever one goes online,
        away, back or offline. Connects when first read; reconnects by
        itself, and the pages after a reconnect say ``resync=True``."""
        op = ops.watch_request(users, friends_of=friends_of, space=space)
        return AsyncEventStream(
            self._http, "watch stream", op, self._stream_timeout, reconnect or Reconnect()
        )

    # --- operations --------------------------------------------------------

    async def healthy(self) -> bool:
        """Whether the server process answers ``/healthz``."""
        response = await self._get_plain("/healthz")
        return response.status_code == 200

    async def ready(self) -> bool:
        """Whether the server's store answers (``/readyz``): ``False`` on
        ``503``, an error on anything else but ``200``."""
        response = await self._get_plain("/readyz")
        if response.status_code == 503:
            return False
        return True

    async def webhooks(self) -> WebhooksState:
        """The webhooks' state on this server (``GET /v1/webhooks``, a write
        key): each endpoint's queue, counters and last error, and the
        store's outbox; ``enabled=False`` without webhooks."""
        return await self._call(ops.webhooks())

    async def metrics(self) -> str:
        """The Prometheus text of ``/metrics``."""
        return await self._call(ops.metrics())

    async def openapi(self) -> Dict[str, Any]:
        """The server's OpenAPI document."""
        return await self._call(ops.openapi())

    async def _get_plain(self, path: str) -> httpx.Response:
        try:
            response = await self._http.get(path)
        except httpx.HTTPError as e:
            raise transport_error(e, "GET", path) from None
        if response.status_code not in (200, 503):
            raise error_of(response)
        return response
