"""The asyncio client against the real server (run with ``asyncio.run``:
no plugin needed)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, List, TypeVar

import httpx
import pytest
from conftest import Server, TcpProxy, uid

import herenow
from herenow import Kind, Reconnect, SpaceConfig, Status

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(main())


def test_async_heartbeat_online_status_and_friends(server: Server, space: str) -> None:
    ann, bob, nobody = uid("ann"), uid("bob"), uid("nobody")

    async def main() -> None:
        async with herenow.AsyncClient(server.url) as c:
            assert (await c.heartbeat(space, ann, meta={"name": "Ann"})).joined == 1
            assert (
                await c.heartbeats(space, [bob, herenow.Heartbeat("g1", Kind.GUEST)])
            ).accepted == 2
            page = await c.online(space, kind="all", order="id")
            assert [m.id for m in page.members] == sorted([ann, bob, "g1"])
            assert [m.id async for m in c.iter_online(space, order="id", page_size=1)] == sorted(
                [ann, bob]
            )
            assert (await c.count(space)).total == 3
            unknown = await c.member(space, nobody)
            assert (unknown.status, unknown.last_seen_ms) == (Status.OFFLINE, None)
            statuses = await c.status(space, [ann, nobody])
            assert [m.status for m in statuses] == [Status.ONLINE, Status.OFFLINE]
            assert [m.id for m in await c.online_among(space, [nobody, bob])] == [bob]

            assert await c.set_friends(ann, [bob, nobody]) == 2
            assert await c.add_friends(ann, ["x"]) == 3
            assert await c.remove_friends(ann, ["x"]) == 2
            assert sorted((await c.friends(ann)).friends) == sorted([bob, nobody])
            assert [m.id for m in await c.online_friends(space, ann)] == [bob]

            users = await c.users_status([ann, nobody])
            assert [(u.id, u.status) for u in users] == [
                (ann, Status.ONLINE),
                (nobody, Status.OFFLINE),
            ]
            assert (await c.user(ann)).space == space
            assert await c.leave(space, [bob]) == 1
            assert (await c.erase_user(ann)).presence == 1
            assert (await c.user(ann)).last_seen_ms is None

            cfg = await c.set_config(
                space, SpaceConfig(30_000, 60_000, 60_000, 120_000, remember_guests=True)
            )
            assert cfg.remember_guests is True and (await c.config(space)) == cfg
            assert space in [s.space async for s in c.iter_spaces()]
            assert (await c.history(space)).interval_ms == 10_000
            assert (await c.mint_token(ann, [space], ttl=60)).token
            assert await c.healthy() and await c.ready()
            assert "herenow_" in await c.metrics()
            assert "/v1/watch" in (await c.openapi())["paths"]

    run(main)


def test_async_errors_are_typed(server: Server, space: str, dead_url: str) -> None:
    async def main() -> None:
        async with herenow.AsyncClient(server.url) as c:
            with pytest.raises(herenow.BadRequest) as e:
                await c.member(space, "x" * 300)
            assert (e.value.status, e.value.code) == (400, "bad-member-id")
            with pytest.raises(herenow.InvalidArgument):
                await c.member(space, "")
        waits: List[float] = []

        async def sleep(s: float) -> None:
            waits.append(s)

        async with herenow.AsyncClient(dead_url, sleep=sleep, retries=1) as down:
            with pytest.raises(herenow.TransportError) as t:
                await down.count(space)
            assert t.value.sent is False and len(waits) == 1

    run(main)


def test_async_503_is_retried_after_retry_after() -> None:
    answers = [
        httpx.Response(503, headers={"retry-after": "2"}, json={"code": "store-unavailable"}),
        httpx.Response(200, json={"accepted": 1, "joined": 1, "stale": 0}),
    ]
    waits: List[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    async def main() -> herenow.HeartbeatResult:
        transport = httpx.MockTransport(lambda request: answers.pop(0))
        async with herenow.AsyncClient("http://h.test", transport=transport, sleep=sleep) as c:
            return await c.heartbeat("lobby", "ann")

    assert run(main) == herenow.HeartbeatResult(1, 1, 0)
    assert waits == [2.0]


def test_async_events_and_resume(server: Server, proxy: TcpProxy, space: str) -> None:
    a, b = uid("a"), uid("b")

    async def main() -> None:
        async with herenow.AsyncClient(server.url) as direct, herenow.AsyncClient(proxy.url) as c:
            policy = Reconnect(initial_delay=0.05, jitter=0.0)
            async with c.events(space, reconnect=policy) as stream:
                snapshot = await stream.__anext__()
                assert isinstance(snapshot, herenow.Snapshot) and snapshot.members == []
                await direct.heartbeat(space, a)
                join = await stream.__anext__()
                assert (join.type, join.id) == ("join", a)
                proxy.cut()
                await direct.heartbeat(space, b)
                fresh = await stream.__anext__()
                assert isinstance(fresh, herenow.Snapshot) and fresh.resync
                assert {m.id for m in fresh.members} == {a, b}
                assert stream.reconnects == 1
            assert stream.closed

            async with c.watch([a], space=space, reconnect=policy) as watch:
                page = await watch.__anext__()
                assert page.space == space and page.users[0].status is Status.ONLINE
                await direct.leave(space, [a])
                change = await watch.__anext__()
                assert (change.id, change.status) == (a, Status.OFFLINE)

    run(main)


def test_async_stream_is_cancellable(server: Server, space: str) -> None:
    async def main() -> None:
        async with herenow.AsyncClient(server.url) as c:
            stream = c.events(space)
            await stream.__anext__()

            async def read_forever() -> Any:
                async for event in stream:
                    return event

            task = asyncio.ensure_future(read_forever())
            await asyncio.sleep(0)  # let it start waiting for an event
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await stream.aclose()
            assert stream.closed

    run(main)


def test_async_bad_event_stream_raises(server: Server) -> None:
    async def main() -> None:
        async with herenow.AsyncClient(server.url) as c:
            with pytest.raises(herenow.BadRequest) as e:
                async with c.watch() as stream:
                    await stream.__anext__()
            assert e.value.code == "nothing-to-watch"

    run(main)


def test_async_client_sends_json_bodies_as_documented() -> None:
    seen: List[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, json.loads(request.content)))
        return httpx.Response(200, json={"left": 1})

    async def main() -> int:
        async with herenow.AsyncClient(
            "http://h.test", transport=httpx.MockTransport(handler)
        ) as c:
            return await c.leave("lobby", ["ann", herenow.MemberRef("10.0.0.1", Kind.GUEST)])

    assert run(main) == 1
    assert seen == [
        (
            "POST",
            "/v1/spaces/lobby/leave",
            {"members": [{"id": "ann", "kind": "user"}, {"id": "10.0.0.1", "kind": "guest"}]},
        ),
    ]
