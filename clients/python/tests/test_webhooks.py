"""herenow.webhooks: Standard Webhooks verification (the specification's
published test vector, tampering, freshness, malformed headers), the
payload's types, deduplication, a cross-check against the reference
library ``standardwebhooks`` when it is installed, and, when the server
binary sends webhooks, a real delivery from ``herenow serve``."""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from conftest import Server, server_binary

import herenow
from herenow import EndpointHealth, Kind, Status
from herenow.webhooks import (
    Deduplicator,
    Secret,
    WebhookBatch,
    WebhookEventType,
    WebhookPayloadError,
    WebhookVerificationError,
    parse,
    receive,
    sign,
    verify,
)

# The Standard Webhooks specification's published test vector (the
# reference libraries' tests, e.g. libraries/python/tests/test_webhooks.py
# of github.com/standard-webhooks/standard-webhooks); herenow's own signer
# is tested against the same one (crates/herenow-server/src/webhooks/sign.rs).
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
PAYLOAD = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
WRONG_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="  # the vector's, one bit off


def headers(**override: str) -> Dict[str, str]:
    h = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(TIMESTAMP),
        "webhook-signature": SIGNATURE,
    }
    h.update({k.replace("_", "-"): v for k, v in override.items()})
    return h


def refused(reason: str, hdrs: Any, body: Any = PAYLOAD, secret: Any = SECRET, **kw: Any) -> None:
    kw.setdefault("now", TIMESTAMP)
    with pytest.raises(WebhookVerificationError) as e:
        verify(hdrs, body, secret, **kw)
    assert e.value.reason == reason
    assert isinstance(e.value, herenow.HerenowError)


# --- the published vector -------------------------------------------------


def test_the_published_vector_signs_and_verifies() -> None:
    assert sign(SECRET, MSG_ID, TIMESTAMP, PAYLOAD) == SIGNATURE
    assert verify(headers(), PAYLOAD, SECRET, now=TIMESTAMP) == PAYLOAD
    # The body as text, the secret without its prefix or as raw bytes.
    assert verify(headers(), PAYLOAD.decode(), SECRET, now=TIMESTAMP) == PAYLOAD
    assert verify(headers(), PAYLOAD, SECRET[len("whsec_") :], now=TIMESTAMP) == PAYLOAD
    raw = base64.b64decode(SECRET[len("whsec_") :])
    assert verify(headers(), PAYLOAD, raw, now=TIMESTAMP) == PAYLOAD


def test_the_published_wrong_signature_is_refused() -> None:
    refused("no-matching-signature", headers(webhook_signature=WRONG_SIGNATURE))


def test_a_tampered_request_is_refused() -> None:
    refused("no-matching-signature", headers(), body=b'{"test": 2432232315}')
    refused("no-matching-signature", headers(), body=PAYLOAD + b" ")
    refused("no-matching-signature", headers(webhook_id="msg_other"))
    # The timestamp is signed: moving it (within the tolerance) breaks it.
    refused("no-matching-signature", headers(webhook_timestamp=str(TIMESTAMP + 1)))
    other = "whsec_" + base64.b64encode(b"another secret of 24 byte").decode()
    refused("no-matching-signature", headers(), secret=other)


def test_several_signatures_and_secrets() -> None:
    mixed = " ".join(
        [
            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
            "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
            "v1a,not-ours",
            "garbage",
            "v1,***not base64***",
            SIGNATURE,
        ]
    )
    assert verify(headers(webhook_signature=mixed), PAYLOAD, SECRET, now=TIMESTAMP) == PAYLOAD
    # Only other schemes or broken entries: nothing to match.
    refused("no-matching-signature", headers(webhook_signature="v1a,abc v2,abc junk"))
    # Rotating the receiver's secret: any one of the list may match.
    old = "whsec_" + base64.b64encode(b"the old secret, 24 bytes").decode()
    assert verify(headers(), PAYLOAD, [old, SECRET], now=TIMESTAMP) == PAYLOAD
    refused("no-matching-signature", headers(), secret=[old])


