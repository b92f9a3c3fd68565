"""One charge job's four events as contract dicts (enqueue, deliver, side effect, ack),
and how many distinct events a store holds: what the store tests write and count."""

from __future__ import annotations

CHARGE = [
    {
        "ts": "2025-11-30T12:00:00Z",
        "event": "enqueue",
        "job_id": "j1",
        "job_type": "billing.charge",
        "idempotency_key": "inv-1",
    },
    {
        "ts": "2025-11-30T12:00:01Z",
        "event": "deliver",
        "job_id": "j1",
        "job_type": "billing.charge",
        "idempotency_key": "inv-1",
        "delivery_attempt": 1,
        "worker_id": "w1",
    },
    {
        "ts": "2025-11-30T12:00:02Z",
        "event": "side_effect",
        "job_id": "j1",
        "job_type": "billing.charge",
        "idempotency_key": "inv-1",
        "delivery_attempt": 1,
        "worker_id": "w1",
    },
    {
        "ts": "2025-11-30T12:00:03Z",
        "event": "ack",
        "job_id": "j1",
        "job_type": "billing.charge",
        "delivery_attempt": 1,
        "worker_id": "w1",
    },
]


def count(store) -> int:
    """Distinct events in the store (a repeat written again is one)."""
    return int(store.execute("SELECT count(DISTINCT event_uid) AS n FROM events")["n"][0])
