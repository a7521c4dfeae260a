"""What the sync and the asyncio client share about HTTP: defaults,
headers, turning answers into values or typed errors, and when to retry."""

from __future__ import annotations

import json
import os
import random
from typing import Any, Dict, Mapping, Optional, TypeVar, Union

import httpx

from ._ops import Op
from ._version import __version__
from .errors import (
    HerenowError,
    ProblemError,
    ProtocolError,
    Timeout,
    TransportError,
    problem_error,
)

T = TypeVar("T")

#: Where ``herenow serve`` listens by default.
DEFAULT_URL = "http://127.0.0.1:7700"

#: Per request: seconds to connect, and for the whole exchange.
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_TIMEOUT = 10.0

#: Event streams send a keep-alive comment every 15 s; a stream silent for
#: three of those is dead and is reconnected.
DEFAULT_STREAM_READ_TIMEOUT = 45.0

#: Connections kept per client (connection reuse), and idle ones kept alive.
DEFAULT_MAX_CONNECTIONS = 100
DEFAULT_MAX_KEEPALIVE = 20

UA = f"herenow-python/{__version__}"

TimeoutLike = Union[float, httpx.Timeout, None]


def env_url() -> str:
    """``HERENOW_SERVER`` (as the ``herenow`` CLI reads it), or the default."""
    return os.environ.get("HERENOW_SERVER") or DEFAULT_URL


def env_api_key() -> Optional[str]:
    """``HERENOW_API_KEY``, as the ``herenow`` CLI reads it."""
    return os.environ.get("HERENOW_API_KEY") or None


def make_timeout(timeout: TimeoutLike, connect_timeout: float) -> httpx.Timeout:
    if isinstance(timeout, httpx.Timeout):
        return timeout
    if timeout is None:
        return httpx.Timeout(None, connect=connect_timeout)
    return httpx.Timeout(timeout, connect=connect_timeout)


def make_headers(api_key: Optional[str], extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
    headers = {"user-agent": UA, "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if extra:
        headers.update(extra)
    return headers


def make_limits(max_connections: int) -> httpx.Limits:
    return httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=min(max_connections, DEFAULT_MAX_KEEPALIVE),
    )


def transport_error(e: httpx.HTTPError, method: str, url: str) -> TransportError:
    """The typed error for an exchange that got no HTTP answer."""
    # Nothing was sent when the connection could not be opened, or no pooled
    # connection came free in time: safe to send again.
    sent = not isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
    what = f"{method} {url}: {type(e).__name__}: {e or 'no detail'}"
    if isinstance(e, httpx.TimeoutException):
        err: TransportError = Timeout(what, sent=sent)
    else:
        err = TransportError(what, sent=sent)
    err.__cause__ = e
    return err


def error_of(response: httpx.Response) -> ProblemError:
    """The typed error for a non-2xx answer whose body has been read."""
    try:
        body: Any = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    return problem_error(
        response.status_code, body, retry_after=response.headers.get("retry-after")
    )


def decode(op: Op[T], response: httpx.Response) -> T:
    """The value of a successful answer, or the typed error of a failed one."""
    if not response.is_success:
        raise error_of(response)
    if op.expect == "text":
        return op.parse(response.text)
    try:
        data = json.loads(response.content)
    except ValueError as e:
        raise ProtocolError(
            f"{op.method} {op.path}: the answer is not JSON ({e}); "
            f"content-type {response.headers.get('content-type')!r}"
        ) from None
    try:
        return op.parse(data)
    except ProtocolError as e:
        raise ProtocolError(f"{op.method} {op.path}: {e}") from None


def retry_delay(
    err: HerenowError, attempt: int, max_wait: float, rng: random.Random
) -> Optional[float]:
    """Seconds to wait before sending again after ``err`` on ``attempt``
    (0 for the first), or ``None`` if it must not be sent again.

    Every call of this API is idempotent (heartbeats and leaves included),
    but a request that may have reached the server is not sent again
    after a timeout: an overloaded server is not helped by a second copy.
    Only refused connections and ``429`` / ``503`` answers are retried,
    after ``Retry-After`` when the server gives one, and never when that
    is longer than ``max_wait``.
    """
    if not err.retryable:
        return None
    backoff = min(max_wait, 0.1 * (2.0**attempt)) * (0.5 + rng.random() / 2)
    if isinstance(err, ProblemError) and err.retry_after is not None:
        if err.retry_after > max_wait:
            return None
        return err.retry_after
    return backoff
