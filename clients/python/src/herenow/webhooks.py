"""Receiving herenow's webhooks: verify the signature, then read the events.

herenow signs each webhook request the `Standard Webhooks
<https://www.standardwebhooks.com/>`_ way (docs/API.md, "Webhooks"):

- ``webhook-id``: the message id, the same on every retry of a batch;
- ``webhook-timestamp``: the attempt's time, integer Unix seconds;
- ``webhook-signature``: space-separated ``v1,<base64>`` signatures, each
  the HMAC-SHA256 of ``{id}.{timestamp}.{body}`` under the secret's bytes
  (the secret is written ``whsec_`` and their base64).

:func:`verify` checks all three (a timestamp more than ``tolerance``
seconds away from now, 5 minutes by default, is refused: a captured
request cannot be replayed later) and answers the body's bytes;
:func:`parse` reads those bytes as a typed :class:`WebhookBatch`;
:func:`receive` does both. A request that fails raises
:class:`WebhookVerificationError` (or :class:`WebhookPayloadError` for a
signed body that is not herenow's), never anything else.

Delivery is at least once: an event may arrive twice, with the same
``id``. :class:`Deduplicator` is a bounded memory of event ids for a
single process; a site with several workers deduplicates in its database
(a unique index on the event id) instead.

For Django, :func:`herenow.django.webhooks.webhook_view` wraps all of it
in a view.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .errors import HerenowError, InvalidArgument
from .models import Kind, Status

__all__ = [
    "DEFAULT_TOLERANCE",
    "SECRET_PREFIX",
    "WebhookError",
    "WebhookVerificationError",
    "WebhookPayloadError",
    "WebhookEventType",
    "WebhookEvent",
    "WebhookBatch",
    "Secret",
    "verify",
    "parse",
    "receive",
    "sign",
    "Deduplicator",
]

#: Seconds a ``webhook-timestamp`` may be away from now (either way).
DEFAULT_TOLERANCE = 5 * 60

#: How a Standard Webhooks secret is written.
SECRET_PREFIX = "whsec_"

#: The body's ``type``.
BODY_TYPE = "presence.events"

# Bounds on what a request may make us parse: far above what herenow
# sends (one signature, a 36-byte id, a 10-digit timestamp), far below
# what would cost anything.
_MAX_ID = 256
_MAX_TIMESTAMP_DIGITS = 12
_MAX_SIGNATURE_HEADER = 8 * 1024
_MAX_SIGNATURES = 32

Headers = Union[Mapping[str, str], Iterable[Tuple[str, str]]]
SecretLike = Union[str, bytes, "Secret"]


class WebhookError(HerenowError):
    """Base of the webhook receiver's errors."""


class WebhookVerificationError(WebhookError):
    """The request is not a genuine, fresh herenow webhook: answer it
    ``400``/``401`` and do nothing with its body.

    Attributes:
        reason: why, stable and machine-readable: ``missing-header``,
            ``bad-header``, ``timestamp-too-old``, ``timestamp-too-new`` or
            ``no-matching-signature``.
    """

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {message}")


class WebhookPayloadError(WebhookError):
    """A correctly signed body that is not a herenow ``presence.events``
    batch (a newer server's format, or a sender sharing the secret)."""


# --- the secret -------------------------------------------------------------


class Secret:
    """A webhook secret: ``whsec_`` and base64 (the prefix may be left
    out), or the raw key bytes. Decoded once; its ``repr`` hides it."""

    __slots__ = ("_key",)

    def __init__(self, secret: Union[str, bytes]) -> None:
        if isinstance(secret, bytes):
            key = secret
        elif isinstance(secret, str):
            text = secret.strip()
            if text.startswith(SECRET_PREFIX):
                text = text[len(SECRET_PREFIX) :]
            try:
                key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
            except (binascii.Error, ValueError):
                raise InvalidArgument(
                    "a webhook secret is whsec_ and base64; what follows whsec_ is not base64"
                ) from None
        else:
            raise InvalidArgument(
                f"a webhook secret is a str or bytes, not {type(secret).__name__}"
            )
        if not key:
            raise InvalidArgument("the webhook secret is empty")
        self._key = key

    @classmethod
    def of(cls, value: SecretLike) -> "Secret":
        return value if isinstance(value, Secret) else cls(value)

    def digest(self, msg_id: str, timestamp: str, body: bytes) -> bytes:
        """The HMAC-SHA256 of ``{msg_id}.{timestamp}.{body}``."""
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        mac.update(msg_id.encode())
        mac.update(b".")
        mac.update(timestamp.encode())
        mac.update(b".")
        mac.update(body)
        return mac.digest()

    def __repr__(self) -> str:
        return "Secret(***)"


def _secrets(secret: Union[SecretLike, Sequence[SecretLike]]) -> List[Secret]:
    """One secret, or several (a rotation: the old and the new)."""
    if isinstance(secret, (str, bytes, Secret)):
        return [Secret.of(secret)]
    if not isinstance(secret, (list, tuple)):
        raise InvalidArgument(
            f"a webhook secret is a str, bytes or a list of them, not {type(secret).__name__}"
        )
    out = [Secret.of(s) for s in secret]
    if not out:
        raise InvalidArgument("no webhook secret given")
    return out


