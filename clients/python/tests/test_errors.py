"""Errors: the server's problems as typed errors with their code, status
and Retry-After; bad input refused before sending; retries; timeouts."""

from __future__ import annotations

import json
from typing import List

import httpx
import pytest
from conftest import READ_KEY, WRITE_KEY, Server, uid

import herenow
from herenow import Kind, MemberRef
from herenow.errors import parse_retry_after, problem_error

# --- problems from the real server -----------------------------------------


@pytest.mark.parametrize(
    "call, code",
    [
        (lambda c, s: c.member(s, "x" * 300), "bad-member-id"),
        (lambda c, s: c.heartbeat(s, "a\u0007b"), "bad-member-id"),
        (lambda c, s: c.online("bad space!"), "bad-space-name"),
        (lambda c, s: c.online(s, window="10"), "bad-duration"),
        (lambda c, s: c.online(s, limit=0), "bad-limit"),
        (lambda c, s: c.online(s, limit=1001), "bad-limit"),
        # (On a space that never had members the server answers an empty
        # page to any cursor; a space with members checks it.)
        (lambda c, s: (c.heartbeat(s, "m"), c.online(s, cursor="nonsense")), "bad-cursor"),
        (lambda c, s: c.heartbeats(s, []), "empty-batch"),
        (lambda c, s: c.heartbeats(s, [str(i) for i in range(10_001)]), "batch-too-large"),
        (lambda c, s: c.heartbeat(s, "m", meta={"x": "y" * 2000}), "bad-metadata"),
        (lambda c, s: c.status(s, []), "empty-batch"),
        (lambda c, s: c.users_status([]), "empty-batch"),
        (lambda c, s: c.users_status(["ok", "bad\u0000id"]), "bad-member-id"),
        (lambda c, s: c.add_friends("ann", []), "empty-batch"),
        (lambda c, s: c.count(s, window="soon"), "bad-duration"),
        (lambda c, s: c.watch([]).__next__(), "nothing-to-watch"),
        (lambda c, s: c.heartbeat(s, "m", at_ms=2**62), "bad-time"),
    ],
)
def test_a_4xx_problem_is_a_typed_error_with_its_code(
    client: herenow.Client, space: str, call, code: str
) -> None:
    with pytest.raises(herenow.BadRequest) as e:
        call(client, space)
    err = e.value
    assert isinstance(err, herenow.ProblemError) and isinstance(err, herenow.HerenowError)
    assert err.status == 400
    assert err.code == code
    assert err.type.endswith("/" + code)
    assert err.detail  # a sentence for people
    assert err.retry_after is None
    assert not err.retryable
    assert code in str(err)


def test_unknown_route_is_not_found(client: herenow.Client) -> None:
    with pytest.raises(herenow.NotFound) as e:
        client._call(herenow._ops.Op("GET", "/v1/nothing-here", lambda d: d))
    assert (e.value.status, e.value.code) == (404, "not-found")


def test_api_keys_and_scopes(keyed_server: Server) -> None:
    space = f"k-{uid()}"
    with herenow.Client(keyed_server.url, api_key="") as anonymous:
        with pytest.raises(herenow.Unauthorized) as e:
            anonymous.online(space)
        assert (e.value.status, e.value.code) == (401, "missing-api-key")
    with herenow.Client(keyed_server.url, api_key="not-a-key") as wrong:
        with pytest.raises(herenow.Unauthorized) as e:
            wrong.online(space)
        assert e.value.code == "unknown-api-key"
    with herenow.Client(keyed_server.url, api_key=READ_KEY) as reader:
        assert reader.online(space).members == []
        with pytest.raises(herenow.Forbidden) as e:
            reader.heartbeat(space, "ann")
        assert (e.value.status, e.value.code) == (403, "insufficient-scope")
        with pytest.raises(herenow.Forbidden):
            reader.mint_token("ann", [space])
    with herenow.Client(keyed_server.url, api_key=WRITE_KEY) as writer:
        assert writer.heartbeat(space, "ann").joined == 1
        assert writer.mint_token("ann", [space]).token


