"""The stores: durable segments, repeats collapse, compaction, retention, two processes."""

import multiprocessing
import time
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import listed_once
from rows_support import many_rows
from support.charge_events import CHARGE, count

from queries import timeline
from store.clickhouse import events_ddl
from store.embedded import EmbeddedStore
from store.schema import EVENTS_SCHEMA, RUNS_SCHEMA, VIEW_SCHEMA, as_events, as_runs, concat


def test_written_rows_come_back(store, make_table) -> None:
    store.write(make_table(CHARGE))
    frame = store.execute("SELECT event FROM events ORDER BY ts")
    assert frame["event"].tolist() == ["enqueue", "deliver", "side_effect", "ack"]


def test_writing_the_same_batch_twice_changes_no_answer(store, make_table) -> None:
    store.write(make_table(CHARGE))
    once = timeline(store, "inv-1")
    store.write(make_table(CHARGE))
    assert count(store) == 4
    assert timeline(store, "inv-1")["event_uid"].tolist() == once["event_uid"].tolist()


def test_segments_are_split_by_utc_day(embedded, make_table) -> None:
    late = {**CHARGE[3], "ts": "2025-12-01T00:00:01+00:00"}
    embedded.write(make_table([*CHARGE[:3], late]))
    assert embedded.days() == ["2025-11-30", "2025-12-01"]


def test_a_segment_keeps_dictionaries_for_few_valued_columns_only(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE))
    (segment,) = embedded.segments()
    chunks = pq.ParquetFile(segment).metadata.row_group(0)
    encodings = {chunks.column(i).path_in_schema: chunks.column(i).encodings
                 for i in range(chunks.num_columns)}
    assert "RLE_DICTIONARY" in encodings["event"]
    assert "RLE_DICTIONARY" in encodings["worker_id"]
    for unique in ("event_uid", "job_id", "idempotency_key", "lock_owner", "attrs"):
        assert "RLE_DICTIONARY" not in encodings[unique], unique


def test_a_batch_of_string_views_is_split_by_day_and_reads_back_as_strings(
    embedded, make_table
) -> None:
    late = {**CHARGE[3], "ts": "2025-12-01T00:00:01+00:00"}
    embedded.write(make_table([*CHARGE[:3], late]).cast(VIEW_SCHEMA))
    assert embedded.days() == ["2025-11-30", "2025-12-01"]
    assert all(pq.read_schema(p) == EVENTS_SCHEMA for p in embedded.segments())


def test_a_batch_already_in_the_event_schema_is_used_as_it_is(make_table) -> None:
    table = make_table(CHARGE)
    assert as_events(table) is table


def test_a_batch_in_another_schema_is_cast_to_the_event_schema(make_table) -> None:
    views = make_table(CHARGE).cast(VIEW_SCHEMA)
    assert as_events(views).schema == EVENTS_SCHEMA
    assert as_events(views)["job_id"].to_pylist() == views["job_id"].to_pylist()


def test_runs_expand_back_to_the_plain_rows(make_table) -> None:
    table = make_table(CHARGE)
    runs = as_runs(table)
    assert runs.schema == RUNS_SCHEMA
    assert as_events(runs).equals(table)


def test_equal_adjacent_values_are_stored_once_as_runs(make_table) -> None:
    runs = as_runs(make_table(CHARGE))  # four rows of one job
    assert len(runs["job_id"].chunk(0).values) == 1
    assert len(runs["event"].chunk(0)) == 4  # a row's own columns stay plain


def test_batches_of_runs_stay_runs_and_a_plain_one_makes_them_plain(make_table) -> None:
    runs, plain = as_runs(make_table(CHARGE)), make_table(CHARGE)
    assert concat([runs, runs]).schema == RUNS_SCHEMA
    mixed = concat([runs, plain])
    assert mixed.schema == EVENTS_SCHEMA
    assert mixed.equals(pa.concat_tables([plain, plain]))


def test_a_parquet_segment_written_from_runs_holds_the_plain_rows(
    embedded, make_table
) -> None:
    embedded.write(as_runs(make_table(CHARGE)))
    assert pq.read_table(embedded.segments()[0]).schema.field("job_id").type == pa.string()
    assert count(embedded) == 4


