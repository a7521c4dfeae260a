"""Test fixtures: real herenow servers started from ``$HERENOW_BIN``, a TCP
proxy that can cut connections (to drop streams on purpose), and a fake
clock for the tracker.

Each server listens on ``127.0.0.1:0`` and prints its address on stdout;
the fixtures read it, wait for ``/readyz`` (a bounded poll of process
start-up, never of presence state) and stop the server with SIGTERM.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import httpx
import pytest

import herenow

HERE = Path(__file__).resolve().parent


def wait_stopped(pid: int, timeout: float) -> bool:
    """True once every thread of ``pid`` shows state ``T`` (stopped) in
    Linux's /proc, within ``timeout``; without /proc, after 100 ms."""
    tasks_dir = f"/proc/{pid}/task"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            tasks = os.listdir(tasks_dir)
        except OSError:
            time.sleep(0.1)
            return True
        states = []
        for tid in tasks:
            try:
                with open(f"{tasks_dir}/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue  # the thread ended
            states.append(stat[stat.rindex(")") + 2 :][:1])
        if all(state == "T" for state in states):
            return True
        time.sleep(0.001)
    return False


def server_binary() -> str:
    path = os.environ.get("HERENOW_BIN")
    if not path:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        path = os.path.join(top, "target", "debug", "herenow")
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"no herenow server binary at {path}: build it, or set HERENOW_BIN to one"
        )
    return path


class Server:
    """A ``herenow serve`` process of the tests' own."""

    def __init__(self, *args: str) -> None:
        self.args = list(args)
        self.proc: Optional[subprocess.Popen[str]] = None
        self.port = 0
        self.log = tempfile.NamedTemporaryFile(
            prefix="herenow-test-", suffix=".log", delete=False, mode="w+"
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> "Server":
        cmd = [server_binary(), "serve", "--listen", f"127.0.0.1:{port}", *self.args]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 15
        line = ""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                break
            if self.proc.poll() is not None:
                break
        if "listening on http://" not in line:
            self.stop()
            raise RuntimeError(f"herenow did not start ({cmd}): {self.stderr()}")
        self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
        self._wait_ready(deadline)
        return self

    def _wait_ready(self, deadline: float) -> None:
        with httpx.Client(timeout=1.0) as c:
            while time.monotonic() < deadline:
                try:
                    if c.get(f"{self.url}/readyz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.02)
        raise RuntimeError(f"herenow at {self.url} never became ready: {self.stderr()}")

    def stop(self) -> None:
        """SIGTERM (a graceful shutdown: streams end), then SIGKILL if slow."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.resume()  # a paused process would not see SIGTERM
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: connections are reset, nothing ends cleanly (a paused
        process too)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the process hangs (connections are still accepted by the
        kernel, nothing answers), as an overloaded or partitioned server
        looks to a client."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        # kill() returns when the signal is queued: each thread of a busy
        # multi-threaded process stops when it next enters the kernel, so a
        # request sent at once could still be answered by a thread that has
        # not stopped yet. Return once every thread shows state T in
        # /proc/PID/task/TID/stat.
        if not wait_stopped(self.proc.pid, 5.0):
            raise RuntimeError(f"herenow (pid {self.proc.pid}) did not stop within 5 s of SIGSTOP")

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Stops and starts again on the same port."""
        port = self.port
        self.stop()
        self.start(port)

    def stderr(self) -> str:
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-4000:]


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server().start()
    yield s
    s.stop()


WRITE_KEY = "py-write-key-0123456789"
READ_KEY = "py-read-key-0123456789"


@pytest.fixture(scope="session")
def keyed_server() -> Iterator[Server]:
    """A server with API keys, and room for one event stream only."""
    s = Server(
        "--api-key",
        f"{WRITE_KEY}:write",
        "--api-key",
        f"{READ_KEY}:read",
        "--max-event-streams",
        "1",
    ).start()
    yield s
    s.stop()


@pytest.fixture
def client(server: Server) -> Iterator[herenow.Client]:
    with herenow.Client(server.url) as c:
        yield c


@pytest.fixture
def space() -> str:
    """A space of this test's own: tests never see each other's members."""
    return f"t-{uuid.uuid4().hex[:12]}"


def uid(prefix: str = "u") -> str:
    """An id no other test uses (users are global across spaces)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def dead_url() -> str:
    """A URL where nothing listens: connections are refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def blackhole_url() -> Iterator[str]:
    """A URL that accepts connections (in the kernel's backlog) and never
    answers: requests hang until the client's timeout."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    yield f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()


def lines(caplog: pytest.LogCaptureFixture, logger: str = "herenow.tracker") -> list:
    """The records ``logger`` wrote during the test."""
    return [r for r in caplog.records if r.name == logger]


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class TcpProxy:
    """A TCP forwarder to a server that counts the connections it accepts
    and can cut them all at once (a dropped network, for streams)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.lock = threading.Lock()
        self.pairs: List[Tuple[socket.socket, socket.socket]] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                conn.close()
                continue
            with self.lock:
                self.accepted += 1
                self.pairs.append((conn, upstream))
            threading.Thread(target=self._pump, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Resets every connection open through the proxy."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                    )
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.cut()


@pytest.fixture
def proxy(server: Server) -> Iterator[TcpProxy]:
    p = TcpProxy(server.port)
    yield p
    p.close()
