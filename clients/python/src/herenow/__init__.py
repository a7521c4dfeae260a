"""herenow: the Python client of the herenow presence server.

Who is here right now, and when was everyone else last seen? This package
talks to a herenow server over its HTTP API:

- :class:`Client` (sync) and :class:`AsyncClient` (asyncio): every call of
  the API, typed answers (:mod:`herenow.models`), typed errors carrying
  the server's problem ``code``, HTTP status and ``Retry-After``
  (:mod:`herenow.errors`), timeouts and pooled keep-alive connections
  (httpx);
- live events and watched users as self-resuming iterators
  (:mod:`herenow.events`, :meth:`Client.events`, :meth:`Client.watch`);
- :class:`CircuitBreaker` and :class:`Unknown`: queries made while
  rendering a page answer "unknown" at once while herenow fails or hangs
  (:mod:`herenow.breaker`);
- :class:`PresenceTracker`: debounced, batched, background heartbeats,
  behind the WSGI (:mod:`herenow.wsgi`), ASGI (:mod:`herenow.asgi`) and
  Django (:mod:`herenow.django`) middleware;
- :mod:`herenow.webhooks`: verifying and reading the server's webhooks
  (Standard Webhooks signatures, typed events), and a Django view.

It is not the browser's WebSocket client (``/client.js``, served by the
server): a backend mints tokens for browsers with :meth:`Client.mint_token`.
"""

from ._identity import Visitor
from ._ops import Duration
from ._stream import AsyncEventStream, EventStream, Reconnect
from ._version import __version__
from .aio import AsyncClient
from .client import Client
from .errors import (
    BadRequest,
    Forbidden,
    HerenowError,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    ProblemError,
    ProtocolError,
    ServerError,
    ServiceUnavailable,
    Timeout,
    TooManyRequests,
    TransportError,
    Unauthorized,
    Unsupported,
    UnsupportedMediaType,
)
from .events import (
    Lagged,
    PresenceEvent,
    Snapshot,
    StatusChange,
    StreamError,
    UnknownEvent,
    Unwatched,
    WatchedUser,
    WatchingPage,
)
from .models import (
    Count,
    Erasure,
    FriendList,
    Heartbeat,
    HeartbeatResult,
    History,
    HistorySample,
    Kind,
    Member,
    MemberRef,
    OnlinePage,
    SeenAnywhere,
    SpaceConfig,
    SpaceSummary,
    Status,
    Token,
    WatchGrant,
    WebhookEndpoint,
    WebhooksState,
    EndpointHealth,
)
from .breaker import CircuitBreaker, Unknown
from .tracker import PresenceTracker, TrackerStats

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "EventStream",
    "AsyncEventStream",
    "Reconnect",
    "PresenceTracker",
    "TrackerStats",
    "CircuitBreaker",
    "Unknown",
    "Duration",
    "Visitor",
    # models
    "Kind",
    "Status",
    "WatchGrant",
    "EndpointHealth",
    "WebhookEndpoint",
    "WebhooksState",
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
    # events
    "Snapshot",
    "PresenceEvent",
    "Lagged",
    "WatchedUser",
    "WatchingPage",
    "StatusChange",
    "Unwatched",
    "StreamError",
    "UnknownEvent",
    # errors
    "HerenowError",
    "InvalidArgument",
    "TransportError",
    "Timeout",
    "ProtocolError",
    "ProblemError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "MethodNotAllowed",
    "PayloadTooLarge",
    "UnsupportedMediaType",
    "TooManyRequests",
    "ServerError",
    "Unsupported",
    "ServiceUnavailable",
]