def test_a_day_split_counts_days_before_the_epoch_too(embedded, make_table) -> None:
    before = {**CHARGE[0], "ts": "1969-12-31T23:59:59.999999Z"}
    after = {**CHARGE[1], "ts": "1970-01-01T00:00:00Z"}
    embedded.write(make_table([before, after]))
    assert embedded.days() == ["1969-12-31", "1970-01-01"]


def test_no_temporary_files_are_left_after_a_write(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE))
    leftovers = [p for p in embedded.root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_compaction_merges_and_sorts_without_repeats(embedded, make_table) -> None:
    for record in reversed(CHARGE):
        embedded.write(make_table([record]))
    embedded.write(make_table(CHARGE))
    before = timeline(embedded, "inv-1")
    assert embedded.compact() == 5
    segments = embedded.segments()
    assert len(segments) == 1
    merged = pq.read_table(segments[0])
    assert merged.num_rows == 4
    assert timeline(embedded, "inv-1")["event_uid"].tolist() == before["event_uid"].tolist()


def test_retention_drops_whole_days(embedded, make_table) -> None:
    old = [{**r, "ts": r["ts"].replace("2025-11-30", "2025-10-01")} for r in CHARGE]
    embedded.write(make_table(old))
    embedded.write(make_table(CHARGE))
    assert embedded.drop_days_before(date(2025, 11, 1)) == ["2025-10-01"]
    assert embedded.days() == ["2025-11-30"]
    assert count(embedded) == 4


def test_a_reader_sees_segments_written_after_it_opened(embedded, make_table) -> None:
    reader = EmbeddedStore(embedded.root)
    assert count(reader) == 0
    embedded.write(make_table(CHARGE))
    assert count(reader) == 4


def _write_many(root: str, batches: int) -> None:
    from tests.conftest import events_to_table

    writer = EmbeddedStore(root)
    for i in range(batches):
        records = [{**r, "job_id": f"j{i}", "idempotency_key": f"inv-{i}"} for r in CHARGE]
        writer.write(events_to_table(records))


def test_a_writer_process_and_a_reader_process_share_one_store(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    context = multiprocessing.get_context("spawn")
    writer = context.Process(target=_write_many, args=(root, 40))
    writer.start()
    reader = EmbeddedStore(root)
    seen = []
    deadline = time.monotonic() + 60
    while writer.is_alive() and time.monotonic() < deadline:
        seen.append(count(reader))  # every answer is a whole number of batches
        if len(seen) % 5 == 0:
            reader.compact()
    writer.join(timeout=60)
    assert writer.exitcode == 0
    assert all(n % 4 == 0 for n in seen)
    assert seen == sorted(seen)
    assert count(reader) == 160


def test_clickhouse_ddl_on_a_cluster_is_replicated_and_distributed() -> None:
    statements = events_ddl("jobs", ttl_days=30, cluster="prod")
    assert "ON CLUSTER prod" in statements[1]
    assert "ReplicatedReplacingMergeTree" in statements[1]
    assert "TTL toDateTime(ts) + INTERVAL 30 DAY" in statements[1]
    assert "ENGINE = Distributed(prod, jobs, events_local" in statements[2]


def test_clickhouse_ddl_refuses_a_hostile_identifier() -> None:
    import pytest

    from store.base import StoreError

    with pytest.raises(StoreError):
        events_ddl("jobs; DROP TABLE x")


def test_compaction_writes_a_day_index_and_a_global_index(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE))
    embedded.compact()
    names = sorted(p.name for p in (embedded.root / "index").glob("*.parquet"))
    assert names[0] == "day=2025-11-30.parquet"
    assert names[1].startswith("lookup-") and len(names) == 2


def test_every_index_file_has_its_membership_filter_and_no_other_is_left(
    embedded, make_table
) -> None:
    from store.lookup_index import filter_of

    for n in range(3):  # the day index replaced twice, the global one twice
        embedded.write(make_table(_charge(f"inv-{n}")))
        embedded.compact()
    index_dir = embedded.root / "index"
    named = {filter_of(p) for p in index_dir.glob("*.parquet")}
    assert None not in named and all(p.exists() for p in named)
    assert set(index_dir.glob("*.filter")) == named


def test_the_index_names_the_row_group_of_a_key_and_of_a_job(embedded, make_table) -> None:
    from store.lookup_index import LookupIndex, global_indexes

    embedded.write(make_table(CHARGE))
    embedded.compact()
    index = LookupIndex(global_indexes(embedded.root / "index")[-1])
    segment = embedded.segments()[0]
    expected = {(f"{segment.parent.name}/{segment.name}", 0)}
    assert index.find(["inv-1"]) == expected
    assert index.find(["j1"]) == expected
    assert index.find(["nope"]) == set()
    index.close()


def test_a_newer_index_generation_moves_the_older_to_trash(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE))
    embedded.compact()
    first = next((embedded.root / "index").glob("lookup-*.parquet"))
    embedded.write(make_table([{**CHARGE[0], "job_id": "j2", "idempotency_key": "inv-2"}]))
    embedded.compact()
    assert not first.exists()
    assert any(first.name in p.name for p in embedded.trash_dir.iterdir())


