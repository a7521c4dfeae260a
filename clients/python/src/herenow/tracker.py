"""The engine behind the middleware: debounced, batched, background
heartbeats that never slow down or break a request.

:class:`PresenceTracker.track` is what a request calls. It costs a dict
look-up and, at most once per member per ``interval``, an append to a
queue; it never does I/O, never blocks on the network and never raises.
A background thread drains the queue into batch calls
(``POST /v1/spaces/{space}/heartbeats``), so a site with a thousand
requests a second from two hundred members sends about two hundred
heartbeats a minute, in a handful of requests.

This is seed 000's five-minute "online" cookie moved into the process:
the same trade (a member's last seen may lag by up to ``interval``), with
no cookie to set and no write on every request.

Bounds, and what happens at each:

- the debounce map holds at most ``max_members`` members; beyond that the
  least recently sent is forgotten (it may then be sent again early, never
  late). Entries older than ``interval`` are dropped as they age out.
- the queue holds at most ``queue_size`` heartbeats; when full, a new one
  is dropped and counted (:attr:`TrackerStats.dropped`), and its member is
  un-debounced so the next request tries again.
- a batch holds at most ``batch_size`` heartbeats (the server takes 10,000;
  a smaller batch keeps each request well under its 4 MiB body limit).
- a heartbeat the server would refuse (an id over 256 bytes or with a
  control character, metadata that is not a JSON object of at most 1 KiB)
  is refused by :meth:`~PresenceTracker.track` instead, since the server
  refuses a batch whole.

When herenow fails (down, slow, refusing), the batch is dropped, the
failure is logged once per ``log_interval`` (with how many heartbeats were
lost since the last line), and the site drives on: presence is refreshed
by the members' next heartbeats anyway. Members whose heartbeat was lost
stay debounced, so a site does not hammer a server that is struggling.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import threading
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Tuple, Union

from .client import Client
from .models import Heartbeat, Kind, Meta, coerce_enum

__all__ = ["PresenceTracker", "TrackerStats"]

log = logging.getLogger("herenow.tracker")

_Key = Tuple[str, str, str]  # (space, kind, id)


@dataclass(frozen=True)
class TrackerStats:
    """Counters since the tracker started."""

    #: :meth:`PresenceTracker.track` calls.
    tracked: int
    #: Calls that sent nothing: the member was sent within ``interval``.
    debounced: int
    #: Heartbeats queued for sending.
    queued: int
    #: Heartbeats the server acknowledged.
    sent: int
    #: Heartbeats lost: refused by a full queue, or in a failed batch.
    dropped: int
    #: Batch calls that failed.
    failures: int
    #: Heartbeats waiting in the queue now.
    pending: int
    #: Members in the debounce map now.
    members: int
    #: Heartbeats :meth:`PresenceTracker.close` gave up on at its deadline:
    #: those still queued (dropped, and counted in :attr:`dropped` too)
    #: and a batch still in the air, whose fate is unknown.
    abandoned: int = 0


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
MAX_ID_BYTES = 256
MAX_META_BYTES = 1024


def check_id(id: object) -> None:
    """Refuses what the server would refuse in a member id (docs/API.md:
    1 to 256 bytes of UTF-8 without control characters). A batch with one
    bad heartbeat is refused whole, so the tracker checks each before
    queueing it: one odd visitor must not cost everyone's heartbeats."""
    if not isinstance(id, str) or not id:
        raise ValueError(f"member id {id!r} is not a non-empty str")
    if len(id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise ValueError(f"member id {id[:32]!r}… is over {MAX_ID_BYTES} bytes")
    if _CONTROL.search(id):
        raise ValueError(f"member id {id[:32]!r} holds a control character")


def check_meta(meta: Optional[Meta]) -> None:
    """Refuses metadata the server would refuse: not a JSON object, or
    over 1 KiB as compact JSON."""
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        raise ValueError(f"meta must be a JSON object (a mapping), not {type(meta).__name__}")
    try:
        text = json.dumps(meta, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"meta is not JSON: {e}") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_META_BYTES:
        raise ValueError(f"meta is {size} bytes of JSON; the limit is {MAX_META_BYTES}")


class _FailureLog:
    """Logs a failure at most once per interval, with what was lost since:
    a site whose herenow is down gets one line a minute, not one per
    request."""

    def __init__(self, logger: logging.Logger, interval: float, clock: Callable[[], float]) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self.lock = threading.Lock()
        self.last: Optional[float] = None
        self.lost_since = 0
        self.failing = False

    def failed(self, message: str, lost: int) -> None:
        with self.lock:
            self.lost_since += lost
            self.failing = True
            now = self.clock()
            if self.last is not None and now - self.last < self.interval:
                return
            self.last = now
            lost_since, self.lost_since = self.lost_since, 0
        lost_text = (
            f"; {lost_since} heartbeat(s) lost since the last such message" if lost_since else ""
        )
        self.logger.warning(
            "herenow: %s%s; driving on (the next such message in %.0f s at the earliest)",
            message,
            lost_text,
            self.interval,
        )

    def succeeded(self) -> None:
        with self.lock:
            was_failing, self.failing = self.failing, False
        if was_failing:
            self.logger.info("herenow: heartbeats are going through again")


class PresenceTracker:
    """Debounced, batched heartbeats from a background thread.

    Args:
        client: the :class:`~herenow.Client` to send with; one is made from
            ``base_url`` / ``api_key`` (short timeouts, no retries) if not
            given, and closed with the tracker.
        space: the default space of :meth:`track`.
        interval: at most one heartbeat per member per this many seconds
            (default 60; keep it under the space's ``online_ms``, 60 s by
            default, or members flicker to ``away`` between heartbeats).
        max_members: the debounce map's size cap.
        queue_size: the queue's size cap.
        batch_size: most heartbeats per request (at most 10,000).
        flush_interval: how long the sender gathers heartbeats into one
            batch (seconds, default 1): a batch goes out ``flush_interval``
            after the first heartbeat queued into it, or as soon as it
            holds ``batch_size``.
        close_timeout: how long :meth:`close` may take by default
            (seconds, default 1), however slow herenow is.
        log_interval: at most one failure line per this many seconds
            (default: ``interval``).
        clock: a monotonic clock in seconds; tests inject one.
        logger: where failures are logged (default ``herenow.tracker``).
        background: start the sender thread on the first :meth:`track`;
            ``False`` leaves sending to :meth:`flush` (tests, or a process
            that flushes from its own scheduler).
    """

    def __init__(
        self,
        client: Optional[Client] = None,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        space: str = "site",
        interval: float = 60.0,
        max_members: int = 100_000,
        queue_size: int = 10_000,
        batch_size: int = 1_000,
        flush_interval: float = 1.0,
        log_interval: Optional[float] = None,
        timeout: float = 5.0,
        close_timeout: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        logger: Optional[logging.Logger] = None,
        background: bool = True,
    ) -> None:
        if interval < 0:
            raise ValueError("interval must be >= 0")
        if max_members < 1 or queue_size < 1:
            raise ValueError("max_members and queue_size must be >= 1")
        if not 1 <= batch_size <= 10_000:
            raise ValueError("batch_size must be between 1 and 10,000")
        self._owns_client = client is None
        # Kept to make the client again in a forked child (see _after_fork).
        self._client_args: Dict[str, Any] = dict(
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            connect_timeout=min(timeout, 2.0),
            retries=0,
        )
        self.client = client if client is not None else Client(**self._client_args)
        self.space = space
        self.interval = interval
        self.max_members = max_members
        self.queue_size = queue_size
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.close_timeout = close_timeout
        self._clock = clock
        self._log = _FailureLog(
            logger or log, interval if log_interval is None else log_interval, clock
        )
        self._background = background

        self._new_locks()
        self._seen: "OrderedDict[_Key, float]" = OrderedDict()
        self._queue: Deque[Tuple[str, Heartbeat]] = deque()
        self._in_flight = 0
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        self._closed = False
        self._counts: Dict[str, int] = dict.fromkeys(
            ("tracked", "debounced", "queued", "sent", "dropped", "failures", "abandoned"), 0
        )
        _live.add(self)

    def _new_locks(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._send_lock = threading.Lock()  # one batch in flight at a time

    def _after_fork(self) -> None:
        """In a forked child (a prefork server's worker): the parent's
        thread does not exist here and its locks may be held by it, its
        queue is the parent's to send, and its sockets must not be shared.
        Start afresh; the thread starts again on the next track. A client
        given to the tracker is the caller's: make it after the fork."""
        self._new_locks()
        self._log.lock = threading.Lock()
        self._queue.clear()
        self._in_flight = 0
        self._thread = None
        if self._owns_client and not self._closed:
            self.client = Client(**self._client_args)

    # --- the request path ---------------------------------------------------

    def track(
        self,
        id: str,
        *,
        kind: Union[Kind, str] = Kind.USER,
        meta: Optional[Meta] = None,
        space: Optional[str] = None,
    ) -> bool:
        """Notes that member ``id`` is active; answers whether a heartbeat
        was queued (``False``: debounced, dropped, refused, or the tracker
        is closed). ``meta`` goes with the heartbeat it is queued with: a
        change within ``interval`` waits for the member's next heartbeat.
        Never raises and never blocks on the network."""
        try:
            return self._track(id, coerce_enum(Kind, kind, "kind"), meta, space or self.space)
        except Exception as e:  # never into the view
            self._log.failed(f"a heartbeat could not be queued ({type(e).__name__}: {e})", 1)
            return False

    def note_failure(self, message: str) -> None:
        """Logs a failure of the caller's own (a middleware's ``identify``
        hook, say) under the same once-per-interval rule, and drives on."""
        self._log.failed(message, 1)

    def _track(self, id: str, kind: Kind, meta: Optional[Meta], space: str) -> bool:
        check_id(id)
        key: _Key = (space, kind.value, id)
        now = self._clock()
        with self._lock:
            self._counts["tracked"] += 1
            if self._closed:
                return False
            self._expire(now)
            sent_at = self._seen.get(key)
            if sent_at is not None and now - sent_at < self.interval:
                self._counts["debounced"] += 1
                return False
            check_meta(meta)  # only when sending: json.dumps is not free
            if len(self._queue) >= self.queue_size:
                self._counts["dropped"] += 1
                self._seen.pop(key, None)
                full = True
            else:
                full = False
                self._seen[key] = now
                self._seen.move_to_end(key)
                while len(self._seen) > self.max_members:
                    self._seen.popitem(last=False)
                # A copy: the caller may change its dict before the send.
                beat = Heartbeat(id, kind, None if meta is None else dict(meta))
                self._queue.append((space, beat))
                self._counts["queued"] += 1
                # The sender waits for a first heartbeat, then gathers for
                # flush_interval or until a batch is full: wake it for those.
                if len(self._queue) == 1 or len(self._queue) >= self.batch_size:
                    self._wake.notify()
        if full:
            self._log.failed(f"the heartbeat queue is full ({self.queue_size})", 1)
            return False
        if self._background and self._thread is None:
            self._start()
        return True

    def _expire(self, now: float) -> None:
        # Entries are in the order they were sent, so the stale ones are
        # at the front.
        seen = self._seen
        while seen:
            key, at = next(iter(seen.items()))
            if now - at < self.interval:
                break
            seen.popitem(last=False)

    # --- sending ------------------------------------------------------------

    def flush(self) -> int:
        """Sends everything queued now, from the calling thread; answers how
        many heartbeats the server acknowledged. Never raises."""
        acknowledged = 0
        while True:
            batch = self._take()
            if not batch:
                return acknowledged
            acknowledged += self._send(batch)

    def _take(self) -> List[Tuple[str, Heartbeat]]:
        with self._lock:
            n = min(self.batch_size, len(self._queue))
            batch = [self._queue.popleft() for _ in range(n)]
            self._in_flight += n
            return batch

    def _send(self, batch: List[Tuple[str, Heartbeat]]) -> int:
        by_space: Dict[str, List[Heartbeat]] = {}
        for space, beat in batch:
            by_space.setdefault(space, []).append(beat)
        acknowledged = 0
        try:
            with self._send_lock:
                for space, beats in by_space.items():
                    try:
                        self.client.heartbeats(space, beats)
                    except Exception as e:
                        with self._lock:
                            self._counts["failures"] += 1
                            self._counts["dropped"] += len(beats)
                        self._log.failed(
                            f"sending {len(beats)} heartbeat(s) to {self.client.base_url} "
                            f"failed ({type(e).__name__}: {e})",
                            len(beats),
                        )
                    else:
                        acknowledged += len(beats)
                        with self._lock:
                            self._counts["sent"] += len(beats)
                        self._log.succeeded()
        finally:
            with self._lock:
                self._in_flight -= len(batch)
                self._idle.notify_all()
        return acknowledged

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name="herenow-heartbeats", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stopping:
                    self._wake.wait()
                if self._stopping and not self._queue:
                    return
                # Gather a batch: flush_interval from its first heartbeat,
                # unless it fills up or the tracker is closing first. (A
                # notify wakes this wait early: wait again for the rest.)
                deadline = time.monotonic() + self.flush_interval
                while len(self._queue) < self.batch_size and not self._stopping:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._wake.wait(left)
            try:
                self.flush()
            except Exception:  # flush never raises; belt and braces for the thread
                log.exception("herenow: the heartbeat thread hit a bug")

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Blocks until the queue is empty and no batch is in flight (or
        ``timeout`` seconds pass); answers whether it got there."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._queue or self._in_flight:
                if self._thread is None:
                    return False  # nobody would ever empty it
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    def close(self, timeout: Optional[float] = None) -> int:
        """Sends what is queued, stops the thread and closes the client if
        the tracker made it; later :meth:`track` calls queue nothing.
        Returns within ``timeout`` seconds (default ``close_timeout``, 1 s)
        however slow herenow is: what could not be sent by then is dropped
        and counted; answers that count (also :attr:`TrackerStats.abandoned`):
        the heartbeats still queued, and those of a batch still in the air."""
        if timeout is None:
            timeout = self.close_timeout
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
            self._stopping = True
            thread = self._thread
            if thread is None and self._queue and timeout > 0:
                # No sender thread (background=False, or nothing was sent
                # yet): send from one of our own, so the deadline holds.
                thread = threading.Thread(
                    target=self.flush, name="herenow-heartbeats-close", daemon=True
                )
                thread.start()
            self._wake.notify_all()
        if thread is not None:
            thread.join(max(deadline - time.monotonic(), 0.0))
        abandoned = lost = 0
        with self._lock:
            if self._queue or (thread is not None and thread.is_alive()):
                # herenow is slow or hanging (or timeout was 0): give up on
                # what is still queued, so the thread ends after the batch
                # in the air.
                lost = len(self._queue)
                self._queue.clear()
                self._counts["dropped"] += lost
                abandoned = lost + self._in_flight
                self._counts["abandoned"] += abandoned
        if abandoned:
            self._log.failed(
                f"closing after {timeout:g} s with {abandoned} heartbeat(s) unsent", lost
            )
        if self._owns_client and (thread is None or not thread.is_alive()):
            self.client.close()
        _live.discard(self)
        return abandoned

    # --- introspection ------------------------------------------------------

    def stats(self) -> TrackerStats:
        """The tracker's counters."""
        with self._lock:
            return TrackerStats(pending=len(self._queue), members=len(self._seen), **self._counts)

    def __repr__(self) -> str:
        return (
            f"PresenceTracker({self.client.base_url!r}, space={self.space!r}, "
            f"interval={self.interval})"
        )


_live: "weakref.WeakSet[PresenceTracker]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for tracker in list(_live):
        tracker._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_all() -> None:
    # Daemon threads die with the interpreter: send what is queued first.
    for tracker in list(_live):
        try:
            tracker.close()
        except Exception:  # pragma: no cover - exiting anyway
            pass
