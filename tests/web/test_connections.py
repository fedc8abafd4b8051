"""Stalled connections do not stop `placet web` (`placet.web.connections`): a real
`placet web` limited to 256 file descriptors, given 400 connections that send nothing or
half a request head, still answers a real request, closes the connections that wait
longest once it is full, and answers every incomplete request 408 (or closes it) after
the request deadline. A kept-alive connection's next request gets the same deadline, and
a peer that asks for answers and never reads them is reset after it."""

from __future__ import annotations

import ctypes
import os
import resource
import select
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from placet.store import Store
from placet.web.connections import REQUEST_SECONDS, connection_cap
from tests.support.notify import wait_until
from tests.support.rig import PLACET
from tests.support.web import Served, free_port, serve

DESCRIPTORS = 256
HALF_OPEN = 400


def _limited() -> None:
    """In the child: 256 descriptors at most, and die with the test."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@pytest.fixture
def limited_web(tmp_path: Path) -> Iterator[int]:
    """A real `placet web` under a 256-descriptor limit: its port, once it answers (its
    stderr in a file, shown when the test fails: a pipe nobody reads would stall it)."""
    port = free_port()
    stderr = (tmp_path / "web-stderr").open("w")
    proc = subprocess.Popen(
        [str(PLACET), "web", "--port", str(port)],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        preexec_fn=_limited,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"placet web: http://localhost:{port}/"
        _answer(port, timeout=20)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stderr.close()
        print((tmp_path / "web-stderr").read_text()[-2000:])


def _answer(port: int, timeout: float) -> int:
    """The status of a real GET / (the sign-in page: 401), asked until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"http://localhost:{port}/", timeout=timeout)
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            assert time.monotonic() < deadline, "placet web did not answer"
            time.sleep(0.05)
        else:
            return 200


def _closed(sock: socket.socket) -> bytes | None:
    """What the server sent before closing `sock`, or None while it is open."""
    ready, _, _ = select.select([sock], [], [], 0)
    if not ready:
        return None
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except (ConnectionResetError, BlockingIOError):
        pass
    return data


@pytest.mark.timeout(180)
def test_400_incomplete_requests_under_256_descriptors_do_not_stop_the_page(
    limited_web: int,
) -> None:
    port = limited_web
    socks: list[socket.socket] = []
    try:
        for i in range(HALF_OPEN):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:  # half send part of a request head, half nothing
                s.sendall(f"GET / HTTP/1.1\r\nHost: localhost:{port}\r\nX-Slow: ".encode())
            s.setblocking(False)
            socks.append(s)
        started = time.monotonic()
        assert _answer(port, timeout=60) == 401  # a real request is answered
        print(f"a real request answered {time.monotonic() - started:.2f} s after 400 stalled")
        # over the cap, the connections waiting longest were closed to make room
        cap = DESCRIPTORS // 2  # `connection_cap()` under 256 descriptors
        assert wait_until(
            lambda: sum(_closed(s) is not None for s in socks) >= HALF_OPEN - cap, 30
        ), "placet web kept more connections than its cap"
        # and after the deadline every incomplete request is answered 408 or closed
        assert wait_until(
            lambda: all(_closed(s) is not None for s in socks), REQUEST_SECONDS * 3 + 30
        ), "an incomplete request outlived the request deadline"
        assert _answer(port, timeout=10) == 401
    finally:
        for s in socks:
            s.close()


def _response(sock: socket.socket) -> bytes:
    """One whole response (its head and `Content-Length` bytes of body) from `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return head


def test_a_half_sent_request_is_answered_408_after_the_deadline(served: Served) -> None:
    """In-process (the test's own descriptor limit): a connection that sends half a
    head, and a kept-alive one whose second request stops half-way, get 408."""
    assert connection_cap() >= 16
    host = served.config.authority
    half = socket.create_connection(("127.0.0.1", served.config.port), timeout=30)
    kept = socket.create_connection(("127.0.0.1", served.config.port), timeout=30)
    try:
        half.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n".encode())
        kept.sendall(f"GET /static/placet.css HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert _response(kept).startswith(b"HTTP/1.1 200")
        kept.sendall(b"POST /signin/options HTTP/1.1\r\n")  # the next request stops
        for s in (half, kept):
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"request_timeout" in answer
    finally:
        half.close()
        kept.close()


CAP = 8
PIPELINED = 1000
"""Asks for 10 MB of answers per connection: more than the kernel buffers of a loopback
connection take (4 MB at most by default), so the server's writes stall."""


_ESTABLISHED = 1
"""Linux's TCP state number for an open connection (`tcp_info.tcpi_state`)."""


def _gone(sock: socket.socket) -> bool:
    """True once the server closed `sock` (reset, or ended its side), told by the
    connection's TCP state: nothing the server sent is taken."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != _ESTABLISHED


@pytest.mark.timeout(180)
def test_peers_that_never_read_their_answers_do_not_stop_the_page(quiet_store: Store) -> None:
    """A connection over the cap beside peers that ask 1,000 answers at once and never
    read one: their requests are whole, so only a deadline on taking an answer, and the
    cap dropping such a peer first, keep the page for a real request (in-process, the
    cap at 8, one more stalled peer than it)."""
    with serve(quiet_store, quiet_store.settings, cap=CAP) as served:
        port = served.config.port
        ask = f"GET /static/placet.js HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n".encode()
        socks: list[socket.socket] = []
        try:
            for _ in range(CAP + 1):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(10)
                s.connect(("127.0.0.1", port))
                s.sendall(ask * PIPELINED)
                socks.append(s)
            started = time.monotonic()
            assert wait_until(lambda: all(_gone(s) for s in socks), REQUEST_SECONDS * 6 + 30), (
                "a peer that reads nothing outlived the deadline"
            )
            print(f"{CAP + 1} peers that read nothing closed in {time.monotonic() - started:.1f} s")
            assert _answer(port, timeout=10) == 401  # and a real request is answered
        finally:
            for s in socks:
                s.close()