def test_headers_in_any_case_and_shape() -> None:
    upper = {k.title(): v for k, v in headers().items()}  # Webhook-Id, …
    assert verify(upper, PAYLOAD, SECRET, now=TIMESTAMP) == PAYLOAD
    assert verify(list(headers().items()), PAYLOAD, SECRET, now=TIMESTAMP) == PAYLOAD


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_or_empty_header_is_refused(name: str) -> None:
    h = headers()
    del h[name]
    refused("missing-header", h)
    refused("missing-header", {**headers(), name: "  "})


@pytest.mark.parametrize(
    "stamp", ["hello", "1614265330.0", "-1614265330", "1e9", "", "١٦١٤٢٦٥٣٣٠", "9" * 13]
)
def test_a_timestamp_that_is_not_integer_seconds_is_refused(stamp: str) -> None:
    reason = "missing-header" if not stamp else "bad-header"
    refused(reason, headers(webhook_timestamp=stamp))


def test_freshness_within_the_tolerance_either_way() -> None:
    assert verify(headers(), PAYLOAD, SECRET, now=TIMESTAMP + 300) == PAYLOAD
    assert verify(headers(), PAYLOAD, SECRET, now=TIMESTAMP - 300) == PAYLOAD
    refused("timestamp-too-old", headers(), now=TIMESTAMP + 301)
    refused("timestamp-too-new", headers(), now=TIMESTAMP - 301)
    # A stale request is refused even with a valid signature, and a
    # tolerance of one's own applies.
    refused("timestamp-too-old", headers(), now=TIMESTAMP + 11, tolerance=10)
    # Without `now`, the clock: the vector (2021) is long stale.
    with pytest.raises(WebhookVerificationError) as e:
        verify(headers(), PAYLOAD, SECRET)
    assert e.value.reason == "timestamp-too-old"


def test_oversized_headers_are_refused_before_any_work() -> None:
    refused("bad-header", headers(webhook_id="m" * 257))
    refused("bad-header", headers(webhook_signature=(SIGNATURE + " ") * 200))


def test_an_unusable_secret_is_a_configuration_error() -> None:
    for bad in ["whsec_not base64!", "whsec_", "", b""]:
        with pytest.raises(herenow.InvalidArgument):
            verify(headers(), PAYLOAD, bad, now=TIMESTAMP)
    with pytest.raises(herenow.InvalidArgument):
        verify(headers(), PAYLOAD, [], now=TIMESTAMP)
    with pytest.raises(herenow.InvalidArgument):
        verify(headers(), PAYLOAD, 42, now=TIMESTAMP)  # type: ignore[arg-type]
    assert "MfKQ" not in repr(Secret(SECRET))


# --- the payload ------------------------------------------------------------

# docs/API.md's example body.
API_BODY = {
    "type": "presence.events",
    "timestamp": "2026-11-22T10:00:00.000Z",
    "data": {
        "events": [
            {
                "id": "8c1f-17",
                "type": "join",
                "space": "lobby",
                "at_ms": 1700000000000,
                "member": "ann",
                "kind": "user",
                "status": "online",
                "last_seen_ms": 1700000000000,
                "meta": {"page": "/"},
            },
            {
                "id": "8c1f-18",
                "type": "leave",
                "space": "lobby",
                "at_ms": 1700000090000,
                "member": "bob",
                "kind": "user",
                "status": "offline",
                "last_seen_ms": 1700000080000,
                "reason": "closed",
                "conn": "tab-1",
            },
            {"id": "8c1f-19", "type": "vacated", "space": "lobby", "at_ms": 1700000090000},
        ]
    },
}


def signed(body: Dict[str, Any], now: int = TIMESTAMP) -> Tuple[Dict[str, str], bytes]:
    raw = json.dumps(body).encode()
    msg = f"msg_{uuid.uuid4().hex}"
    return (
        {
            "webhook-id": msg,
            "webhook-timestamp": str(now),
            "webhook-signature": sign(SECRET, msg, now, raw),
        },
        raw,
    )