def test_a_compacted_and_indexed_day_is_not_merged_again(embedded, make_table) -> None:
    embedded.write(make_table(CHARGE))
    assert embedded.compact() == 1  # a lone segment is sorted and indexed once
    assert embedded.compact() == 0


def _charge(key: str) -> list[dict]:
    """CHARGE for another job and key."""
    return [{**r, "job_id": f"job-{key}", "idempotency_key": key} for r in CHARGE]


def test_new_rows_are_compacted_without_rewriting_the_day(embedded, make_table) -> None:
    embedded.write(make_table(_charge("inv-1")))
    embedded.compact()
    (first,) = embedded.segments()
    embedded.write(make_table(_charge("inv-2")))
    assert embedded.compact() == 1
    assert first in embedded.segments() and len(embedded.segments()) == 2
    assert count(embedded) == 8


def test_compacted_segments_of_one_tier_are_merged_four_at_a_time(embedded, make_table) -> None:
    for n in range(3):
        embedded.write(make_table(_charge(f"inv-{n}")))
        embedded.compact()
    assert len(embedded.segments()) == 3
    embedded.write(make_table(_charge("inv-3")))
    assert embedded.compact() == 1 + 4  # the new rows, then the four small segments
    (merged,) = embedded.segments()
    keys = pq.read_table(merged, columns=["idempotency_key"])["idempotency_key"].to_pylist()
    assert keys == sorted(keys) and len(keys) == 16


def test_settled_segments_are_not_merged_again(embedded, make_table, monkeypatch) -> None:
    import store.embedded

    monkeypatch.setattr(store.embedded, "SETTLED_ROWS", len(CHARGE))
    for n in range(5):
        embedded.write(make_table(_charge(f"inv-{n}")))
        embedded.compact()
    assert len(embedded.segments()) == 5


def test_the_day_index_keeps_the_segments_not_merged_again(embedded, make_table) -> None:
    from store.lookup_index import LookupIndex, global_indexes, segment_name

    embedded.write(make_table(_charge("inv-1")))
    embedded.compact()
    (first,) = embedded.segments()
    embedded.write(make_table(_charge("inv-2")))
    embedded.compact()
    (second,) = (p for p in embedded.segments() if p != first)
    index = LookupIndex(global_indexes(embedded.root / "index")[-1])
    try:
        assert index.find(["inv-1"]) == {(segment_name(first), 0)}
        assert index.find(["inv-2"]) == {(segment_name(second), 0)}
    finally:
        index.close()


def test_compaction_clears_what_a_merge_that_died_spilled(embedded, make_table) -> None:
    left = embedded.root / ".compaction-spill" / "duckdb_temp_storage-0.tmp"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"x" * 4096)
    embedded.write(make_table(CHARGE))
    embedded.compact()
    assert not left.exists()


def test_the_global_index_is_merged_no_sooner_than_asked(embedded, make_table) -> None:
    from store.lookup_index import global_indexes

    embedded.write(make_table(_charge("inv-1")))
    embedded.compact(index_every=3600)  # none yet: merged
    (first,) = global_indexes(embedded.root / "index")
    embedded.write(make_table(_charge("inv-2")))
    embedded.compact(index_every=3600)
    assert global_indexes(embedded.root / "index") == [first]
    embedded.compact(index_every=0)
    assert global_indexes(embedded.root / "index") != [first]


