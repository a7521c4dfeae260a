"""Live events and watched users over SSE, resuming after a dropped
stream; and the SSE decoder on its own."""

from __future__ import annotations

import threading
from typing import List

import httpx
import pytest
from conftest import Server, TcpProxy, uid

import herenow
from herenow import Kind, Reconnect, Status
from herenow.errors import HerenowError, ProtocolError
from herenow.events import SSEDecoder, parse_event

FAST = Reconnect(initial_delay=0.05, max_delay=0.2, jitter=0.0)


def test_space_events_snapshot_then_changes(client: herenow.Client, space: str) -> None:
    old = uid("old")
    client.heartbeat(space, old, meta={"name": "Old"})
    with client.events(space) as stream:
        snapshot = next(stream)
        assert isinstance(snapshot, herenow.Snapshot)
        assert snapshot.space == space and snapshot.resync is False
        assert [(m.id, m.meta) for m in snapshot.members] == [(old, {"name": "Old"})]
        assert snapshot.omitted == 0
        assert snapshot.config.online_ms == 60_000

        new = uid("new")
        client.heartbeat(space, new, kind="guest", meta={"device": "phone"})
        join = next(stream)
        assert isinstance(join, herenow.PresenceEvent)
        assert (join.type, join.id, join.kind, join.status) == (
            "join",
            new,
            Kind.GUEST,
            Status.ONLINE,
        )
        assert join.meta == {"device": "phone"} and join.space == space
        assert join.member.ref == herenow.MemberRef(new, Kind.GUEST)

        client.heartbeat(space, old, meta={"name": "Old", "busy": True})
        update = next(stream)
        assert (update.type, update.id, update.meta) == (
            "update",
            old,
            {"name": "Old", "busy": True},
        )

        client.leave(space, [old])
        leave = next(stream)
        assert (leave.type, leave.id, leave.status, leave.reason) == (
            "leave",
            old,
            Status.OFFLINE,
            "explicit",
        )
    assert stream.closed


def test_an_erasure_is_a_leave_event(client: herenow.Client, space: str) -> None:
    ann = uid("ann")
    client.heartbeat(space, ann)
    with client.events(space) as stream:
        assert [m.id for m in next(stream).members] == [ann]
        client.erase_user(ann)
        event = next(stream)
        assert (event.type, event.id, event.reason) == ("leave", ann, "explicit")


def test_the_stream_resumes_after_the_connection_drops(
    client: herenow.Client, proxy: TcpProxy, space: str
) -> None:
    a, b = uid("a"), uid("b")
    client.heartbeat(space, a)
    reconnects: List[float] = []
    policy = Reconnect(
        initial_delay=0.05, jitter=0.0, on_reconnect=lambda e, d: reconnects.append(d)
    )
    with (
        herenow.Client(proxy.url) as via_proxy,
        via_proxy.events(space, reconnect=policy) as stream,
    ):
        first = next(stream)
        assert [m.id for m in first.members] == [a] and not first.resync
        proxy.cut()  # the network drops
        client.heartbeat(space, b)  # a change the stream cannot see live
        fresh = next(stream)
        # A fresh picture, marked to replace what the reader knew, holding
        # the change made while the stream was down.
        assert isinstance(fresh, herenow.Snapshot) and fresh.resync is True
        assert {m.id for m in fresh.members} == {a, b}
        assert stream.reconnects == 1 and reconnects == [0.05]
        # And it goes on live.
        c = uid("c")
        client.heartbeat(space, c)
        assert next(stream).id == c
    assert proxy.accepted == 2


def test_the_stream_survives_a_server_restart(space: str) -> None:
    server = Server().start()
    try:
        with herenow.Client(server.url) as c, c.events(space, reconnect=FAST) as stream:
            assert isinstance(next(stream), herenow.Snapshot)  # connects
            c.heartbeat(space, "before")
            assert next(stream).id == "before"
            server.restart()  # SIGTERM ends the stream; a new, empty server
            c.heartbeat(space, "after")
            fresh = next(stream)
            assert isinstance(fresh, herenow.Snapshot) and fresh.resync
            assert [m.id for m in fresh.members] == ["after"]
    finally:
        server.stop()


