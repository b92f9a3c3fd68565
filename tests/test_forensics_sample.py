"""End to end: on the workload model's sample, the answers equal its ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from collectors.files import ingest_files
from collectors.normalise import Normaliser
from queries import duplicates, lock_overruns

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
DUPLICATE_FIELDS = (
    "key",
    "job_type",
    "executions",
    "side_effects",
    "harmful",
    "outcome",
    "cause",
    "causes",
    "job_ids",
    "lock_expired_while_running",
    "overlapped",
    "split_brain",
)
OVERRUN_FIELDS = (
    "key",
    "job_id",
    "delivery_attempt",
    "worker_id",
    "lock_key",
    "lock_owner",
    "overlapped_by",
)

def _plain(value):
    if isinstance(value, list):
        return sorted(value)
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _rows(records, fields):
    return sorted((tuple(_plain(r[f]) for f in fields) for r in records), key=lambda row: repr(row))


@pytest.fixture
def sample_store(store):
    ingest_files([str(SAMPLE / "sample.jsonl.gz")], store, Normaliser())
    return store


@pytest.fixture(scope="module")
def truth():
    return json.loads((SAMPLE / "sample.truth.json").read_text())


def test_duplicates_equal_the_truth(sample_store, truth) -> None:
    found = duplicates(sample_store).to_dict(orient="records")
    assert _rows(found, DUPLICATE_FIELDS) == _rows(truth["duplicates"], DUPLICATE_FIELDS)


def test_lock_overruns_equal_the_truth(sample_store, truth) -> None:
    found = lock_overruns(sample_store).to_dict(orient="records")
    assert _rows(found, OVERRUN_FIELDS) == _rows(truth["lock_overruns"], OVERRUN_FIELDS)


def test_a_fresh_seed_gives_its_own_truth(tmp_path, embedded) -> None:
    import sample_data

    workload = sample_data.generate(seed=3, target_events=15_000)
    path = tmp_path / "seed3.jsonl"
    workload.write_jsonl(path)
    ingest_files([str(path)], embedded, Normaliser())
    truth = workload.truth
    assert truth["duplicates"], "the fresh workload has duplicates to find"
    found = duplicates(embedded).to_dict(orient="records")
    assert _rows(found, DUPLICATE_FIELDS) == _rows(truth["duplicates"], DUPLICATE_FIELDS)
    overruns = lock_overruns(embedded).to_dict(orient="records")
    assert _rows(overruns, OVERRUN_FIELDS) == _rows(truth["lock_overruns"], OVERRUN_FIELDS)


def test_the_same_workload_as_spans_gives_the_truth_it_can_show(embedded, truth) -> None:
    """Spans of a killed worker are never exported; the model lists those keys as unobservable
    in the span form, and every other duplicate must come out exactly as from the logs."""
    ingest_files([str(SAMPLE / "sample.otlp.jsonl.gz")], embedded, Normaliser())
    hidden = {u["key"] for u in truth["unobservable"] if u.get("form") in ("otlp", "all")}
    expected = [d for d in truth["duplicates"] if d["key"] not in hidden]
    found = [d for d in duplicates(embedded).to_dict(orient="records") if d["key"] not in hidden]
    assert _rows(found, DUPLICATE_FIELDS) == _rows(expected, DUPLICATE_FIELDS)


def test_split_brains_equal_the_truth(sample_store, truth) -> None:
    from queries import split_brains

    found = split_brains(sample_store)
    assert set(found["lock_key"]) == {s["lock_key"] for s in truth["split_brains"]}


def test_cache_stampedes_equal_the_truth(sample_store, truth) -> None:
    from queries import checklist

    found = checklist(sample_store)["cache_stampedes"]
    assert sorted(zip(found["resource_key"], found["executions"], strict=True)) == sorted(
        (s["resource_key"], s["executions"]) for s in truth["stampedes"]
    )


def test_workers_flagged_for_clock_skew_are_truly_skewed_by_about_that_much(
    sample_store, truth
) -> None:
    """Causal pairs show a clock that runs behind; every worker flagged is one the model
    skewed, and the estimate is close to the model's true offset."""
    from queries import checklist

    skew = checklist(sample_store)["clock_skew"]
    flagged = skew[skew["skewed"]]
    assert len(flagged) > 0
    assert set(flagged["worker_id"]) <= set(truth["skewed_workers"])
    offsets = truth["clock_offsets_ms"]
    for row in flagged.itertuples():
        assert abs(row.behind_ms + offsets[row.worker_id]) < 25, row.worker_id