def test_retention_drops_the_days_index(embedded, make_table) -> None:
    old = [{**r, "ts": r["ts"].replace("2025-11-30", "2025-10-01")} for r in CHARGE]
    embedded.write(make_table(old + CHARGE))
    embedded.compact()
    embedded.drop_days_before(date(2025, 11, 1))
    days = sorted(p.name for p in (embedded.root / "index").glob("day=*.parquet"))
    assert days == ["day=2025-11-30.parquet"]
    assert [p.name.split(".")[0] for p in (embedded.root / "index").glob("day=*.filter")] == [
        "day=2025-11-30"
    ]


def test_compacted_segments_keep_only_the_event_columns(embedded, make_table) -> None:
    from store.schema import EVENTS_SCHEMA

    embedded.write(make_table(CHARGE))
    embedded.compact()
    assert pq.read_schema(embedded.segments()[0]).names == EVENTS_SCHEMA.names


def _write_jobs_of_one_key(root: str, batches: int) -> None:
    from tests.conftest import events_to_table

    writer = EmbeddedStore(root)
    for i in range(batches):
        day = f"2025-11-{1 + i % 28:02d}"
        records = [{**r, "job_id": f"j{i}", "ts": r["ts"].replace("2025-11-30", day)}
                   for r in CHARGE]
        writer.write(events_to_table(records))


def test_a_timeline_read_while_a_writer_process_adds_jobs_is_whole(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    context = multiprocessing.get_context("spawn")
    writer = context.Process(target=_write_jobs_of_one_key, args=(root, 40))
    writer.start()
    reader = EmbeddedStore(root)
    seen = []
    deadline = time.monotonic() + 60
    while writer.is_alive() and time.monotonic() < deadline:
        seen.append(len(timeline(reader, "inv-1")))  # whole jobs only, never fewer
        if len(seen) % 3 == 0:
            reader.compact()
    writer.join(timeout=60)
    assert writer.exitcode == 0
    assert all(n % 4 == 0 for n in seen)
    assert seen == sorted(seen)
    reader.compact()
    assert len(timeline(reader, "inv-1")) == 160


def test_clickhouse_ddl_indexes_job_id_for_the_timeline() -> None:
    assert "INDEX job_id_bloom job_id TYPE bloom_filter" in events_ddl("jobs")[1]


def test_an_interrupted_compaction_keeps_every_row_and_no_partial_file(embedded) -> None:
    import threading

    import pytest

    from store.embedded import CompactionInterrupted

    rows = many_rows(500_000)
    embedded.write(rows)
    embedded.write(rows)  # sent twice: a merge long enough to interrupt
    before = sorted(embedded.segments())
    raised: list[BaseException] = []

    def compact() -> None:
        try:
            embedded.compact()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            raised.append(exc)

    worker = threading.Thread(target=compact)
    worker.start()
    deadline = time.monotonic() + 30
    while embedded._merging is None and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    embedded.interrupt_compaction()
    worker.join(30)
    assert [type(exc) for exc in raised] == [CompactionInterrupted]
    assert sorted(embedded.segments()) == before
    assert not list(embedded.events_dir.rglob("*.tmp"))
    with pytest.raises(CompactionInterrupted):
        embedded.compact()  # this store object compacts no more
    assert EmbeddedStore(embedded.root).compact() == 2
    assert count(embedded) == 500_000


def test_a_parquet_segment_compacted_between_listing_and_binding_is_listed_again(
    embedded, make_table, monkeypatch
) -> None:
    embedded.write(make_table(_charge("inv-1")))
    embedded.write(make_table(_charge("inv-2")))
    stale = embedded.segments()
    embedded.compact()  # both listed segments are merged into one and leave for .trash
    assert not any(p.exists() for p in stale)
    reader = EmbeddedStore(embedded.root)
    listed_once(monkeypatch, stale)
    assert count(reader) == 8
    reader.close()
