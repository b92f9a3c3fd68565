"""Kept answers: what a page asks without filters, read from the build, equals the live query."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import queries
from collectors.files import ingest_files
from collectors.normalise import Normaliser
from derive import catalogue
from queries.derived import query, query_live
from queries.loader import render
from store.base import to_frame
from store.embedded import EmbeddedStore

#: Each kept answer's question and the parameters it is kept for.
KEPT = {answer.name: dict(answer.params) for answer in catalogue.ANSWERS}

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"

# The search as it was before the lookup table: five prefix scans of `events`.
SCAN_SEARCH = """
WITH hits AS (
    SELECT 'idempotency_key' AS kind, idempotency_key AS value, job_id, ts FROM events
    WHERE left(idempotency_key, length(:prefix)) = :prefix
    UNION ALL SELECT 'job_id', job_id, job_id, ts FROM events
    WHERE left(job_id, length(:prefix)) = :prefix
    UNION ALL SELECT 'resource_key', resource_key, job_id, ts FROM events
    WHERE left(resource_key, length(:prefix)) = :prefix
    UNION ALL SELECT 'lock_owner', lock_owner, job_id, ts FROM events
    WHERE left(lock_owner, length(:prefix)) = :prefix
    UNION ALL SELECT 'lock_key', lock_key, job_id, ts FROM events
    WHERE left(lock_key, length(:prefix)) = :prefix
),
job_keys AS (
    SELECT job_id, max(idempotency_key) AS idempotency_key FROM events
    WHERE job_id IN (SELECT job_id FROM hits WHERE job_id IS NOT NULL) GROUP BY job_id
)
SELECT h.kind AS kind, h.value AS value,
       coalesce(nullif(j.idempotency_key, ''), h.job_id) AS key,
       count(*) AS events, max(h.ts) AS last_ts
FROM hits AS h LEFT JOIN job_keys AS j ON h.job_id = j.job_id
WHERE h.job_id IS NOT NULL
GROUP BY h.kind, h.value, coalesce(nullif(j.idempotency_key, ''), h.job_id)
"""


@pytest.fixture
def sample_store(store):
    ingest_files([str(SAMPLE / "sample.jsonl.gz")], store, Normaliser())
    return store


def live(store, name: str) -> pd.DataFrame:
    return to_frame(query_live(store, name, **KEPT[name]))


def _lists_sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """An aggregated list's element order is the engine's choice (the API sorts them)."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any():
            frame[column] = frame[column].map(
                lambda v: sorted(v) if hasattr(v, "__len__") and not isinstance(v, str) else v
            )
    return frame


@pytest.mark.parametrize("name", list(KEPT))
def test_a_kept_answer_equals_the_query_run_live(sample_store, name) -> None:
    kept = query(sample_store, name, **KEPT[name])
    pd.testing.assert_frame_equal(
        _lists_sorted(kept), _lists_sorted(live(sample_store, name))
    )


def test_kept_answers_read_back_from_parquet_keep_their_types(tmp_path, make_table) -> None:
    writer = EmbeddedStore(tmp_path / "store")
    ingest_files([str(SAMPLE / "sample.jsonl.gz")], writer, Normaliser())
    built = {name: query(writer, name, **params) for name, params in KEPT.items()}
    reader = EmbeddedStore(tmp_path / "store")  # attaches the persisted build
    for name, params in KEPT.items():
        pd.testing.assert_frame_equal(query(reader, name, **params), built[name], obj=name)
    pd.testing.assert_frame_equal(queries.duplicates(reader), queries.duplicates(writer))


def test_unfiltered_duplicates_over_time_equals_the_filtered_query(sample_store) -> None:
    kept = queries.duplicates_over_time(sample_store, bucket="1h")
    far = pd.Timestamp("1970-01-02", tz="UTC")  # a filter that selects every execution
    filtered = queries.duplicates_over_time(sample_store, bucket="1h", since=far)
    assert not kept.empty
    pd.testing.assert_frame_equal(kept, filtered)


@pytest.mark.parametrize("prefix", ["", "inv", "j", "acct-1", "worker", "no-such-prefix"])
def test_key_search_equals_a_scan_of_the_events(sample_store, prefix) -> None:
    order = ["kind", "value", "key"]
    found = queries.key_suggestions(sample_store, prefix, limit=100_000)
    sql = render(SCAN_SEARCH, sample_store.dialect, {"prefix": prefix})
    scanned = sample_store.execute(sql, {"prefix": prefix})
    assert found["last_ts"].is_monotonic_decreasing
    found = found.sort_values(order).reset_index(drop=True)
    scanned = scanned.sort_values(order).reset_index(drop=True)
    assert found[order].equals(scanned[order])
    assert found["events"].astype("int64").tolist() == scanned["events"].astype("int64").tolist()
    assert (found["last_ts"] == scanned["last_ts"]).all()


def test_the_prefix_range_ends_after_every_match() -> None:
    from queries.forensics import _after_prefix

    assert _after_prefix("inv-") == "inv."
    assert _after_prefix("a\U0010ffff") == "b"
    assert _after_prefix("\ud7ff") == "\ue000"


def test_the_checklist_defaults_are_the_kept_ones() -> None:
    """A kept answer serves the default checklist only if both use the same thresholds."""
    import inspect

    import pandas as pd

    from queries import forensics

    defaults = inspect.signature(forensics.checklist).parameters
    window_us = int(pd.Timedelta(defaults["stampede_window"].default).value // 1_000)
    assert KEPT["checklist_stampedes"]["window_us"] == window_us
    assert (
        KEPT["checklist_stampedes"]["min_executions"]
        == defaults["stampede_min_executions"].default
    )
    assert (
        KEPT["checklist_clock_skew"]["tolerance_ms"]
        == defaults["skew_tolerance_ms"].default
    )