def test_the_documented_body_parses_into_typed_events() -> None:
    hdrs, raw = signed(API_BODY)
    batch = receive(hdrs, raw, SECRET, now=TIMESTAMP)
    assert isinstance(batch, WebhookBatch)
    assert (batch.type, batch.timestamp, batch.webhook_id) == (
        "presence.events",
        "2026-11-22T10:00:00.000Z",
        hdrs["webhook-id"],
    )
    join, leave, vacated = batch.events
    assert join.type is WebhookEventType.JOIN and join.type == "join"
    assert (join.member, join.kind, join.status) == ("ann", Kind.USER, Status.ONLINE)
    assert (join.at_ms, join.last_seen_ms, join.meta, join.reason) == (
        1700000000000,
        1700000000000,
        {"page": "/"},
        None,
    )
    assert join.is_member_event
    assert (leave.type, leave.status, leave.reason, leave.conn) == (
        WebhookEventType.LEAVE,
        Status.OFFLINE,
        "closed",
        "tab-1",
    )
    assert vacated.type is WebhookEventType.VACATED and vacated.space == "lobby"
    assert not vacated.is_member_event
    assert (vacated.member, vacated.kind, vacated.status, vacated.last_seen_ms) == (
        None,
        None,
        None,
        None,
    )


def test_a_newer_servers_event_type_and_fields_are_kept() -> None:
    body = {
        "type": "presence.events",
        "timestamp": "t",
        "data": {
            "events": [
                {"id": "e1", "type": "teleport", "space": "s", "at_ms": 1, "colour": "red"}
            ]
        },
    }
    (event,) = parse(json.dumps(body)).events
    assert event.type == "teleport" and not isinstance(event.type, WebhookEventType)
    assert event.raw["colour"] == "red"


def one_event(event: bytes) -> bytes:
    return b'{"type": "presence.events", "data": {"events": [' + event + b"]}}"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        b'{"type": "something.else", "data": {"events": []}}',
        b'{"type": "presence.events"}',
        b'{"type": "presence.events", "data": {"events": {}}}',
        b'{"type": "presence.events", "data": {"events": [1]}}',
        one_event(b'{"type": "join", "space": "s", "at_ms": 1}'),  # no id
        one_event(b'{"id": "e", "type": "join", "space": "s", "at_ms": true}'),
        one_event(b'{"id": "e", "type": "join", "space": "s", "at_ms": "1"}'),
        one_event(b'{"id": "e", "type": "join", "space": "s", "at_ms": 1, "kind": "robot"}'),
        one_event(b'{"id": "e", "type": "join", "space": "s", "at_ms": 1, "meta": []}'),
    ],
)
def test_a_signed_body_that_is_not_a_batch_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(WebhookPayloadError):
        parse(body)
    # And through receive: the signature is fine, the payload is not.
    msg = "msg_x"
    hdrs = {
        "webhook-id": msg,
        "webhook-timestamp": str(TIMESTAMP),
        "webhook-signature": sign(SECRET, msg, TIMESTAMP, body),
    }
    with pytest.raises(WebhookPayloadError):
        receive(hdrs, body, SECRET, now=TIMESTAMP)


def test_the_deduplicator_is_bounded_and_forgets_the_oldest() -> None:
    batch = parse(json.dumps(API_BODY))
    seen = Deduplicator(max_entries=3)
    assert [e.id for e in seen.fresh(batch.events)] == ["8c1f-17", "8c1f-18", "8c1f-19"]
    assert seen.fresh(batch.events) == []  # a redelivery
    assert seen.first_time("new") is True  # 8c1f-17 is now forgotten…
    assert len(seen) == 3
    assert seen.first_time("8c1f-17") is True  # …and so seen as new again
    assert seen.first_time("new") is False
    with pytest.raises(ValueError):
        Deduplicator(max_entries=0)


# --- the reference implementation -------------------------------------------