def test_the_stream_waits_for_a_server_that_is_down(space: str) -> None:
    server = Server().start()
    failures = threading.Semaphore(0)
    policy = Reconnect(
        initial_delay=0.05, max_delay=0.1, jitter=0.0, on_reconnect=lambda e, d: failures.release()
    )
    try:
        with herenow.Client(server.url) as c, c.events(space, reconnect=policy) as stream:
            assert isinstance(next(stream), herenow.Snapshot)
            server.kill()
            got: List[object] = []
            reader = threading.Thread(target=lambda: got.append(next(stream)), daemon=True)
            reader.start()
            # The reader fails to reconnect at least twice while it is down.
            assert failures.acquire(timeout=10) and failures.acquire(timeout=10)
            server.start(server.port)
            c.heartbeat(space, "back")
            reader.join(10)
            assert len(got) == 1
            fresh = got[0]
            assert isinstance(fresh, herenow.Snapshot) and fresh.resync
            # The reader may have reconnected before or after "back" came.
            if not fresh.members:
                join = next(stream)
                assert (join.type, join.id) == ("join", "back")
            else:
                assert [m.id for m in fresh.members] == ["back"]
    finally:
        server.stop()


def test_reconnecting_gives_up_after_max_attempts(space: str) -> None:
    server = Server().start()
    try:
        policy = Reconnect(initial_delay=0.01, jitter=0.0, max_attempts=2)
        with herenow.Client(server.url) as c, c.events(space, reconnect=policy) as stream:
            next(stream)
            server.kill()
            with pytest.raises(herenow.TransportError):
                next(stream)
            assert stream.closed
    finally:
        server.stop()


def test_a_stream_that_cannot_open_raises_at_once(client: herenow.Client, dead_url: str) -> None:
    with pytest.raises(herenow.BadRequest) as e:
        next(client.events("bad space!"))
    assert e.value.code == "bad-space-name"
    with herenow.Client(dead_url) as down:
        with pytest.raises(herenow.TransportError):
            next(down.events("lobby"))


def test_watch_users_then_status_changes(client: herenow.Client, space: str) -> None:
    bob, cy = uid("bob"), uid("cy")
    client.heartbeat(space, bob)
    with client.watch([bob, cy]) as stream:
        page = next(stream)
        assert isinstance(page, herenow.WatchingPage)
        assert page.space is None and page.last and not page.resync
        states = {u.id: u for u in page.users}
        assert states[bob].status is Status.ONLINE and states[bob].space == space
        assert states[cy].status is Status.OFFLINE and states[cy].last_seen_ms is None

        client.heartbeat(space, cy)
        change = next(stream)
        assert isinstance(change, herenow.StatusChange)
        assert (change.id, change.status, change.space) == (cy, Status.ONLINE, space)

        client.leave(space, [bob])
        gone = next(stream)
        assert (gone.id, gone.status) == (bob, Status.OFFLINE)
        assert gone.last_seen_ms is not None


def test_watch_a_friend_set_as_it_changes(client: herenow.Client, space: str) -> None:
    ann, bob, dee = uid("ann"), uid("bob"), uid("dee")
    client.set_friends(ann, [bob])
    with client.watch(friends_of=ann, space=space) as stream:
        page = next(stream)
        assert page.space == space and [u.id for u in page.users] == [bob]
        client.add_friends(ann, [dee])
        added = next(stream)
        assert isinstance(added, herenow.WatchingPage) and [u.id for u in added.users] == [dee]
        client.remove_friends(ann, [bob])
        removed = next(stream)
        assert isinstance(removed, herenow.Unwatched) and removed.users == [bob]


