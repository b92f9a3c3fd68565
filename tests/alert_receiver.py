"""A real webhook receiver for the alert tests: a ThreadingHTTPServer on 127.0.0.1.

It behaves as a careful receiver should: it answers 500 for the first `fail_first`
requests (a flaky endpoint), then accepts, and keeps one alert per Idempotency-Key so a
repeated delivery is recorded but not acted on twice.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


class Receiver:
    def __init__(self, fail_first: int = 0, fail_status: int = 500) -> None:
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.requests: list[tuple[str | None, dict[str, Any]]] = []
        self.accepted: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key")
                with receiver.arrived:
                    receiver.requests.append((key, body))
                    failing = len(receiver.requests) <= receiver.fail_first
                    if not failing and key is not None:
                        receiver.accepted.setdefault(key, body)
                    receiver.arrived.notify_all()
                self.send_response(receiver.fail_status if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def keys(self) -> list[str | None]:
        with self.lock:
            return [key for key, _ in self.requests]

    def wait_for(self, count: int, timeout: float = 10.0) -> bool:
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.requests) >= count, timeout)


def make_watcher(store, sinks, *, lateness_s: float = 900.0, metrics=None, clock=None):  # type: ignore[no-untyped-def]
    """A Watcher as `dupescope watch` builds it, with retries fast enough for tests."""
    from datetime import timedelta

    from alerts.delivery import Dispatcher, RetryPolicy, utcnow
    from alerts.metrics import AlertMetrics
    from alerts.rules import load_rules
    from alerts.state import open_state
    from alerts.watch import Watcher

    state = open_state(store)
    metrics = metrics or AlertMetrics()
    policy = RetryPolicy(attempts_per_pass=3, max_attempts=5, base_s=0.01, cap_s=0.05)
    clock = clock or utcnow
    dispatcher = Dispatcher(state, sinks, policy=policy, metrics=metrics, clock=clock)
    return Watcher(
        store, load_rules(), state, sinks, dispatcher, metrics,
        lateness=timedelta(seconds=lateness_s), clock=clock,
    )