def test_agrees_with_the_reference_library() -> None:
    sw = pytest.importorskip("standardwebhooks")
    from datetime import datetime, timezone

    import time as _time

    now = int(_time.time())
    theirs = sw.Webhook(SECRET)
    for i in range(20):
        body = json.dumps({"n": i, "text": "é" * i, "events": list(range(i))})
        msg = f"msg_{uuid.uuid4().hex}"
        ours = sign(SECRET, msg, now, body)
        assert ours == theirs.sign(msg, datetime.fromtimestamp(now, tz=timezone.utc), body)
        hdrs = {"webhook-id": msg, "webhook-timestamp": str(now), "webhook-signature": ours}
        # Each accepts what the other signed, and refuses the same tampering.
        assert theirs.verify(body, hdrs) == json.loads(body)
        assert verify(hdrs, body, SECRET) == body.encode()
        tampered = body + " "
        with pytest.raises(sw.WebhookVerificationError):
            theirs.verify(tampered, hdrs)
        with pytest.raises(WebhookVerificationError):
            verify(hdrs, tampered, SECRET)


# --- a real server's webhooks -------------------------------------------------


def _server_sends_webhooks() -> bool:
    try:
        help_text = subprocess.run(
            [server_binary(), "serve", "--help"], capture_output=True, text=True, timeout=10
        ).stdout
    except Exception:
        return False
    return "--webhook-secret" in help_text


class _Receiver:
    """An HTTP endpoint that keeps every request (headers, body) and
    answers 204."""

    def __init__(self) -> None:
        self.requests: "queue.Queue[Tuple[Dict[str, str], bytes]]" = queue.Queue(maxsize=1000)
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                received.put((dict(self.headers.items()), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hooks/presence"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def events(self, want: int, timeout: float = 20.0) -> List[Any]:
        """Verified events until ``want`` have come (each request checked
        as it arrives); bounded by ``timeout`` per request."""
        out: List[Any] = []
        while len(out) < want:
            hdrs, body = self.requests.get(timeout=timeout)
            out.extend(receive(hdrs, body, SECRET).events)
        return out

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    r = _Receiver()
    yield r
    r.close()


@pytest.mark.skipif(
    not _server_sends_webhooks(), reason="this herenow binary predates webhooks (--webhook)"
)
def test_a_real_servers_webhooks_verify_and_parse(receiver: _Receiver) -> None:
    server = Server("--webhook", receiver.url, "--webhook-secret", SECRET).start()
    try:
        space = f"wh-{uuid.uuid4().hex[:8]}"
        with herenow.Client(server.url) as hn:
            hn.heartbeat(space, "ann", meta={"page": "/"})
            hn.leave(space, ["ann"])
            events = receiver.events(want=4)  # occupied, join, leave, vacated
            state = hn.webhooks()
    finally:
        server.stop()
    mine = [e for e in events if e.space == space]
    by_type = {e.type: e for e in mine}
    assert set(by_type) == {
        WebhookEventType.OCCUPIED,
        WebhookEventType.JOIN,
        WebhookEventType.LEAVE,
        WebhookEventType.VACATED,
    }
    join, leave = by_type[WebhookEventType.JOIN], by_type[WebhookEventType.LEAVE]
    assert (join.member, join.kind, join.status, join.meta) == (
        "ann",
        Kind.USER,
        Status.ONLINE,
        {"page": "/"},
    )
    assert (leave.member, leave.status, leave.reason) == ("ann", Status.OFFLINE, "explicit")
    assert isinstance(leave.last_seen_ms, int) and leave.at_ms >= join.at_ms
    # ann's events in order: join before leave.
    assert mine.index(join) < mine.index(leave)
    assert len({e.id for e in mine}) == len(mine)
    # GET /v1/webhooks, typed.
    assert state.enabled and isinstance(state.consumer, str)
    (endpoint,) = state.endpoints
    assert endpoint.url == receiver.url and endpoint.spaces is None
    assert set(endpoint.events) >= {"join", "leave", "occupied", "vacated"}
    assert isinstance(endpoint.state, EndpointHealth)
    assert endpoint.queue_limit == 10_000 and endpoint.dropped_rejected == 0
    assert isinstance(state.outbox_depth, int)


@pytest.mark.skipif(
    not _server_sends_webhooks(), reason="this herenow binary predates webhooks (--webhook)"
)
def test_webhooks_state_of_a_server_without_webhooks(client: herenow.Client) -> None:
    state = client.webhooks()
    assert (state.enabled, state.consumer, state.endpoints, state.outbox_depth) == (
        False,
        None,
        [],
        None,
    )

