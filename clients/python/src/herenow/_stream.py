"""Event streams that survive a dropped connection.

herenow's streams have no replay log: a reconnect gets a fresh picture
(the space's ``snapshot``, or the watched users' ``watching`` pages), which
is cheaper than replaying and is what the server does itself after lag.
So resuming is: reconnect with backoff and jitter (sending
``Last-Event-ID`` if the server ever gave ``id:`` fields, as SSE asks),
then hand the reader that fresh picture marked ``resync=True``, which
tells it to replace what it knew rather than merge. The reader loses no
state: every member's current presence is in the new picture; what it
cannot get back is the individual events of the gap.

A stream whose *first* connection fails raises at once (a wrong URL or
key should not spin); once it has been open, only a non-retryable answer
(``4xx``) or :attr:`Reconnect.max_attempts` failures in a row end it.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import random
import time
from dataclasses import dataclass, replace
from typing import (
    Any,
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Dict,
    Generator,
    Generic,
    Iterator,
    Optional,
    TypeVar,
    cast,
)

import httpx

from ._http import error_of, transport_error
from ._ops import Op
from .errors import HerenowError, ProblemError, ProtocolError, TransportError
from .events import Snapshot, SSEDecoder, WatchingPage, parse_event

__all__ = ["Reconnect", "EventStream", "AsyncEventStream"]

log = logging.getLogger("herenow")

E = TypeVar("E")


@dataclass(frozen=True)
class Reconnect:
    """When and how often a dropped stream reconnects.

    The n-th consecutive failure waits ``initial_delay * multiplier**(n-1)``
    seconds, at most ``max_delay``, less up to ``jitter`` of it at random
    (so a fleet of clients does not reconnect in step), and at least a
    ``503``'s ``Retry-After``. ``max_attempts`` consecutive failures end the
    stream with the last error; ``None`` retries for as long as the stream
    is read. ``on_reconnect(error, delay)`` is called before each wait.
    """

    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.5
    max_attempts: Optional[int] = None
    on_reconnect: Optional[Callable[[HerenowError, float], None]] = None

    def delay(self, failures: int, rng: random.Random) -> float:
        """The wait before reconnecting after ``failures`` failures in a row."""
        base = min(self.max_delay, self.initial_delay * (self.multiplier ** max(0, failures - 1)))
        return base * (1.0 - self.jitter * rng.random())


class _Resumer:
    """The reconnect state of one stream, without I/O."""

    def __init__(self, what: str, policy: Reconnect) -> None:
        self.what = what
        self.policy = policy
        self.rng = random.Random()
        self.last_event_id: Optional[str] = None
        self.retry_ms: Optional[int] = None
        self.reconnects = 0
        self.opened_once = False
        self.failures = 0
        self.resyncing = False

    def headers(self) -> Dict[str, str]:
        h = {"accept": "text/event-stream", "cache-control": "no-cache"}
        if self.last_event_id is not None:
            h["last-event-id"] = self.last_event_id
        return h

    def opened(self) -> None:
        if self.opened_once:
            self.reconnects += 1
            self.resyncing = True
        self.opened_once = True

    def event(self, raw: Any) -> Any:
        self.failures = 0
        if raw.id is not None:
            self.last_event_id = raw.id
        if raw.retry is not None:
            self.retry_ms = raw.retry
        ev = parse_event(raw.event, raw.data)
        if self.resyncing:
            # The first picture after a reconnect replaces everything the
            # reader knew, as after lag.
            if isinstance(ev, Snapshot):
                ev = replace(ev, resync=True)
                self.resyncing = False
            elif isinstance(ev, WatchingPage):
                ev = replace(ev, resync=True)
                if ev.last:
                    self.resyncing = False
        return ev

    def failed(self, err: HerenowError) -> float:
        """The wait before reconnecting after ``err``; raises ``err`` when
        the stream must end instead."""
        if not self.opened_once:
            raise err
        if isinstance(err, ProblemError) and not err.retryable:
            raise err
        if not isinstance(err, (TransportError, ProblemError)):
            raise err
        self.failures += 1
        if self.policy.max_attempts is not None and self.failures > self.policy.max_attempts:
            raise err
        delay = self.policy.delay(self.failures, self.rng)
        if self.retry_ms is not None:
            delay = max(delay, self.retry_ms / 1000)
        if isinstance(err, ProblemError) and err.retry_after is not None:
            delay = max(delay, err.retry_after)
        log.warning("herenow: %s dropped (%s); reconnecting in %.2f s", self.what, err, delay)
        if self.policy.on_reconnect is not None:
            self.policy.on_reconnect(err, delay)
        return delay


def _check_event_stream(response: httpx.Response, what: str) -> None:
    # A proxy's or a load balancer's page is not a stream: reading it as
    # one would yield nothing and reconnect forever.
    ctype = response.headers.get("content-type", "")
    if not ctype.lower().startswith("text/event-stream"):
        raise ProtocolError(f"{what}: the answer is {ctype or 'untyped'}, not text/event-stream")


class _Base(Generic[E]):
    def __init__(
        self, what: str, op: Op[Any], timeout: httpx.Timeout, reconnect: Reconnect
    ) -> None:
        self._op = op
        self._timeout = timeout
        self._resume = _Resumer(what, reconnect)
        self._closed = False

    @property
    def last_event_id(self) -> Optional[str]:
        """The last ``id:`` the server sent (sent back on reconnect), if any."""
        return self._resume.last_event_id

    @property
    def reconnects(self) -> int:
        """How many times the stream has reconnected."""
        return self._resume.reconnects

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called or the stream ended for good."""
        return self._closed