def sign(secret: SecretLike, msg_id: str, timestamp: int, body: Union[bytes, str]) -> str:
    """The ``webhook-signature`` value herenow would send: ``v1,<base64>``.
    For tests of a receiver."""
    data = body.encode() if isinstance(body, str) else bytes(body)
    digest = Secret.of(secret).digest(msg_id, str(int(timestamp)), data)
    return "v1," + base64.b64encode(digest).decode("ascii")


# --- verification -----------------------------------------------------------


def _header(headers: Headers, name: str) -> Optional[str]:
    """Header ``name``, whatever its case (Django's ``request.headers``,
    a plain dict, a list of pairs)."""
    if isinstance(headers, Mapping):
        value = headers.get(name)
        if value is None:
            for k, v in headers.items():
                if isinstance(k, str) and k.lower() == name:
                    return str(v)
            return None
        return str(value)
    for k, v in headers:
        if k.lower() == name:
            return str(v)
    return None


def _required(headers: Headers, name: str) -> str:
    value = _header(headers, name)
    if value is None or not value.strip():
        raise WebhookVerificationError("missing-header", f"no {name} header")
    return value.strip()


def verify(
    headers: Headers,
    body: Union[bytes, str],
    secret: Union[SecretLike, Sequence[SecretLike]],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: Optional[float] = None,
) -> bytes:
    """Checks a webhook request's Standard Webhooks signature and answers
    its body's bytes, exactly as signed.

    Args:
        headers: the request's headers (any case).
        body: the raw body, before any JSON parsing (bytes as received).
        secret: the endpoint's ``whsec_…`` secret, or several while
            rotating it (any one may match).
        tolerance: seconds the timestamp may be away from ``now``.
        now: the current Unix time in seconds (tests); default the clock.

    Raises:
        WebhookVerificationError: a header missing or malformed, a
            timestamp out of tolerance, or no ``v1`` signature matching.
        InvalidArgument: the secret itself is unusable (a configuration
            error, not the request's fault).
    """
    keys = _secrets(secret)
    if tolerance < 0:
        raise InvalidArgument("tolerance must be >= 0")
    data = body.encode() if isinstance(body, str) else bytes(body)

    msg_id = _required(headers, "webhook-id")
    stamp = _required(headers, "webhook-timestamp")
    signatures = _required(headers, "webhook-signature")
    if len(msg_id) > _MAX_ID:
        raise WebhookVerificationError("bad-header", "webhook-id is too long")
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= _MAX_TIMESTAMP_DIGITS):
        raise WebhookVerificationError(
            "bad-header", "webhook-timestamp is not integer Unix seconds"
        )
    if len(signatures) > _MAX_SIGNATURE_HEADER:
        raise WebhookVerificationError("bad-header", "webhook-signature is too long")

    # Freshness first: an old request is refused whoever signed it.
    at = int(stamp)
    clock = time.time() if now is None else now
    if at < clock - tolerance:
        raise WebhookVerificationError(
            "timestamp-too-old", f"webhook-timestamp is {int(clock - at)} s old"
        )
    if at > clock + tolerance:
        raise WebhookVerificationError(
            "timestamp-too-new", f"webhook-timestamp is {int(at - clock)} s ahead"
        )

    offered: List[bytes] = []
    for entry in signatures.split()[:_MAX_SIGNATURES]:
        version, sep, encoded = entry.partition(",")
        if not sep or version != "v1":
            continue  # another scheme (v1a: asymmetric), or noise
        try:
            offered.append(base64.b64decode(encoded, validate=True))
        except (binascii.Error, ValueError):
            continue
    if not offered:
        raise WebhookVerificationError("no-matching-signature", "no v1 signature in the request")
    matched = False
    for key in keys:
        expected = key.digest(msg_id, stamp, data)
        for candidate in offered:
            # Constant time, and every candidate compared: how many
            # signatures matched, or which, is not timed.
            matched |= hmac.compare_digest(expected, candidate)
    if not matched:
        raise WebhookVerificationError(
            "no-matching-signature", "no signature matches the secret"
        )
    return data


# --- the payload ------------------------------------------------------------


class WebhookEventType(str, Enum):
    """What happened: a member's ``join`` … ``update``, or a space's
    ``occupied`` (its first member came) / ``vacated`` (its last left)."""

    JOIN = "join"
    LEAVE = "leave"
    AWAY = "away"
    BACK = "back"
    UPDATE = "update"
    OCCUPIED = "occupied"
    VACATED = "vacated"


