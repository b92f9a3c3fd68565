"""A small store for the dashboard tests: one story per key, written as contract events.

- inv-crash: the first worker went silent after charging; the redelivery charged again
  (harmful, worker_crash), and the lock ran out while the first run was still going.
- inv-slow: the visibility timeout ran out while the first run still worked; the second
  run found the idempotency record (absorbed, visibility_timeout).
- inv-once: a mail sent once, on another queue and job type (not a duplicate).
"""

from __future__ import annotations

from typing import Any

DAY = "2025-11-30T12"
HARMFUL_KEY = "inv-crash"
ABSORBED_KEY = "inv-slow"
SINGLE_KEY = "inv-once"


def ev(ts: str, event: str, **fields: Any) -> dict[str, Any]:
    record = {"ts": f"{DAY}:{ts}Z", "event": event, "service.name": "billing", **fields}
    record.setdefault("job_type", "billing.charge")
    record.setdefault("queue", "billing")
    return record


def _crash() -> list[dict[str, Any]]:
    key = {"idempotency_key": HARMFUL_KEY, "job_id": "j-crash", "resource_key": "acct-7"}
    first = {**key, "delivery_attempt": 1, "worker_id": "w1:101"}
    second = {**key, "delivery_attempt": 2, "worker_id": "w2:202"}
    lock = {"lock_key": "lock:acct-7"}
    return [
        ev("00:00", "enqueue", **key),
        ev("00:01", "deliver", visibility_timeout_ms=30_000, **first),
        ev("00:01.2", "lock_acquire", lock_owner="own-a", lock_ttl_ms=10_000, **lock, **first),
        ev("00:04", "side_effect", **first),
        ev("00:15", "lock_expired", lock_owner="own-a", **lock, **first),
        ev("00:31", "deliver", visibility_timeout_ms=30_000, **second),
        ev("00:31.5", "lock_acquire", lock_owner="own-b", lock_ttl_ms=10_000, **lock, **second),
        ev("00:33", "side_effect", **second),
        ev("00:34", "commit", **second),
        ev("00:34.5", "lock_release", lock_owner="own-b", **lock, **second),
        ev("00:35", "ack", **second),
    ]


def _slow() -> list[dict[str, Any]]:
    key = {"idempotency_key": ABSORBED_KEY, "job_id": "j-slow"}
    first = {**key, "delivery_attempt": 1, "worker_id": "w1:101"}
    second = {**key, "delivery_attempt": 2, "worker_id": "w3:303"}
    return [
        ev("01:00", "enqueue", **key),
        ev("01:01", "deliver", visibility_timeout_ms=30_000, **first),
        ev("01:02", "side_effect", **first),
        ev("01:31", "deliver", visibility_timeout_ms=30_000, **second),
        ev("01:32", "ack", **first),
        ev("01:33", "idempotency_hit", **second),
        ev("01:34", "ack", **second),
    ]


def _once() -> list[dict[str, Any]]:
    base = {"idempotency_key": SINGLE_KEY, "job_id": "j-once", "job_type": "mail.send",
            "queue": "mail", "service.name": "mailer"}
    run = {**base, "delivery_attempt": 1, "worker_id": "w4:404"}
    return [
        ev("02:00", "enqueue", **base),
        ev("02:01", "deliver", visibility_timeout_ms=60_000, **run),
        ev("02:02", "side_effect", **run),
        ev("02:03", "ack", **run),
    ]


def dashboard_events() -> list[dict[str, Any]]:
    return [*_crash(), *_slow(), *_once()]


#: Where hostile values point: a closed local port, so a fetch would fail but still show
#: up in the browser's request log.
HOSTILE_HOST = "http://127.0.0.1:9/dupescope-hostile"
HOSTILE_KEY = f"[k]({HOSTILE_HOST}/key)"
HOSTILE_WORKER = f"![w]({HOSTILE_HOST}/worker.png)"
HOSTILE_LANE = f'<a href="{HOSTILE_HOST}/lane">lane</a><img src="{HOSTILE_HOST}/lane.png">'
HOSTILE_JOB_TYPE = f'![j]({HOSTILE_HOST}/job.png)<a href="{HOSTILE_HOST}/job">job</a>'
HOSTILE_QUEUE = f"<img src={HOSTILE_HOST}/queue.png> {HOSTILE_HOST}/bare"


def hostile_events() -> list[dict[str, Any]]:
    """A harmful worker_crash duplicate whose every text field is Markdown or HTML that
    would fetch or link to HOSTILE_HOST if a page drew it as markup."""
    key = {"idempotency_key": HOSTILE_KEY, "job_id": "j-hostile", "job_type": HOSTILE_JOB_TYPE,
           "queue": HOSTILE_QUEUE}
    first = {**key, "delivery_attempt": 1, "worker_id": HOSTILE_WORKER}
    second = {**key, "delivery_attempt": 2, "worker_id": HOSTILE_LANE}
    lock = {"lock_key": f"[lock]({HOSTILE_HOST}/lock)"}
    return [
        ev("00:00", "enqueue", **key),
        ev("00:01", "deliver", visibility_timeout_ms=30_000, **first),
        ev("00:01.2", "lock_acquire", lock_owner=f"<a href='{HOSTILE_HOST}/owner'>o</a>",
           lock_ttl_ms=10_000, **lock, **first),
        ev("00:04", "side_effect", **first),
        ev("00:31", "deliver", visibility_timeout_ms=30_000, **second),
        ev("00:33", "side_effect", **second),
        ev("00:34", "fail", reason=f"![r]({HOSTILE_HOST}/reason.png)", **second),
    ]
