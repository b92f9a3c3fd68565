"""Each failure mode shows up in the truth when its rate is on, and traffic is clean without."""

from __future__ import annotations

from typing import Any

import pytest

import sample_data
from sample_data import Rates


def _run(**on: float) -> dict[str, Any]:
    rates = {name: 0.0 for name in Rates.names()}
    rates.update(on)
    return sample_data.generate(seed=11, target_events=5000, hours=1.0, **rates).truth


def _causes(truth: dict[str, Any]) -> set[str]:
    return {c for d in truth["duplicates"] for c in d["causes"]}


CAUSE_MODES = ["producer_retry", "visibility_timeout", "worker_crash", "broker_redelivery",
               "retry_after_failure"]


def test_all_rates_off_gives_clean_traffic() -> None:
    truth = _run()
    assert truth["duplicates"] == []
    assert truth["lock_overruns"] == []
    assert truth["split_brains"] == []
    assert truth["stampedes"] == []
    assert truth["skewed_workers"] == []


@pytest.mark.parametrize("mode", CAUSE_MODES)
def test_cause_mode_appears_when_on(mode: str) -> None:
    assert mode in _causes(_run(**{mode: 0.15}))


@pytest.mark.parametrize("mode", ["producer_retry", "worker_crash"])
def test_cause_mode_absent_when_off(mode: str) -> None:
    rates = {name: getattr(Rates(), name) for name in Rates.names()}
    rates[mode] = 0.0
    truth = sample_data.generate(seed=11, target_events=5000, hours=1.0, **rates).truth
    assert mode not in _causes(truth)


def test_stampede_appears_when_on() -> None:
    assert _run(cache_stampede=3.0)["stampedes"]


def test_lock_expiry_without_overlap() -> None:
    truth = _run(lock_expiry=0.3, overlap=0.0)
    assert truth["lock_overruns"]
    assert all(o["overlapped_by"] is None for o in truth["lock_overruns"])


def test_lock_expiry_overlapped() -> None:
    truth = _run(lock_expiry=0.3, overlap=1.0)
    assert any(o["overlapped_by"] for o in truth["lock_overruns"])


def test_overlap_by_redelivery_marks_the_duplicate() -> None:
    truth = _run(lock_expiry=0.3, overlap=1.0, visibility_timeout=0.01)
    assert any(d["overlapped"] and d["lock_expired_while_running"] for d in truth["duplicates"])


def test_clock_skew_appears_when_on() -> None:
    truth = _run(clock_skew=0.3)
    assert truth["skewed_workers"]
    tolerance = truth["clock_skew_tolerance_ms"]
    assert all(abs(truth["clock_offsets_ms"][w]) > tolerance for w in truth["skewed_workers"])
    assert max(abs(o) for o in truth["clock_offsets_ms"].values()) <= 200


def test_split_brain_appears_when_on() -> None:
    truth = _run(split_brain=0.1)
    assert truth["split_brains"]
    assert all(len(set(s["owners"])) == 2 for s in truth["split_brains"])


@pytest.mark.parametrize("mode,section", [("split_brain", "split_brains"),
                                          ("cache_stampede", "stampedes"),
                                          ("clock_skew", "skewed_workers")])
def test_mode_absent_when_off(mode: str, section: str) -> None:
    rates = {name: getattr(Rates(), name) for name in Rates.names()}
    rates[mode] = 0.0
    truth = sample_data.generate(seed=11, target_events=5000, hours=1.0, **rates).truth
    assert truth[section] == []