@dataclass(frozen=True)
class WebhookEvent:
    """One event of a webhook batch (docs/API.md, "Webhooks").

    Member events (``join``, ``leave``, ``away``, ``back``, ``update``)
    carry ``member``, ``kind``, ``status`` (after the event) and
    ``last_seen_ms``, ``meta`` when the member has metadata and ``conn``
    when a live connection caused it; a ``leave`` says why in ``reason``
    (``explicit``, ``closed``, ``timeout``, ``expired``). ``occupied`` and
    ``vacated`` have none of them. An event type this client does not know
    (a newer server's) is kept as its string.
    """

    id: str
    type: Union[WebhookEventType, str]
    space: str
    at_ms: int
    member: Optional[str] = None
    kind: Optional[Kind] = None
    status: Optional[Status] = None
    last_seen_ms: Optional[int] = None
    meta: Optional[Dict[str, Any]] = None
    conn: Optional[str] = None
    reason: Optional[str] = None
    #: The event as sent, fields this client does not know included.
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_member_event(self) -> bool:
        return self.member is not None


@dataclass(frozen=True)
class WebhookBatch:
    """One webhook request's body: up to 100 events, each member's in
    order. ``webhook_id`` (the ``webhook-id`` header, when known) is the
    same on every retry of this batch."""

    type: str
    timestamp: str
    events: List[WebhookEvent]
    webhook_id: Optional[str] = None


def _field(obj: Mapping[str, Any], name: str, kind: Any, optional: bool = False) -> Any:
    value = obj.get(name)
    if value is None:
        if optional:
            return None
        raise WebhookPayloadError(f"an event has no {name!r}")
    if kind is int and isinstance(value, bool):
        raise WebhookPayloadError(f"{name!r} is not an integer")
    if not isinstance(value, kind):
        raise WebhookPayloadError(f"{name!r} is not {getattr(kind, '__name__', kind)}")
    return value


def _enum(enum: Any, value: Optional[str], name: str) -> Any:
    if value is None:
        return None
    try:
        return enum(value)
    except ValueError:
        raise WebhookPayloadError(f"{name!r} is {value!r}") from None


def _event(obj: Any) -> WebhookEvent:
    if not isinstance(obj, dict):
        raise WebhookPayloadError("an event is not a JSON object")
    type_ = _field(obj, "type", str)
    try:
        typed: Union[WebhookEventType, str] = WebhookEventType(type_)
    except ValueError:
        typed = type_  # a newer server's event: kept, not refused
    meta = _field(obj, "meta", dict, optional=True)
    return WebhookEvent(
        id=_field(obj, "id", str),
        type=typed,
        space=_field(obj, "space", str),
        at_ms=_field(obj, "at_ms", int),
        member=_field(obj, "member", str, optional=True),
        kind=_enum(Kind, _field(obj, "kind", str, optional=True), "kind"),
        status=_enum(Status, _field(obj, "status", str, optional=True), "status"),
        last_seen_ms=_field(obj, "last_seen_ms", int, optional=True),
        meta=meta,
        conn=_field(obj, "conn", str, optional=True),
        reason=_field(obj, "reason", str, optional=True),
        raw=obj,
    )


def parse(body: Union[bytes, str], *, webhook_id: Optional[str] = None) -> WebhookBatch:
    """Reads a verified body as a :class:`WebhookBatch`.

    Raises:
        WebhookPayloadError: not JSON, or not a ``presence.events`` batch.
    """
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise WebhookPayloadError(f"the body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise WebhookPayloadError("the body is not a JSON object")
    if doc.get("type") != BODY_TYPE:
        raise WebhookPayloadError(f"the body's type is {doc.get('type')!r}, not {BODY_TYPE!r}")
    data = doc.get("data")
    events = data.get("events") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise WebhookPayloadError("the body has no data.events list")
    timestamp = doc.get("timestamp")
    return WebhookBatch(
        type=BODY_TYPE,
        timestamp=timestamp if isinstance(timestamp, str) else "",
        events=[_event(e) for e in events],
        webhook_id=webhook_id,
    )


def receive(
    headers: Headers,
    body: Union[bytes, str],
    secret: Union[SecretLike, Sequence[SecretLike]],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: Optional[float] = None,
) -> WebhookBatch:
    """:func:`verify`, then :func:`parse`: a request's typed events, or a
    :class:`WebhookError`."""
    data = verify(headers, body, secret, tolerance=tolerance, now=now)
    return parse(data, webhook_id=_header(headers, "webhook-id"))


# --- at least once ----------------------------------------------------------


class Deduplicator:
    """Remembers the ids of the last ``max_entries`` events handled, so a
    redelivered event is recognised (within one process). Thread-safe;
    the oldest id is forgotten first.

    ::

        seen = Deduplicator()
        for event in seen.fresh(batch.events):
            handle(event)
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise InvalidArgument("max_entries must be >= 1")
        self.max_entries = max_entries
        self._ids: "OrderedDict[str, None]" = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, event_id: str) -> bool:
        """True the first time ``event_id`` is seen (and remembers it)."""
        with self._lock:
            if event_id in self._ids:
                self._ids.move_to_end(event_id)
                return False
            self._ids[event_id] = None
            while len(self._ids) > self.max_entries:
                self._ids.popitem(last=False)
            return True

    def fresh(self, events: Iterable[WebhookEvent]) -> List[WebhookEvent]:
        """The events not seen before, in order."""
        return [e for e in events if self.first_time(e.id)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)
