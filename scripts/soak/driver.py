"""The soak test's load (scripts/soak.sh): churn that a leak would show in.

Against one `herenow serve` at --base, until --seconds pass:

- heartbeats: HTTP members in SPACES spaces, a batch per space every
  second; each round some members leave (POST .../leave) and come back by
  their next heartbeat, so joins and leaves keep flowing (and webhooks with
  them);
- friend sets of the WebSocket users rewritten now and then;
- WebSockets: SOCKETS workers, each opening a socket with a fresh token,
  joining a space, subscribing to one, watching users, changing its watch
  list (added users, `replace`, `unwatch`) and pinging for a few seconds,
  then closing it (a `leave` first, or not) and opening the next one at
  once, so about SOCKETS sockets are open at any time.

Ids come from fixed pools: what the server remembers stays bounded, so
what grows is a leak, not data. Every message the server sends is read.
Prints a line of counts every minute and exits 1 if a request failed in a
way the server must not answer (a 5xx, a refused connection).
"""

import argparse
import asyncio
import json
import random
import sys
import time

import httpx
import websockets

SPACES = 20
PER_SPACE = 25
SOCKETS = 60
WATCHED = 20


class Counts:
    def __init__(self):
        self.n = {}

    def add(self, what, k=1):
        self.n[what] = self.n.get(what, 0) + k

    def line(self):
        return " ".join(f"{k}={v}" for k, v in sorted(self.n.items()))


def members(space):
    return [f"h{space}-{i}" for i in range(PER_SPACE)]


def all_members():
    return [m for s in range(SPACES) for m in members(s)]


async def checked(counts, what, request):
    """Sends one request; a 5xx or a lost connection is a failure."""
    try:
        r = await request
    except httpx.HTTPError as e:
        counts.add("errors")
        print(f"driver: {what}: {e!r}", file=sys.stderr)
        return None
    if r.status_code >= 500:
        counts.add("errors")
        print(f"driver: {what}: HTTP {r.status_code} {r.text[:200]}", file=sys.stderr)
        return None
    if r.status_code >= 400:
        counts.add("refused")
        print(f"driver: {what}: HTTP {r.status_code} {r.text[:200]}", file=sys.stderr)
        return None
    counts.add(what)
    return r


async def heartbeats(http, counts, until):
    rng = random.Random(1)
    while time.monotonic() < until:
        started = time.monotonic()
        for s in range(SPACES):
            space = f"soak-{s}"
            body = {"heartbeats": [{"id": m, "meta": {"n": rng.randrange(3)}} for m in members(s)]}
            await checked(counts, "heartbeats", http.post(f"/v1/spaces/{space}/heartbeats", json=body))
            leaving = rng.sample(members(s), 2)
            await checked(
                counts,
                "leaves",
                http.post(f"/v1/spaces/{space}/leave", json={"members": [{"id": m} for m in leaving]}),
            )
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))


async def friends(http, counts, until):
    rng = random.Random(2)
    pool = all_members()
    while time.monotonic() < until:
        user = f"w{rng.randrange(SOCKETS)}"
        await checked(
            counts,
            "friends",
            http.put(f"/v1/friends/{user}", json={"friends": rng.sample(pool, WATCHED)}),
        )
        await asyncio.sleep(0.5)


async def drain(ws, counts):
    """Reads every message until the socket closes."""
    try:
        async for _ in ws:
            counts.add("ws_messages")
    except websockets.ConnectionClosed:
        pass


async def socket_worker(http, counts, until, base_ws, worker):
    rng = random.Random(100 + worker)
    pool = all_members()
    user = f"w{worker}"
    while time.monotonic() < until:
        r = await checked(
            counts,
            "tokens",
            http.post("/v1/tokens", json={"user": user, "spaces": ["*"], "watch": "any", "ttl_s": 600}),
        )
        if r is None:
            await asyncio.sleep(1)
            continue
        token = r.json()["token"]
        life = rng.uniform(3, 12)
        try:
            async with websockets.connect(f"{base_ws}/v1/ws?token={token}", max_size=1 << 22) as ws:
                counts.add("ws_opened")
                reader = asyncio.create_task(drain(ws, counts))
                send = lambda m: ws.send(json.dumps(m))
                space = f"soak-{rng.randrange(SPACES)}"
                await send({"type": "join", "space": space, "meta": {"w": worker}})
                await send({"type": "subscribe", "space": f"soak-{rng.randrange(SPACES)}"})
                await send({"type": "watch", "users": rng.sample(pool, WATCHED)})
                ends = time.monotonic() + life
                while time.monotonic() < min(ends, until):
                    await asyncio.sleep(rng.uniform(0.5, 1.5))
                    roll = rng.randrange(4)
                    if roll == 0:
                        await send({"type": "ping"})
                    elif roll == 1:
                        await send({"type": "watch", "users": rng.sample(pool, 5)})
                    elif roll == 2:
                        await send(
                            {"type": "watch", "users": rng.sample(pool, WATCHED), "replace": True}
                        )
                    else:
                        await send({"type": "unwatch", "users": rng.sample(pool, 5)})
                    counts.add("ws_sent")
                if rng.randrange(2) == 0:
                    await send({"type": "leave", "space": space})
                await ws.close()
                await reader
                counts.add("ws_closed")
        except (OSError, websockets.WebSocketException) as e:
            counts.add("errors")
            print(f"driver: socket {worker}: {e!r}", file=sys.stderr)
            await asyncio.sleep(1)


async def reporter(counts, until):
    while time.monotonic() < until:
        await asyncio.sleep(60)
        print(f"driver: {counts.line()}", flush=True)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True, help="http://127.0.0.1:PORT")
    p.add_argument("--seconds", type=float, required=True)
    args = p.parse_args()
    until = time.monotonic() + args.seconds
    counts = Counts()
    base_ws = "ws" + args.base[len("http") :]
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
    async with httpx.AsyncClient(base_url=args.base, timeout=10, limits=limits) as http:
        tasks = [heartbeats(http, counts, until), friends(http, counts, until), reporter(counts, until)]
        tasks += [socket_worker(http, counts, until, base_ws, w) for w in range(SOCKETS)]
        await asyncio.gather(*tasks)
    print(f"driver: done: {counts.line()}", flush=True)
    sys.exit(1 if counts.n.get("errors", 0) else 0)


if __name__ == "__main__":
    asyncio.run(main())
