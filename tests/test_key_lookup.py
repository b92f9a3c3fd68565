"""The reader's key lookup keeps decoded row groups, within a byte budget, never stale."""

from __future__ import annotations

from datetime import date

import pyarrow.parquet as pq

from queries import timeline
from store import key_lookup
from store.embedded import EmbeddedStore
from store.segments import CHANGES

BASE = {"job_type": "billing.charge"}


def _job(day: str, key: str, job: str) -> list[dict]:
    return [
        {"ts": f"{day}T12:00:00Z", "event": "enqueue", "idempotency_key": key, "job_id": job,
         **BASE},
        {"ts": f"{day}T12:00:01Z", "event": "deliver", "idempotency_key": key, "job_id": job,
         "delivery_attempt": 1, "worker_id": "w1", **BASE},
        {"ts": f"{day}T12:00:02Z", "event": "ack", "idempotency_key": key, "job_id": job,
         "delivery_attempt": 1, "worker_id": "w1", **BASE},
    ]


def _count_decodes(monkeypatch) -> list[int]:
    decoded: list[int] = []
    original = pq.ParquetFile.read_row_group

    def counting(self, *args, **kwargs):
        decoded.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    return decoded


def test_a_repeated_lookup_decodes_no_row_group_again(embedded, make_table, monkeypatch):
    embedded.write(make_table(_job("2025-11-30", "inv-1", "j1")))
    embedded.compact()
    timeline(embedded, "inv-1")
    decoded = _count_decodes(monkeypatch)
    assert len(timeline(embedded, "inv-1")) == 3
    assert decoded == []


def test_decoded_row_groups_stay_within_their_byte_budget(embedded, make_table, monkeypatch):
    monkeypatch.setattr(key_lookup, "DECODED_BYTES", 1)
    two_days = _job("2025-11-29", "inv-1", "j1") + _job("2025-11-30", "inv-2", "j2")
    embedded.write(make_table(two_days))
    embedded.compact()
    assert len(timeline(embedded, "inv-1")) == 3
    assert len(timeline(embedded, "inv-2")) == 3
    assert len(embedded._finder._groups) == 1


def test_a_segment_merged_again_is_read_under_its_new_name(embedded, make_table) -> None:
    embedded.write(make_table(_job("2025-11-30", "inv-1", "j1")[:2]))
    embedded.compact()
    assert len(timeline(embedded, "inv-1")) == 2  # the first segment's group is kept
    embedded.write(make_table(_job("2025-11-30", "inv-1", "j1")[2:]))
    embedded.compact()
    assert timeline(embedded, "inv-1")["event"].tolist() == ["enqueue", "deliver", "ack"]


def _writer(embedded) -> EmbeddedStore:
    """Another handle on the same folder, as another process would open it."""
    return EmbeddedStore(embedded.root)


def test_a_lookup_with_nothing_changed_looks_at_no_day_folder(embedded, make_table) -> None:
    embedded.write(make_table(_job("2025-11-29", "inv-1", "j1")))
    timeline(embedded, "inv-1")
    timeline(embedded, "inv-1")
    assert embedded._finder.listing.relisted is False


def test_a_segment_another_writer_adds_is_seen_at_the_next_lookup(embedded, make_table) -> None:
    embedded.write(make_table(_job("2025-11-29", "inv-1", "j1")[:1]))
    assert len(timeline(embedded, "inv-1")) == 1
    _writer(embedded).write(make_table(_job("2025-11-29", "inv-1", "j1")[1:]))
    assert len(timeline(embedded, "inv-1")) == 3
    assert embedded._finder.listing.relisted is True


def test_a_compaction_by_another_process_is_seen_at_the_next_lookup(embedded, make_table) -> None:
    for event in _job("2025-11-29", "inv-1", "j1"):
        embedded.write(make_table([event]))
    assert len(timeline(embedded, "inv-1")) == 3
    _writer(embedded).compact()
    assert len(timeline(embedded, "inv-1")) == 3
    assert len(embedded._finder.listing.segments()) == 1


def test_a_day_dropped_by_retention_elsewhere_is_gone_at_the_next_lookup(
    embedded, make_table
) -> None:
    embedded.write(make_table(_job("2025-11-28", "inv-1", "j1")))
    embedded.write(make_table(_job("2025-11-30", "inv-1", "j2")))
    assert len(timeline(embedded, "inv-1")) == 6
    _writer(embedded).drop_days_before(date(2025, 11, 29))
    assert len(timeline(embedded, "inv-1")) == 3


def test_a_store_without_a_change_file_is_listed_every_time(embedded, make_table) -> None:
    embedded.write(make_table(_job("2025-11-29", "inv-1", "j1")))
    (embedded.events_dir / CHANGES).unlink()
    timeline(embedded, "inv-1")
    timeline(embedded, "inv-1")
    assert embedded._finder.listing.relisted is True


def test_days_compacted_after_the_global_index_are_found_through_their_own(
    embedded, make_table
) -> None:
    embedded.write(make_table(_job("2025-11-29", "inv-1", "j1")))
    embedded.compact()  # the global index: inv-1's day
    for key, job in (("inv-2", "j2"), ("inv-3", "j3")):  # the day index replaced twice
        embedded.write(make_table(_job("2025-11-30", key, job)))
        embedded.compact(index_every=3600)  # no new global index
        assert len(timeline(embedded, key)) == 3
        covered = embedded._finder._current_index().covers
        listed = embedded._finder.listing.segments()
        assert set(listed) <= covered  # nothing left to scan
    assert len(timeline(embedded, "inv-1")) == 3
