"""Small contract-event cases for the forensics suite, one story per builder."""

from __future__ import annotations

from typing import Any

DAY = "2025-11-30T12"


def ev(ts: str, event: str, job_id: str | None = None, **fields: Any) -> dict[str, Any]:
    """One contract event at 12:MM:SS on the test day."""
    record: dict[str, Any] = {"ts": f"{DAY}:{ts}Z", "event": event, **fields}
    if job_id is not None:
        record["job_id"] = job_id
    record.setdefault("job_type", "billing.charge")
    return record


def run(
    job_id: str,
    attempt: int | None,
    worker: str,
    start: str,
    steps: list[tuple[str, str]],
    **fields: Any,
) -> list[dict[str, Any]]:
    """A deliver at `start` followed by (ts, event) steps on the same worker and attempt."""
    common = {"worker_id": worker, **fields}
    if attempt is not None:
        common["delivery_attempt"] = attempt
    out = [ev(start, "deliver", job_id, visibility_timeout_ms=30_000, **common)]
    out += [ev(ts, event, job_id, **common) for ts, event in steps]
    return out


def locked(
    job_id: str,
    attempt: int,
    worker: str,
    owner: str,
    start: str,
    ttl_ms: int,
    steps: list[tuple[str, str]],
    lock_key: str = "lock:acct-1",
) -> list[dict[str, Any]]:
    """A run that acquires `lock_key` as `owner` right at its start."""
    events = run(job_id, attempt, worker, start, [])
    common = {"delivery_attempt": attempt, "worker_id": worker, "lock_key": lock_key,
              "lock_owner": owner}
    events.append(ev(start, "lock_acquire", job_id, lock_ttl_ms=ttl_ms, **common))
    for ts, event in steps:
        extra = {"lock_ttl_ms": ttl_ms} if event == "lock_renew" else {}
        lock = common if event.startswith("lock_") else {
            "delivery_attempt": attempt, "worker_id": worker}
        events.append(ev(ts, event, job_id, **lock, **extra))
    return events
