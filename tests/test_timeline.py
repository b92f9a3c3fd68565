"""The per-key timeline: all events of a key, in order, grouped by execution."""

from support.timeline_events import REDELIVERED, next_day

from store.embedded import EmbeddedStore


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


# ---- the embedded store's lookup index: the same timeline as a full scan -------------


def _full_scan(store, key: str) -> list[str]:
    """The timeline's rows read from every segment, without the lookup index."""
    from queries.loader import run

    return run(store, "timeline", key=key)["event_uid"].tolist()


def test_a_compacted_store_gives_the_timeline_of_a_full_scan(embedded, make_table) -> None:
    from queries import timeline

    other = [{**r, "idempotency_key": "inv-2", "job_id": "j2"} for r in REDELIVERED]
    embedded.write(make_table(REDELIVERED + other))
    embedded.compact()
    assert timeline(embedded, "inv-1")["event_uid"].tolist() == _full_scan(embedded, "inv-1")


def test_rows_written_after_compaction_are_found(embedded, make_table) -> None:
    from queries import timeline

    embedded.write(make_table(REDELIVERED[:4]))
    embedded.compact()
    embedded.write(make_table(REDELIVERED[4:]))
    assert timeline(embedded, "inv-1")["event"].tolist() == [r["event"] for r in REDELIVERED]


def test_a_job_whose_rows_span_two_days_is_found_after_compaction(embedded, make_table) -> None:
    from queries import timeline

    late_ack = next_day(REDELIVERED[-1])
    embedded.write(make_table([*REDELIVERED[:-1], late_ack]))
    embedded.compact()
    frame = timeline(embedded, "inv-1")
    assert len(embedded.days()) == 2
    assert frame["event_uid"].tolist() == _full_scan(embedded, "inv-1")
    assert frame["event"].tolist()[-1] == "ack"


def test_a_job_id_finds_its_rows_after_compaction(embedded, make_table) -> None:
    from queries import timeline

    embedded.write(make_table([*REDELIVERED[:-1], next_day(REDELIVERED[-1])]))
    embedded.compact()
    assert timeline(embedded, "j1")["event_uid"].tolist() == _full_scan(embedded, "j1")


def test_a_key_enqueued_as_two_jobs_finds_both(embedded, make_table) -> None:
    from queries import timeline

    retry = [{**r, "job_id": "j9", "ts": r["ts"].replace("12:0", "13:0")} for r in REDELIVERED]
    embedded.write(make_table(REDELIVERED))
    embedded.compact()
    embedded.write(make_table([next_day(r) for r in retry[1:]] + retry[:1]))
    assert set(timeline(embedded, "inv-1")["job_id"]) == {"j1", "j9"}
    assert timeline(embedded, "inv-1")["event_uid"].tolist() == _full_scan(embedded, "inv-1")


def test_late_rows_compacted_beside_a_merged_day_are_found(embedded, make_table) -> None:
    from queries import timeline

    embedded.write(make_table(REDELIVERED[:4]))
    embedded.compact()
    embedded.write(make_table(REDELIVERED[4:]))
    assert embedded.compact() == 1  # the late rows alone: the day is not rewritten
    assert len(embedded.segments()) == 2
    assert timeline(embedded, "inv-1")["event"].tolist() == [r["event"] for r in REDELIVERED]


def test_retention_takes_a_dropped_days_rows_out_of_the_timeline(embedded, make_table) -> None:
    from datetime import date

    from queries import timeline

    embedded.write(make_table([*REDELIVERED[:-1], next_day(REDELIVERED[-1])]))
    embedded.compact()
    embedded.drop_days_before(date(2025, 12, 1))
    assert timeline(embedded, "j1")["event"].tolist() == ["ack"]


def test_a_reader_opened_before_compaction_follows_the_new_index(embedded, make_table) -> None:
    from queries import timeline

    reader = EmbeddedStore(embedded.root)
    embedded.write(make_table(REDELIVERED[:4]))
    assert len(timeline(reader, "inv-1")) == 4
    embedded.compact()
    embedded.write(make_table(REDELIVERED[4:]))
    embedded.compact()
    assert len(timeline(reader, "inv-1")) == len(REDELIVERED)
    reader.close()


def test_a_lookup_reads_no_segment_the_index_does_not_name(embedded, make_table) -> None:
    from queries import timeline

    elsewhere = [{**r, "ts": r["ts"].replace("11-30", "11-20"), "idempotency_key": "inv-2",
                  "job_id": "j2"} for r in REDELIVERED]
    embedded.write(make_table(REDELIVERED + elsewhere))
    embedded.compact()
    other_day = next(p for p in embedded.segments() if "2025-11-20" in str(p))
    other_day.write_bytes(b"not parquet")  # opening it would fail the lookup
    assert len(timeline(embedded, "inv-1")) == len(REDELIVERED)
