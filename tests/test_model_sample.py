"""The committed sample is exactly what `python -m sample_data` regenerates."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import sample_data
from sample_data.__main__ import main


def test_committed_sample_regenerates_byte_identical(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    for path in (sample_data.SAMPLE_PATH, sample_data.SAMPLE_TRUTH_PATH,
                 sample_data.SAMPLE_OTLP_PATH):
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


def test_sample_has_every_failure_mode() -> None:
    truth = json.loads(sample_data.SAMPLE_TRUTH_PATH.read_text())
    causes = [c for d in truth["duplicates"] for c in d["causes"]]
    for cause in ("producer_retry", "visibility_timeout", "worker_crash", "broker_redelivery",
                  "retry_after_failure"):
        assert causes.count(cause) >= 3, cause
    assert sum(o["overlapped_by"] is None for o in truth["lock_overruns"]) >= 3
    assert sum(o["overlapped_by"] is not None for o in truth["lock_overruns"]) >= 3
    assert len(truth["split_brains"]) >= 3
    assert len(truth["stampedes"]) >= 3
    assert len(truth["skewed_workers"]) >= 3
    with gzip.open(sample_data.SAMPLE_PATH) as f:
        assert 20_000 <= sum(1 for _ in f) <= 40_000
