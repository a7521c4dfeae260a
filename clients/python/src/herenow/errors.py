"""The errors a herenow client raises.

Every error derives from :class:`HerenowError`, so ``except HerenowError``
catches everything the client itself raises. Below it:

- :class:`ProblemError` (and one subclass per HTTP status): the server
  answered with an RFC 9457 ``application/problem+json`` body. It carries
  the stable machine-readable :attr:`~ProblemError.code` (match on it, never
  on the text), the HTTP :attr:`~ProblemError.status` and, on ``429`` and
  ``503``, :attr:`~ProblemError.retry_after` in seconds.
- :class:`TransportError` (and :class:`Timeout`): the server could not be
  reached, or did not answer in time.
- :class:`ProtocolError`: the server answered something this client cannot
  read (not JSON, a field missing): a version mismatch or a proxy in the way.
- :class:`InvalidArgument` (also a :class:`ValueError`): refused before
  anything was sent, because the request could not even be written (an
  empty id in a URL path, a kind that is neither user nor guest).
"""

from __future__ import annotations

import email.utils
import time
from typing import Any, Dict, Mapping, Optional, Type

__all__ = [
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
    "problem_error",
    "parse_retry_after",
]


class HerenowError(Exception):
    """Base of every error the herenow client raises."""

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed if sent again later."""
        return False


class InvalidArgument(HerenowError, ValueError):
    """An argument the client refused before sending anything."""


class TransportError(HerenowError):
    """The request did not get an HTTP answer: refused, reset, timed out.

    :attr:`sent` says whether the request may have reached the server:
    ``False`` when the connection could not even be opened (always safe to
    send again), ``True`` when it broke afterwards.
    """

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent

    @property
    def retryable(self) -> bool:
        return not self.sent


class Timeout(TransportError):
    """The server took longer than the client's timeout."""


class ProtocolError(HerenowError):
    """The server's answer is not what the API documents."""


class ProblemError(HerenowError):
    """A ``4xx`` / ``5xx`` answer with an RFC 9457 problem body.

    Attributes:
        status: the HTTP status, e.g. ``400``.
        code: the stable machine-readable code, e.g. ``"bad-member-id"``;
            ``"http-<status>"`` when the body was not a problem (a proxy's
            error page, say).
        title: a short summary of the problem type.
        detail: what went wrong with this request, for people.
        type: the problem type URI.
        retry_after: seconds to wait before retrying, from the
            ``Retry-After`` header (``429`` / ``503``); ``None`` without one.
        body: the decoded problem body, unknown members included.
    """

    def __init__(
        self,
        status: int,
        code: str,
        *,
        title: str = "",
        detail: str = "",
        type: str = "about:blank",
        retry_after: Optional[float] = None,
        body: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.type = type
        self.retry_after = retry_after
        self.body: Dict[str, Any] = dict(body or {})
        super().__init__(f"{status} {code}: {detail or title}")

    @property
    def retryable(self) -> bool:
        """``429`` and ``503`` are retryable (after :attr:`retry_after`)."""
        return self.status in (429, 503)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, code={self.code!r}, "
            f"detail={self.detail!r}, retry_after={self.retry_after!r})"
        )


class BadRequest(ProblemError):
    """``400``: the request was wrong (``bad-member-id``, ``bad-window``, …)."""


class Unauthorized(ProblemError):
    """``401``: no API key, or an unknown one."""


class Forbidden(ProblemError):
    """``403``: the key's scope does not allow this (``insufficient-scope``)."""


class NotFound(ProblemError):
    """``404``: no such endpoint."""


class MethodNotAllowed(ProblemError):
    """``405``."""


class PayloadTooLarge(ProblemError):
    """``413``: the body is over the server's 4 MiB."""


class UnsupportedMediaType(ProblemError):
    """``415``: the body was not JSON."""


class TooManyRequests(ProblemError):
    """``429``: slow down for :attr:`retry_after` seconds."""


class ServerError(ProblemError):
    """Any other ``5xx``."""


class Unsupported(ServerError):
    """``501``: this server's store cannot answer the question (a seed's
    Redis key layout, say)."""


class ServiceUnavailable(ServerError):
    """``503``: store down, timeout, too many streams, shutting down; retry
    after :attr:`retry_after` seconds."""


_BY_STATUS: Dict[int, Type[ProblemError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: TooManyRequests,
    501: Unsupported,
    503: ServiceUnavailable,
}


def parse_retry_after(value: Optional[str], *, now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header value.

    Both forms of RFC 9110 are read: delay-seconds (``"5"``) and an
    HTTP-date (relative to ``now``, a UNIX time). ``None`` when absent or
    unreadable; never negative.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def problem_error(
    status: int,
    body: Any,
    *,
    retry_after: Optional[str] = None,
) -> ProblemError:
    """The typed error for an answer with this status and decoded body.

    ``body`` is the decoded JSON of the answer, or anything else when it
    was not JSON; a body without a ``code`` gets ``"http-<status>"``.
    """
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ProblemError
    fields: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = fields.get("code")
    if not isinstance(code, str) or not code:
        code = f"http-{status}"

    def text(key: str, default: str) -> str:
        v = fields.get(key)
        return v if isinstance(v, str) else default

    return cls(
        status,
        code,
        title=text("title", ""),
        detail=text("detail", ""),
        type=text("type", "about:blank"),
        retry_after=parse_retry_after(retry_after),
        body=fields,
    )
