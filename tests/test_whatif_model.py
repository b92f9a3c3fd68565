"""The what-if replay checked against the workload model run again: setting A observed,
setting B predicted from A, then B run with the same seed and the same faults.

Tolerances: a redelivery after the visibility timeout is avoided exactly when the earlier
run fits the new timeout, which the model's faults make clear-cut (bodies outlive the old
timeout by 2-8 s), so per cause the prediction must match within one key; the crashed
runs' added wait differs from the model's only by broker latency (a few ms), so within
1 s. For a longer lock TTL the replay takes the retry of a dead holder to wait for the
lock, while the model's workers give up after 2 s and are absorbed: the prediction is an
upper bound on the delay and a lower bound on the harm avoided (docs/whatif.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import events_to_table

from queries import duplicates
from queries.whatif import Settings, whatif
from sample_data.model import Settings as ModelSettings
from sample_data.rerun import added_waits
from sample_data.workload import Workload, generate
from store.embedded import EmbeddedStore

RATES = {"visibility_timeout": 0.05, "lock_expiry": 0.08, "worker_crash": 0.02}
VT_TYPES = frozenset({"email.send_receipt", "notifications.webhook_deliver"})
LOCK_TYPES = frozenset({"billing.charge_card"})


def run_model(settings: ModelSettings, folder: Path) -> tuple[EmbeddedStore, Workload]:
    workload = generate(7, 40_000, 1.0, settings=settings, **RATES)
    store = EmbeddedStore(folder / "store")
    store.write(events_to_table(workload.events))
    return store, workload


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    return run_model(ModelSettings(), tmp_path_factory.mktemp("setting-a"))


@pytest.fixture(scope="module")
def longer_visibility(tmp_path_factory):
    return run_model(ModelSettings(visibility_timeout_ms=60_000, job_types=VT_TYPES),
                     tmp_path_factory.mktemp("setting-b-visibility"))


@pytest.fixture(scope="module")
def longer_lock(tmp_path_factory):
    return run_model(ModelSettings(lock_ttl_ms=90_000, job_types=LOCK_TYPES),
                     tmp_path_factory.mktemp("setting-b-lock"))


def causes(store, job_type: str) -> Counter:
    return Counter(duplicates(store, job_type=job_type)["cause"])


def harmful(store, job_type: str) -> int:
    return int(duplicates(store, job_type=job_type)["harmful"].sum())


@pytest.mark.parametrize("job_type", sorted(VT_TYPES))
def test_duplicates_avoided_by_a_longer_visibility_timeout_match_the_rerun(
    job_type, observed, longer_visibility
) -> None:
    (a, _), (b, _) = observed, longer_visibility
    predicted = whatif(a, Settings(visibility_timeout_ms=60_000), job_type=job_type)
    before, after = causes(a, job_type), causes(b, job_type)
    assert before["visibility_timeout"] > 0
    for row in predicted.causes.to_dict(orient="records"):
        avoided_predicted = row["before"] - row["after"]
        avoided_actual = before[row["cause"]] - after[row["cause"]]
        assert abs(avoided_predicted - avoided_actual) <= 1, (row, before, after)
    summary = predicted.summary.iloc[0]
    assert abs(int(summary["harmful_after"]) - harmful(b, job_type)) <= 1


@pytest.mark.parametrize("job_type", sorted(VT_TYPES))
def test_the_added_wait_of_crashed_runs_matches_the_rerun(
    job_type, observed, longer_visibility
) -> None:
    (a, wa), (_, wb) = observed, longer_visibility
    predicted = whatif(a, Settings(visibility_timeout_ms=60_000), job_type=job_type)
    actual = added_waits(wa.model, wb.model, frozenset({job_type}))
    assert actual, "the crashes of setting A were not met again at setting B"
    summary = predicted.summary.iloc[0]
    assert abs(summary["added_delay_p50_ms"] - float(np.quantile(actual, 0.5))) < 1_000


def test_a_longer_lock_ttl_is_predicted_conservatively(observed, longer_lock) -> None:
    (a, wa), (b, wb) = observed, longer_lock
    (job_type,) = LOCK_TYPES
    predicted = whatif(a, Settings(lock_ttl_ms=90_000), job_type=job_type).summary.iloc[0]
    assert causes(a, job_type) == causes(b, job_type)  # a lock TTL removes no run
    assert predicted["duplicates_after"] == predicted["duplicates_before"]
    harm_avoided_predicted = predicted["harmful_before"] - predicted["harmful_after"]
    harm_avoided_actual = harmful(a, job_type) - harmful(b, job_type)
    assert 0 < harm_avoided_predicted <= harm_avoided_actual
    actual = added_waits(wa.model, wb.model, LOCK_TYPES)
    assert predicted["added_delay_max_ms"] >= max(actual)
