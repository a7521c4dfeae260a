"""A circuit breaker for presence queries made while rendering a page, and
the "unknown" answer they give while it is open.

A page must never slow down because herenow does. A refused connection
fails at once, but a server that hangs (overloaded, partitioned, stopped)
costs every query its whole timeout, on every page. So after one failure
or timeout, :class:`CircuitBreaker` answers "unknown" at once for a
back-off (30 s by default), then lets one probe through: if it answers,
queries go through again; if not, the back-off starts again. The log says
so once per opening, not once per call.

"Unknown" is :class:`Unknown`: falsy, empty when iterated, and rendered as
nothing (or as a text the caller chose), so a template shows neither
"Nobody is online" nor an empty last seen while herenow cannot answer::

    breaker = herenow.CircuitBreaker()
    members = breaker.call(lambda: hn.online("site").members, herenow.Unknown())
    if isinstance(members, herenow.Unknown): ...

The Django template tags share one breaker per process
(:func:`herenow.django.conf.get_breaker`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterator, Optional, TypeVar, Union

from .errors import ProblemError, ProtocolError, TransportError

__all__ = ["CircuitBreaker", "Unknown", "trips"]

T = TypeVar("T")
U = TypeVar("U")

log = logging.getLogger("herenow.breaker")


def trips(error: BaseException) -> bool:
    """Whether ``error`` says herenow cannot answer now (and so opens the
    breaker): no answer or a timeout, a ``5xx`` or ``429``, or an answer
    that is not herenow's. A ``4xx`` is an answer to a wrong request: it
    fails that call only."""
    if isinstance(error, (TransportError, ProtocolError)):
        return True
    if isinstance(error, ProblemError):
        return error.status >= 500 or error.status == 429
    return False


class Unknown:
    """What a presence query answers when herenow could not: falsy, of
    length 0, empty when iterated, and rendered (``str``) as ``text``,
    ``""`` by default. Any attribute or item of it is a blank
    :class:`Unknown`, so ``{{ seen.status.value }}`` renders nothing
    rather than failing."""

    __slots__ = ("text",)

    def __init__(self, text: str = "") -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __getattr__(self, name: str) -> "Unknown":
        if name.startswith("__"):
            raise AttributeError(name)
        return _BLANK

    def __getitem__(self, key: Any) -> "Unknown":
        return _BLANK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unknown)

    def __hash__(self) -> int:
        return hash(Unknown)

    def __repr__(self) -> str:
        return f"Unknown({self.text!r})"


_BLANK = Unknown()


class CircuitBreaker:
    """Closed, open for ``backoff`` seconds after a failure, then one probe.

    Args:
        backoff: seconds to answer "unknown" at once after a failure
            (default 30).
        clock: a monotonic clock in seconds; tests inject one.
        logger: where an opening (a warning) and a closing (info) are
            logged; default ``herenow.breaker``.
        trips: which exceptions open it (default :func:`trips`); others
            fail their own call only.
    """

    def __init__(
        self,
        backoff: float = 30.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        logger: Optional[logging.Logger] = None,
        trips: Callable[[BaseException], bool] = trips,
    ) -> None:
        if backoff < 0:
            raise ValueError("backoff must be >= 0")
        self.backoff = backoff
        self.clock = clock
        self.logger = logger or log
        self.trips = trips
        self._lock = threading.Lock()
        self._open_until: Optional[float] = None  # None: closed
        self._probe_since: Optional[float] = None  # a probe is out since then
        #: How many times it opened (a failed probe opens it again).
        self.openings = 0
        #: Calls answered "unknown" at once, without asking herenow.
        self.short_circuited = 0

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"probing"``."""
        with self._lock:
            if self._open_until is None:
                return "closed"
            if self._probe_since is not None:
                return "probing"
            return "open"

    def allow(self) -> bool:
        """Whether a call may go to herenow now: always while closed; while
        open, only once the back-off is over, and then to one caller at a
        time (the probe), whose outcome must be reported."""
        with self._lock:
            if self._open_until is None:
                return True
            now = self.clock()
            if now >= self._open_until and (
                self._probe_since is None or now - self._probe_since >= max(self.backoff, 1.0)
            ):
                self._probe_since = now
                return True
            self.short_circuited += 1
            return False

    def succeeded(self) -> None:
        """Reports that a call was answered: closes the breaker."""
        with self._lock:
            was_open = self._open_until is not None
            self._open_until = None
            self._probe_since = None
        if was_open:
            self.logger.info("herenow: presence queries are answered again")

    def failed(self, error: BaseException) -> bool:
        """Reports a failed call; answers whether it opened the breaker
        (and was logged). An error that does not :attr:`trips` counts as
        an answer."""
        if not self.trips(error):
            self.succeeded()
            return False
        with self._lock:
            was_open = self._open_until is not None and self._probe_since is None
            self._open_until = self.clock() + self.backoff
            self._probe_since = None
            if was_open:  # a call allowed before it opened, failing late
                return False
            self.openings += 1
        self.logger.warning(
            "herenow: a presence query failed (%s: %s); answering 'unknown' for %.0f s, "
            "then trying once",
            type(error).__name__,
            error,
            self.backoff,
        )
        return True

    def call(self, fn: Callable[[], T], unknown: U) -> Union[T, U]:
        """``fn()`` when allowed and answered; otherwise ``unknown``, at
        once while open. Never raises what ``fn`` raised."""
        if not self.allow():
            return unknown
        try:
            value = fn()
        except Exception as e:
            if not self.failed(e):
                self.logger.debug("herenow: a presence query failed: %s: %s", type(e).__name__, e)
            return unknown
        self.succeeded()
        return value

    def __repr__(self) -> str:
        return f"CircuitBreaker(backoff={self.backoff}, state={self.state!r})"
