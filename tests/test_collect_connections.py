"""HTTP connections: a kept-alive one waits long for its next request (longer than the
clients' own idle limit, so they close first), a request that stalls is closed sooner."""

from __future__ import annotations

import http.client
import socket
import time
from pathlib import Path

from collect_support import running

from store.embedded import EmbeddedStore


def _healthz(connection: http.client.HTTPConnection) -> int:
    connection.request("GET", "/healthz")
    answer = connection.getresponse()
    answer.read()
    return answer.status


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True once the collector closed the connection (after any answer), False if it is
    still open after `seconds`."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            return False
    return False


def test_a_kept_alive_connection_waits_longer_than_a_request_may_stall(tmp_path: Path) -> None:
    options = {"http_read_timeout": 0.3, "http_idle_timeout": 30.0}
    with running(EmbeddedStore(tmp_path / "store"), **options) as collector:
        connection = http.client.HTTPConnection("127.0.0.1", collector.http.port, timeout=10)
        assert _healthz(connection) == 200
        kept = connection.sock
        time.sleep(1.0)  # idle for over three read timeouts
        assert _healthz(connection) == 200
        assert connection.sock is kept
        connection.close()


def test_a_connection_idle_for_the_idle_timeout_is_closed(tmp_path: Path) -> None:
    options = {"http_read_timeout": 30.0, "http_idle_timeout": 0.3}
    with running(EmbeddedStore(tmp_path / "store"), **options) as collector:
        with socket.create_connection(("127.0.0.1", collector.http.port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _closed_within(sock, 5.0)


def test_a_request_head_that_stalls_is_closed_after_the_read_timeout(tmp_path: Path) -> None:
    options = {"http_read_timeout": 0.3, "http_idle_timeout": 30.0}
    with running(EmbeddedStore(tmp_path / "store"), **options) as collector:
        with socket.create_connection(("127.0.0.1", collector.http.port), timeout=10) as sock:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-")  # and no more
            assert _closed_within(sock, 5.0)
