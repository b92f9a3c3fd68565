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


def reached_and_unreached_holders() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two batches on one lock. First: j1's lock expires at 00:05 while it runs to 00:20,
    and j3 takes the lock at 00:15 (j1's overrun names o3). Then: j2 holds the lock at
    00:01-00:02 (a split brain with j1), far from j3's hold."""
    first = (locked("j1", 1, "w1", "o1", "00:00", 5000, [("00:20", "ack")])
             + locked("j3", 1, "w3", "o3", "00:15", 5000, [("00:16", "ack")]))
    then = locked("j2", 1, "w2", "o2", "00:01", 1000,
                  [("00:02", "lock_release"), ("00:02", "ack")])
    return first, then


def an_overrun_whose_other_owner_ended_before_the_batch() -> tuple[
    list[dict[str, Any]], list[dict[str, Any]]
]:
    """Two batches on one lock. First: j1's lock expires at 00:05 while it runs to 00:50,
    and j3 holds the lock at 00:10-00:12 (j1's overrun names o3). Then: j2 holds the lock
    at 00:40-00:41, inside j1's run and long after j3's hold ended."""
    first = (locked("j1", 1, "w1", "o1", "00:00", 5000, [("00:50", "ack")])
             + locked("j3", 1, "w3", "o3", "00:10", 5000,
                      [("00:12", "lock_release"), ("00:12", "ack")]))
    then = locked("j2", 1, "w2", "o2", "00:40", 1000,
                  [("00:41", "lock_release"), ("00:41", "ack")])
    return first, then


def names_in_an_overrun(incidents: list[tuple[str, ...]], owner: str) -> bool:
    """Whether a lock_expired_while_running row of `incidents` (a state's rows) names
    `owner`."""
    return any(f"'{owner}'" in "".join(row) for row in incidents if "lock_expired" in row[0])