def test_a_watch_resumes_with_a_resync(client: herenow.Client, proxy: TcpProxy, space: str) -> None:
    bob = uid("bob")
    with herenow.Client(proxy.url) as via_proxy, via_proxy.watch([bob], reconnect=FAST) as stream:
        assert next(stream).users[0].status is Status.OFFLINE
        proxy.cut()
        client.heartbeat(space, bob)
        fresh = next(stream)
        assert isinstance(fresh, herenow.WatchingPage) and fresh.resync and fresh.last
        assert [(u.id, u.status) for u in fresh.users] == [(bob, Status.ONLINE)]


# --- the decoder -------------------------------------------------------------


def test_decoder_reads_events_split_anywhere() -> None:
    text = (
        ": keep-alive\r\n"
        "event: join\r\n"
        'data: {"a":\r\n'
        "data: 1}\r\n"
        "id: 7\r\n"
        "retry: 1500\r\n"
        "\r\n"
        "data:no space\n\n"
        "event: x\rdata: y\r\r"
    )
    for size in (1, 2, 3, 7, len(text)):
        decoder = SSEDecoder()
        events = []
        for i in range(0, len(text), size):
            events.extend(decoder.feed(text[i : i + size]))
        assert [(e.event, e.data, e.id, e.retry) for e in events] == [
            ("join", '{"a":\n1}', "7", 1500),
            ("message", "no space", "7", 1500),
            ("x", "y", "7", 1500),
        ], size
        assert decoder.last_event_id == "7"


def test_decoder_ignores_events_without_data_and_unknown_fields() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("event: lonely\n\nfoo: bar\ndata: d\n\n") == [
        herenow.events.ServerSentEvent("message", "d")
    ]


def test_decoder_is_bounded() -> None:
    decoder = SSEDecoder(max_event_chars=100)
    with pytest.raises(ProtocolError):
        decoder.feed("data: " + "x" * 200)
    decoder = SSEDecoder(max_event_chars=100)
    with pytest.raises(ProtocolError):
        for _ in range(30):
            decoder.feed("data: 0123456789\n")


def test_parse_event_types_and_refuses_bad_shapes() -> None:
    assert parse_event("lagged", '{"missed": 5}') == herenow.Lagged(5)
    assert parse_event(
        "error", '{"code": "store-unavailable", "detail": "down"}'
    ) == herenow.StreamError("store-unavailable", "down")
    assert parse_event("someday", "{}") == herenow.UnknownEvent("someday", "{}")
    with pytest.raises(ProtocolError):
        parse_event("join", "not json")
    with pytest.raises(ProtocolError):
        parse_event("join", '{"space": "s", "id": "a", "kind": "robot", "status": "online"}')
    with pytest.raises(ProtocolError):
        parse_event("watching", '{"users": [], "last": "yes", "resync": false}')
    assert issubclass(ProtocolError, HerenowError)


def test_an_answer_that_is_not_an_event_stream_is_a_protocol_error() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, html="<p>login</p>"))
    with herenow.Client("http://h.test", transport=transport) as c:
        with pytest.raises(ProtocolError) as e:
            next(c.events("lobby"))
    assert "text/event-stream" in str(e.value)


def test_a_stream_sends_last_event_id_back_when_the_server_gives_ids() -> None:
    """herenow sends no ids today; SSE says a client resumes from the last
    one, and this client will, should the server start sending them."""
    seen: List[httpx.Request] = []
    bodies = iter(
        [
            b'id: 41\nevent: lagged\ndata: {"missed": 1}\n\n',
            b'event: lagged\ndata: {"missed": 2}\n\n',
        ]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=next(bodies)
        )

    with herenow.Client("http://h.test", transport=httpx.MockTransport(handler)) as c:
        with c.events("lobby", reconnect=FAST) as stream:
            assert next(stream) == herenow.Lagged(1)
            assert next(stream) == herenow.Lagged(2)  # after the stream ended and came back
            assert stream.last_event_id == "41" and stream.reconnects == 1
    assert "last-event-id" not in seen[0].headers
    assert seen[1].headers["last-event-id"] == "41"
    assert seen[1].headers["accept"] == "text/event-stream"
