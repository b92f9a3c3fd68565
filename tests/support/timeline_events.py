"""One key's events as contract dicts: a job delivered twice (`REDELIVERED`), the second
run absorbed by the idempotency check; what the timeline tests read."""

from __future__ import annotations

BASE = {"job_type": "billing.charge", "idempotency_key": "inv-1"}


def ev(ts: str, event: str, **fields) -> dict:
    return {"ts": f"2025-11-30T12:{ts}Z", "event": event, **BASE, **fields}


REDELIVERED = [
    ev("00:00", "enqueue", job_id="j1"),
    ev("00:01", "deliver", job_id="j1", delivery_attempt=1, worker_id="w1"),
    ev("00:02", "side_effect", job_id="j1", delivery_attempt=1, worker_id="w1"),
    ev("00:31", "deliver", job_id="j1", delivery_attempt=2, worker_id="w2"),
    ev("00:32", "ack", job_id="j1", delivery_attempt=1, worker_id="w1"),
    ev("00:33", "idempotency_hit", job_id="j1", delivery_attempt=2, worker_id="w2"),
    ev("00:34", "ack", job_id="j1", delivery_attempt=2, worker_id="w2"),
]


def next_day(record: dict, ts: str = "2025-12-01T00:00:05Z") -> dict:
    """`record` moved to the next day, without its key (a late row found by its job)."""
    return {k: v for k, v in record.items() if k != "idempotency_key"} | {"ts": ts}