class EventStream(_Base[E], Iterator[E]):
    """A typed, self-resuming event stream; iterate it, then close it
    (``with client.events("lobby") as stream: for event in stream: …``).

    Not thread-safe: read and close it from one thread.
    """

    def __init__(
        self,
        http: httpx.Client,
        what: str,
        op: Op[Any],
        timeout: httpx.Timeout,
        reconnect: Reconnect,
    ) -> None:
        super().__init__(what, op, timeout, reconnect)
        self._http = http
        self._gen = self._run()

    def __iter__(self) -> "EventStream[E]":
        return self

    def __next__(self) -> E:
        return cast(E, next(self._gen))

    def __enter__(self) -> "EventStream[E]":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream and frees its connection."""
        self._closed = True
        self._gen.close()

    def _run(self) -> Generator[Any, None, None]:
        op, r = self._op, self._resume
        try:
            while not self._closed:
                err: HerenowError
                try:
                    with self._http.stream(
                        op.method, op.path, json=op.json, headers=r.headers(), timeout=self._timeout
                    ) as response:
                        if not response.is_success:
                            response.read()
                            raise error_of(response)
                        _check_event_stream(response, r.what)
                        r.opened()
                        decoder = SSEDecoder()
                        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
                        for chunk in response.iter_bytes():
                            for raw in decoder.feed(utf8.decode(chunk)):
                                yield r.event(raw)
                    err = TransportError(f"{r.what}: the server ended the stream")
                except httpx.HTTPError as e:
                    err = transport_error(e, op.method, op.path)
                except ProblemError as e:
                    err = e
                if self._closed:
                    return
                time.sleep(r.failed(err))
        finally:
            self._closed = True


class AsyncEventStream(_Base[E], AsyncIterator[E]):
    """The asyncio :class:`EventStream`: ``async with client.events("lobby")
    as stream: async for event in stream: …``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        what: str,
        op: Op[Any],
        timeout: httpx.Timeout,
        reconnect: Reconnect,
    ) -> None:
        super().__init__(what, op, timeout, reconnect)
        self._http = http
        self._gen = self._run()

    def __aiter__(self) -> "AsyncEventStream[E]":
        return self

    async def __anext__(self) -> E:
        return cast(E, await self._gen.__anext__())

    async def __aenter__(self) -> "AsyncEventStream[E]":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Ends the stream and frees its connection."""
        self._closed = True
        await self._gen.aclose()

    async def _run(self) -> AsyncGenerator[Any, None]:
        op, r = self._op, self._resume
        try:
            while not self._closed:
                err: HerenowError
                try:
                    async with self._http.stream(
                        op.method, op.path, json=op.json, headers=r.headers(), timeout=self._timeout
                    ) as response:
                        if not response.is_success:
                            await response.aread()
                            raise error_of(response)
                        _check_event_stream(response, r.what)
                        r.opened()
                        decoder = SSEDecoder()
                        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
                        async for chunk in response.aiter_bytes():
                            for raw in decoder.feed(utf8.decode(chunk)):
                                yield r.event(raw)
                    err = TransportError(f"{r.what}: the server ended the stream")
                except httpx.HTTPError as e:
                    err = transport_error(e, op.method, op.path)
                except ProblemError as e:
                    err = e
                if self._closed:
                    return
                await asyncio.sleep(r.failed(err))
        finally:
            self._closed = True
