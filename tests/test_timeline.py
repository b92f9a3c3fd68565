"""The per-key timeline: all events of a key, in order, grouped by execution."""

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


def test_events_are_in_time_order(store, make_table) -> None:
    from queries import timeline

    store.write(make_table(list(reversed(REDELIVERED))))
    frame = timeline(store, "inv-1")
    assert frame["event"].tolist() == [r["event"] for r in REDELIVERED]


def test_events_are_grouped_by_execution(store, make_table) -> None:
    from queries import timeline

    store.write(make_table(REDELIVERED))
    frame = timeline(store, "inv-1")
    assert frame["execution"].fillna(0).tolist() == [0, 1, 1, 2, 1, 2, 2]


def test_celery_style_redelivery_without_attempt_starts_a_new_execution(store, make_table) -> None:
    from queries import timeline

    records = [{k: v for k, v in r.items() if k != "delivery_attempt"} for r in REDELIVERED]
    records = [{**r, "worker_id": "w1"} if "worker_id" in r else r for r in records]
    store.write(make_table(records))
    frame = timeline(store, "inv-1")
    assert frame["execution"].tolist()[1:4] == [1, 1, 2]


def test_a_job_id_finds_the_same_timeline(store, make_table) -> None:
    from queries import timeline

    store.write(make_table(REDELIVERED))
    assert (
        timeline(store, "j1")["event_uid"].tolist()
        == timeline(store, "inv-1")["event_uid"].tolist()
    )


def test_events_without_the_key_join_through_their_job_id(store, make_table) -> None:
    from queries import timeline

    lock = {
        "ts": "2025-11-30T12:00:01.5Z",
        "event": "lock_acquire",
        "job_id": "j1",
        "delivery_attempt": 1,
        "worker_id": "w1",
        "lock_key": "acct-1",
        "lock_owner": "o1",
        "lock_ttl_ms": 10000,
    }
    store.write(make_table([*REDELIVERED, lock]))
    frame = timeline(store, "inv-1")
    assert "lock_acquire" in frame["event"].tolist()


def test_other_keys_stay_out(store, make_table) -> None:
    from queries import timeline

    other = [{**r, "idempotency_key": "inv-2", "job_id": "j2"} for r in REDELIVERED]
    store.write(make_table(REDELIVERED + other))
    assert set(timeline(store, "inv-1")["job_id"]) == {"j1"}


def test_an_unknown_key_gives_an_empty_timeline(store, make_table) -> None:
    from queries import timeline

    store.write(make_table(REDELIVERED))
    assert timeline(store, "nope").empty
