"""What a model run says happened to crashed runs: how long each one's job waited for
its next delivery. Two runs with the same seed, rates and held faults (`Settings`) at
different settings pair their crashes by job and ordinal, so the difference is the
recovery delay the settings added, measured where a what-if replay only estimates it."""

from __future__ import annotations

from sample_data.model import Model


def retry_waits(model: Model,
                job_types: frozenset[str] | None = None) -> dict[tuple[str, int], int]:
    """(job_id, n-th crash of that job) -> µs from the crashed run's delivery to the next
    delivery of its job, for every crashed run (killed silently, or settled for a lost
    worker) that was delivered again."""
    by_job: dict[str, list[int]] = {}
    for ex in model.executions:
        by_job.setdefault(ex.job.job_id, []).append(ex.idx)
    waits: dict[tuple[str, int], int] = {}
    for job_id, indexes in by_job.items():
        crashes = 0
        for here, later in zip(indexes, indexes[1:], strict=False):
            ex = model.executions[here]
            if ex.end not in ("crash", "lost"):
                continue
            if job_types is not None and ex.job.jt.name not in job_types:
                continue
            crashes += 1
            waits[(job_id, crashes)] = model.executions[later].deliver_at - ex.deliver_at
    return waits


def added_waits(before: Model, after: Model,
                job_types: frozenset[str] | None = None) -> list[float]:
    """The change of each crashed run's wait (ms), for the crashes both runs had."""
    first, second = retry_waits(before, job_types), retry_waits(after, job_types)
    return [(second[k] - first[k]) / 1000.0 for k in sorted(first.keys() & second.keys())]
