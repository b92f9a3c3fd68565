"""Where alerts go. A sink makes one attempt and reports; retrying is the dispatcher's job.

The extension point is deliberately small (`id`, `label`, `send`, `shutdown`), with a
recording test double beside the real webhook. HTTP goes through the standard library's
urllib: one POST per attempt needs no connection pool, and alerting should not add a
dependency to the install.
"""

from __future__ import annotations

import hashlib
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

from alerts import payload
from dupescope import __version__

log = logging.getLogger("dupescope.alerts")

# Statuses worth another attempt; any other 4xx means the request itself is wrong.
_RETRYABLE = frozenset({408, 425, 429})


@dataclass(frozen=True)
class SendResult:
    ok: bool
    retryable: bool = True
    detail: str = ""


class Sink(Protocol):
    #: Stable across restarts for the same destination: the outbox key.
    id: str
    #: Safe to show in logs and metrics (no path, no token).
    label: str

    def send(self, alert_id: str, document: dict[str, Any]) -> SendResult:
        """One delivery attempt. Never raises: failures come back as a SendResult."""
        ...

    def shutdown(self) -> None: ...


def _label(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"


class WebhookSink:
    """POST the alert as JSON, with `Idempotency-Key: <alert id>` so receivers drop repeats."""

    def __init__(
        self,
        url: str,
        *,
        fmt: str = "json",
        dashboard_url: str | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"webhook must be an http(s) URL, got {url!r}")
        if fmt not in payload.FORMATS:
            raise ValueError(f"webhook format must be one of {payload.FORMATS}, got {fmt!r}")
        self.url = url
        self.fmt = fmt
        self.dashboard_url = dashboard_url
        self.timeout_s = timeout_s
        self.id = f"webhook:{hashlib.sha256(url.encode()).hexdigest()[:16]}"
        self.label = _label(url)

    def send(self, alert_id: str, document: dict[str, Any]) -> SendResult:
        body = orjson.dumps(payload.build(document, self.fmt, self.dashboard_url))
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Idempotency-Key": alert_id,
                "User-Agent": f"dupescope/{__version__}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
                return SendResult(ok=True, detail=str(response.status))
        except urllib.error.HTTPError as exc:
            retryable = exc.code >= 500 or exc.code in _RETRYABLE
            return SendResult(ok=False, retryable=retryable, detail=f"HTTP {exc.code}")
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            return SendResult(ok=False, retryable=True, detail=f"{type(exc).__name__}: {exc}")

    def shutdown(self) -> None:
        """Nothing held open between attempts."""


@dataclass
class MemorySink:
    """A test double: records what it was sent; fails the first `fail_times` attempts."""

    id: str = "memory"
    label: str = "memory"
    fail_times: int = 0
    retryable: bool = True
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    attempts: int = 0

    def send(self, alert_id: str, document: dict[str, Any]) -> SendResult:
        self.attempts += 1
        if self.attempts <= self.fail_times:
            return SendResult(ok=False, retryable=self.retryable, detail="scripted failure")
        self.received.append((alert_id, document))
        return SendResult(ok=True)

    def shutdown(self) -> None:
        pass