def test_503_carries_retry_after(keyed_server: Server) -> None:
    """The keyed server allows one event stream: a second is 503
    too-many-streams with Retry-After."""
    space = f"k-{uid()}"
    with herenow.Client(keyed_server.url, api_key=READ_KEY) as c:
        with c.events(space) as first:
            assert isinstance(next(first), herenow.Snapshot)
            with pytest.raises(herenow.ServiceUnavailable) as e:
                next(c.events(space))
    err = e.value
    assert (err.status, err.code) == (503, "too-many-streams")
    assert err.retry_after == 5.0
    assert err.retryable


# --- bad input refused before anything is sent -----------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.member("lobby", ""),
        lambda c: c.member("", "ann"),
        lambda c: c.user(""),
        lambda c: c.erase_user(""),
        lambda c: c.friends(""),
        lambda c: c.member("lobby", 42),
        lambda c: c.member("lobby", "ann", kind="robot"),
        lambda c: c.heartbeat("lobby", "ann", kind="admin"),
        lambda c: c.online("lobby", kind="everyone"),
        lambda c: c.online("lobby", order="random"),
        lambda c: c.online("lobby", limit="10"),
        lambda c: c.online("lobby", window=[10]),
        lambda c: c.leave("lobby", "ann"),  # a str, not a list of ids
        lambda c: c.status("lobby", [MemberRef("ann"), 7]),
        lambda c: c.users_status("ann"),
        lambda c: c.set_friends("ann", [None]),
        lambda c: c.heartbeats("lobby", "ann"),
        lambda c: c.set_config("lobby", {"online_ms": 1}),
        lambda c: c.mint_token("ann", ["lobby"], ttl=1.5),
        lambda c: c.mint_token("ann", ["lobby"], watch="everyone"),
    ],
)
def test_bad_arguments_raise_invalid_argument_without_a_request(call) -> None:
    sent: List[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    with herenow.Client("http://herenow.test", transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(herenow.InvalidArgument) as e:
            call(c)
    assert isinstance(e.value, ValueError)
    assert sent == []


# --- retries, timeouts and unreadable answers (a mock server) --------------


def problem(status: int, code: str, retry_after: str = "") -> httpx.Response:
    headers = {"content-type": "application/problem+json"}
    if retry_after:
        headers["retry-after"] = retry_after
    body = {
        "type": f"https://herenow.dev/problems/{code}",
        "title": code,
        "status": status,
        "detail": "d",
        "code": code,
    }
    return httpx.Response(status, headers=headers, content=json.dumps(body))


def scripted(*answers: httpx.Response):
    calls: List[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return queue.pop(0)

    return calls, httpx.MockTransport(handler)


COUNT = {"users": 1, "guests": 0, "total": 1, "window_ms": 600000}


def test_503_is_retried_after_its_retry_after() -> None:
    calls, transport = scripted(
        problem(503, "store-unavailable", "1"), httpx.Response(200, json=COUNT)
    )
    waits: List[float] = []
    with herenow.Client("http://h.test", transport=transport, sleep=waits.append) as c:
        assert c.count("lobby") == herenow.Count(1, 0, 1, 600000)
    assert len(calls) == 2 and waits == [1.0]


def test_a_retry_after_longer_than_max_retry_wait_is_raised_at_once() -> None:
    calls, transport = scripted(problem(503, "not-ready", "120"))
    waits: List[float] = []
    with herenow.Client(
        "http://h.test", transport=transport, sleep=waits.append, max_retry_wait=10
    ) as c:
        with pytest.raises(herenow.ServiceUnavailable) as e:
            c.count("lobby")
    assert e.value.retry_after == 120.0 and e.value.code == "not-ready"
    assert len(calls) == 1 and waits == []


def test_retries_give_up_with_the_last_error() -> None:
    calls, transport = scripted(*(problem(429, "slow-down", "0") for _ in range(3)))
    waits: List[float] = []
    with herenow.Client("http://h.test", transport=transport, sleep=waits.append, retries=2) as c:
        with pytest.raises(herenow.TooManyRequests) as e:
            c.count("lobby")
    assert e.value.status == 429 and len(calls) == 3 and waits == [0.0, 0.0]


def test_a_4xx_is_never_retried() -> None:
    calls, transport = scripted(problem(400, "bad-window"))
    with herenow.Client("http://h.test", transport=transport, sleep=lambda s: None) as c:
        with pytest.raises(herenow.BadRequest):
            c.count("lobby")
    assert len(calls) == 1


def test_a_refused_connection_is_retried_then_raised(dead_url: str) -> None:
    waits: List[float] = []
    with herenow.Client(dead_url, sleep=waits.append, retries=2) as c:
        with pytest.raises(herenow.TransportError) as e:
            c.count("lobby")
    assert e.value.sent is False and e.value.retryable
    assert not isinstance(e.value, herenow.ProblemError)
    assert len(waits) == 2 and all(w > 0 for w in waits)


def test_a_silent_server_times_out_and_is_not_retried(blackhole_url: str) -> None:
    waits: List[float] = []
    with herenow.Client(blackhole_url, timeout=0.3, connect_timeout=0.3, sleep=waits.append) as c:
        with pytest.raises(herenow.Timeout) as e:
            c.heartbeat("lobby", "ann")
    assert e.value.sent is True and not e.value.retryable
    assert waits == []  # the request may have been received: not sent twice


def test_an_answer_that_is_not_the_documented_shape_is_a_protocol_error() -> None:
    _, transport = scripted(httpx.Response(200, text="<html>proxy</html>"))
    with herenow.Client("http://h.test", transport=transport) as c:
        with pytest.raises(herenow.ProtocolError):
            c.count("lobby")
    _, transport = scripted(httpx.Response(200, json={"users": 1, "guests": 0}))
    with herenow.Client("http://h.test", transport=transport) as c:
        with pytest.raises(herenow.ProtocolError) as e:
            c.count("lobby")
    assert "total" in str(e.value)
    _, transport = scripted(httpx.Response(200, json={**COUNT, "users": True}))
    with herenow.Client("http://h.test", transport=transport) as c:
        with pytest.raises(herenow.ProtocolError):
            c.count("lobby")


def test_a_non_problem_error_page_still_maps_to_a_typed_error() -> None:
    _, transport = scripted(httpx.Response(502, text="Bad Gateway"))
    with herenow.Client("http://h.test", transport=transport) as c:
        with pytest.raises(herenow.ServerError) as e:
            c.count("lobby")
    assert (e.value.status, e.value.code) == (502, "http-502")


def test_newer_fields_are_ignored() -> None:
    _, transport = scripted(httpx.Response(200, json={**COUNT, "bots": 3}))
    with herenow.Client("http://h.test", transport=transport) as c:
        assert c.count("lobby").total == 1


def test_requests_carry_the_key_and_a_user_agent() -> None:
    calls, transport = scripted(httpx.Response(200, json=COUNT))
    with herenow.Client("http://h.test/", api_key="k1", transport=transport) as c:
        c.count("my space:1", window=90)
    request = calls[0]
    assert request.headers["authorization"] == "Bearer k1"
    assert request.headers["user-agent"].startswith("herenow-python/")
    assert request.url.raw_path == b"/v1/spaces/my%20space%3A1/count?window=90000ms"


def test_retry_after_parsing() -> None:
    assert parse_retry_after("5") == 5.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0
    err = problem_error(503, {"code": "timeout"}, retry_after="2")
    assert isinstance(err, herenow.ServiceUnavailable) and err.retry_after == 2.0
    assert isinstance(problem_error(501, {"code": "unsupported"}), herenow.Unsupported)
    assert type(problem_error(418, None)) is herenow.ProblemError


def test_connections_are_reused(proxy) -> None:
    with herenow.Client(proxy.url) as c:
        for _ in range(5):
            c.heartbeat(f"reuse-{uid()}", "ann", kind=Kind.USER)
            c.count("lobby")
    assert proxy.accepted == 1
