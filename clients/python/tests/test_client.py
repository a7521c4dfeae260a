"""The sync client against a real server: every endpoint, typed answers."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from conftest import uid

import herenow
from herenow import Kind, MemberRef, SpaceConfig, Status
from herenow import _ops as ops


def test_heartbeat_then_online_lists_the_member(client: herenow.Client, space: str) -> None:
    ada = uid("ada")
    result = client.heartbeat(space, ada, meta={"name": "Ada Lovelace"})
    assert result == herenow.HeartbeatResult(accepted=1, joined=1, stale=0)

    page = client.online(space)
    assert [m.id for m in page.members] == [ada]
    member = page.members[0]
    assert member.kind is Kind.USER
    assert member.status is Status.ONLINE
    assert member.meta == {"name": "Ada Lovelace"}
    assert member.last_seen_ms is not None
    # The server's clock and ours agree within a minute on one machine.
    assert abs(member.last_seen_ms / 1000 - time.time()) < 60
    assert member.last_seen is not None and member.last_seen.tzinfo is dt.timezone.utc
    assert page.next_cursor is None
    assert page.window_ms == 600_000  # the server's default window
    assert page.order == "recent"  # the memory store keeps times

    again = client.heartbeat(space, ada)
    assert again.joined == 0 and again.accepted == 1
    # A heartbeat without meta keeps the member's metadata.
    assert client.member(space, ada).meta == {"name": "Ada Lovelace"}
    assert client.count(space) == herenow.Count(users=1, guests=0, total=1, window_ms=600_000)


def test_status_of_an_unknown_member_is_offline_never_seen(
    client: herenow.Client, space: str
) -> None:
    nobody = uid("nobody")
    member = client.member(space, nobody)
    assert member.id == nobody
    assert member.status is Status.OFFLINE
    assert member.last_seen_ms is None and member.last_seen is None

    seen = uid("seen")
    client.heartbeat(space, seen)
    answer = client.status(space, [nobody, MemberRef(seen), MemberRef(nobody, Kind.GUEST)])
    assert [(m.id, m.kind, m.status) for m in answer] == [
        (nobody, Kind.USER, Status.OFFLINE),
        (seen, Kind.USER, Status.ONLINE),
        (nobody, Kind.GUEST, Status.OFFLINE),
    ]
    assert answer[0].last_seen_ms is None and answer[1].last_seen_ms is not None


def test_batch_of_heartbeats_users_and_guests(client: herenow.Client, space: str) -> None:
    a, b = uid("a"), uid("b")
    result = client.heartbeats(
        space,
        [a, herenow.Heartbeat(b, meta={"team": "core"}), herenow.Heartbeat("10.0.0.7", Kind.GUEST)],
    )
    assert result == herenow.HeartbeatResult(accepted=3, joined=3, stale=0)

    users = client.online(space)
    assert {m.id for m in users.members} == {a, b}
    guests = client.online(space, kind="guests")
    assert [(m.id, m.kind) for m in guests.members] == [("10.0.0.7", Kind.GUEST)]
    everyone = client.online(space, kind="all", order="id", window=dt.timedelta(minutes=5))
    assert [m.id for m in everyone.members] == sorted(m.id for m in everyone.members)
    assert len(everyone.members) == 3
    assert everyone.window_ms == 300_000
    assert everyone.order == "id"
    assert client.count(space, window="5m") == herenow.Count(2, 1, 3, 300_000)

    guest = client.member(space, "10.0.0.7", kind="guest")
    assert guest.kind is Kind.GUEST and guest.status is Status.ONLINE
    # A user and a guest with one id are two members.
    assert client.member(space, "10.0.0.7").status is Status.OFFLINE


def test_an_explicit_time_is_recorded_and_an_older_one_is_stale(
    client: herenow.Client, space: str
) -> None:
    m = uid()
    now_ms = int(time.time() * 1000)
    client.heartbeat(space, m, at_ms=now_ms - 120_000)
    member = client.member(space, m)
    assert member.last_seen_ms == now_ms - 120_000
    assert member.status is Status.AWAY  # seen 2 min ago: past online_ms (60 s)
    stale = client.heartbeat(space, m, at_ms=now_ms - 180_000)
    assert stale == herenow.HeartbeatResult(accepted=0, joined=0, stale=1)


def test_paging_through_who_is_online(client: herenow.Client, space: str) -> None:
    ids = {f"p{i:02d}" for i in range(25)}
    client.heartbeats(space, sorted(ids))
    first = client.online(space, order="id", limit=10)
    assert len(first.members) == 10 and first.next_cursor is not None
    listed = [m.id for m in client.iter_online(space, order="id", page_size=10)]
    assert listed == sorted(ids)


def test_leave_remembers_last_seen(client: herenow.Client, space: str) -> None:
    m = uid()
    client.heartbeat(space, m)
    assert client.leave(space, [m]) == 1
    assert client.leave(space, [m]) == 0  # no longer present
    member = client.member(space, m)
    assert member.status is Status.OFFLINE
    assert member.last_seen_ms is not None  # remembered after the leave
    assert client.online(space).members == []


def test_online_among_an_ad_hoc_list(client: herenow.Client, space: str) -> None:
    a, b, c = uid("a"), uid("b"), uid("c")
    # Explicit times: two calls can land in the same millisecond, and a
    # tie is ordered by id, not by arrival.
    now = int(time.time() * 1000)
    client.heartbeat(space, a, at_ms=now - 2_000)
    client.heartbeat(space, b, at_ms=now - 1_000)
    among = client.online_among(space, [a, c, b], window="10m", limit=10)
    assert [m.id for m in among] == [b, a]  # most recent first, c never seen


def test_friends(client: herenow.Client, space: str) -> None:
    ann, bob, cy, dee = uid("ann"), uid("bob"), uid("cy"), uid("dee")
    assert client.set_friends(ann, [bob, cy]) == 2
    assert client.add_friends(ann, [dee]) == 3
    assert client.remove_friends(ann, [cy]) == 2
    listed = client.friends(ann)
    assert listed.user == ann and sorted(listed.friends) == sorted([bob, dee])

    client.heartbeat(space, bob)
    client.heartbeat(space, cy)  # no longer a friend
    online = client.online_friends(space, ann, window="10m", limit=10)
    assert [m.id for m in online] == [bob]

    assert client.set_friends(ann, []) == 0  # an empty list clears the set
    assert client.friends(ann).friends == []


def test_users_last_seen_anywhere(client: herenow.Client, space: str) -> None:
    ann, never = uid("ann"), uid("never")
    client.heartbeat(space, ann)
    seen = client.user(ann)
    assert seen.id == ann and seen.status is Status.ONLINE and seen.space == space
    assert seen.last_seen_ms is not None

    batch = client.users_status([never, ann])
    assert [(u.id, u.status, u.space) for u in batch] == [
        (never, Status.OFFLINE, None),
        (ann, Status.ONLINE, space),
    ]
    assert batch[0].last_seen_ms is None

    # /v1/users/status is also the user called "status".
    assert client.user("status").id == "status"


def test_erase_forgets_a_user_everywhere(client: herenow.Client, space: str) -> None:
    ann, bob = uid("ann"), uid("bob")
    client.heartbeat(space, ann)
    client.set_friends(ann, [bob])
    client.set_friends(bob, [ann])

    erased = client.erase_user(ann)
    assert erased == herenow.Erasure(presence=1, remembered=0, friend_set=True, listed_by=1)
    assert client.user(ann).last_seen_ms is None
    assert client.member(space, ann).status is Status.OFFLINE
    assert client.friends(bob).friends == []
    # Erasing again, or an unknown user, is all zeros, not an error.
    assert client.erase_user(ann) == herenow.Erasure(0, 0, False, 0)


def test_space_config_round_trip(client: herenow.Client, space: str) -> None:
    before = client.config(space)
    assert before.remember_ms is not None and before.remember_guests is False
    assert before.grace_ms == 5000
    wanted = SpaceConfig(online_ms=30_000, away_ms=120_000, window_ms=300_000, retention_ms=600_000)
    after = client.set_config(space, wanted)
    # The remembering fields and the grace were left out: the space kept them.
    assert after == SpaceConfig(30_000, 120_000, 300_000, 600_000, before.remember_ms, False, 5000)
    assert client.config(space) == after
    assert client.online(space).window_ms == 300_000

    with pytest.raises(herenow.BadRequest) as e:
        client.set_config(
            space, SpaceConfig(online_ms=600_000, away_ms=1, window_ms=1, retention_ms=1)
        )
    assert e.value.code == "bad-config"


def test_spaces_and_history(client: herenow.Client, space: str) -> None:
    client.heartbeats(space, ["x", herenow.Heartbeat("g", Kind.GUEST)])
    listed = {s.space: s for s in client.iter_spaces(page_size=1000)}
    assert listed[space] == herenow.SpaceSummary(space, users=1, guests=1)
    page = client.spaces(after=space, limit=5)
    assert all(s.space > space for s in page)

    history = client.history(space, range="1h")
    assert history.interval_ms == 10_000
    assert all(isinstance(s, herenow.HistorySample) for s in history.samples)
    with pytest.raises(herenow.BadRequest) as e:
        client.history(space, range="25h")
    assert e.value.code == "bad-range"


def test_mint_a_websocket_token(client: herenow.Client) -> None:
    before_ms = int(time.time() * 1000)
    token = client.mint_token("ann", ["room:1", "room:2"], ttl=dt.timedelta(minutes=5), watch="any")
    assert token.token.count(".") == 2  # a JWT
    assert before_ms + 290_000 <= token.expires_at_ms <= before_ms + 310_000
    assert "token=" not in repr(token) and token.token not in repr(token)
    with pytest.raises(herenow.BadRequest) as e:
        client.mint_token("ann", ["room:1"], ttl=0)
    assert e.value.code == "bad-ttl"
    with pytest.raises(herenow.BadRequest) as e:
        client.mint_token("ann", [])
    assert e.value.code == "bad-spaces"


def test_operations(client: herenow.Client) -> None:
    assert client.healthy() is True
    assert client.ready() is True
    assert "herenow_" in client.metrics()
    assert client.openapi()["openapi"].startswith("3.")


def test_odd_ids_travel_intact_in_paths(client: herenow.Client, space: str) -> None:
    for odd in ["a/b", "sp ace?#%25", "..", ".", "ünïcødé", "x" * 256]:
        client.heartbeat(space, odd)
        member = client.member(space, odd)
        assert (member.id, member.status) == (odd, Status.ONLINE)
        assert client.user(odd).id == odd


# The client covers the whole HTTP API: every path of the server's OpenAPI
# document is one the client calls.
COVERED = {
    ("post", "/v1/spaces/{space}/heartbeat"): ops.heartbeat("s", "i"),
    ("post", "/v1/spaces/{space}/heartbeats"): ops.heartbeats("s", ["i"]),
    ("post", "/v1/spaces/{space}/leave"): ops.leave("s", ["i"]),
    ("get", "/v1/spaces/{space}/members/{id}"): ops.member("s", "i"),
    ("post", "/v1/spaces/{space}/status"): ops.status("s", ["i"]),
    ("get", "/v1/spaces/{space}/online"): ops.online("s"),
    ("get", "/v1/spaces/{space}/count"): ops.count("s"),
    ("post", "/v1/spaces/{space}/online-among"): ops.online_among("s", ["i"]),
    ("get", "/v1/spaces/{space}/friends/{user}/online"): ops.online_friends("s", "u"),
    ("get", "/v1/spaces/{space}/config"): ops.config("s"),
    ("put", "/v1/spaces/{space}/config"): ops.set_config("s", SpaceConfig(1, 1, 1, 1)),
    ("get", "/v1/spaces/{space}/history"): ops.history("s"),
    ("get", "/v1/spaces/{space}/events"): ops.events_request("s"),
    ("get", "/v1/spaces"): ops.spaces(),
    ("get", "/v1/friends/{user}"): ops.friends("u"),
    ("put", "/v1/friends/{user}"): ops.set_friends("u", []),
    ("post", "/v1/friends/{user}/add"): ops.add_friends("u", ["f"]),
    ("post", "/v1/friends/{user}/remove"): ops.remove_friends("u", ["f"]),
    ("get", "/v1/users/{id}"): ops.user("i"),
    ("delete", "/v1/users/{id}"): ops.erase_user("i"),
    # The user called `status`: the batch route's path, documented apart.
    ("get", "/v1/users/status"): ops.user("status"),
    ("delete", "/v1/users/status"): ops.erase_user("status"),
    ("post", "/v1/users/status"): ops.users_status(["i"]),
    ("post", "/v1/tokens"): ops.mint_token("u", ["s"]),
    ("post", "/v1/watch"): ops.watch_request(["u"]),
    ("get", "/openapi.json"): ops.openapi(),
    ("get", "/metrics"): ops.metrics(),
    ("get", "/v1/webhooks"): ops.webhooks(),
}
# Served, answered by the client outside the Op table.
COVERED_ELSEWHERE = {("get", "/healthz"), ("get", "/readyz")}
# Not for a backend client: the browser's page and protocol.
NOT_FOR_BACKENDS = {("get", "/"), ("get", "/docs"), ("get", "/client.js"), ("get", "/v1/ws")}


def test_the_client_covers_every_path_of_the_openapi_document(client: herenow.Client) -> None:
    document = client.openapi()
    served = {
        (method, path)
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "post", "put", "delete", "patch")
    }
    missing = served - set(COVERED) - COVERED_ELSEWHERE - NOT_FOR_BACKENDS
    assert not missing, f"endpoints the client does not cover: {sorted(missing)}"
    for (method, path), op in COVERED.items():
        assert op.method == method.upper()
        concrete = path.replace("{space}", "s").replace("{id}", "i").replace("{user}", "u")
        assert op.path == concrete
