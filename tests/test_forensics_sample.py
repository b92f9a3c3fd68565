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

pytestmark = pytest.mark.skipif(
    not (SAMPLE / "sample.truth.json").exists(), reason="no workload sample"
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
