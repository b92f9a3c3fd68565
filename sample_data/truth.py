"""Ground truth, read from the model's own records (executions, grants, jobs, clocks).

The rules are CONTRACT.md's derived notions applied to what really happened, in true
time. Where skew or a lost span could hide a fact from the events, the fact is still
stated and also listed under `unobservable` with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from typing import Any

from sample_data.clock import MARGIN, MAX_OFFSET_MS, MS, SECOND, SKEW_TOLERANCE_MS, rfc3339
from sample_data.model import Execution, Grant, Model

CAUSES = (
    "producer_retry",
    "visibility_timeout",
    "worker_crash",
    "broker_redelivery",
    "retry_after_failure",
    "unknown",
)
STAMPEDE_MIN_EXECUTIONS = 10
STAMPEDE_WINDOW_US = 10 * SECOND


def _attempt(ex: Execution) -> int | None:
    return None if ex.job.jt.celery else ex.attempt


def _causes(model: Model, execs: list[Execution], n_job_ids: int,
            unobservable: list[dict[str, Any]]) -> list[str]:
    found: set[str] = set()
    if n_job_ids >= 2:
        found.add("producer_retry")
    by_job: dict[str, list[Execution]] = defaultdict(list)
    for ex in execs:
        by_job[ex.job.job_id].append(ex)
    for job_id, runs in by_job.items():
        runs.sort(key=lambda e: (e.deliver_at, e.idx))
        for i, later in enumerate(runs[1:], start=1):
            d = later.deliver_at
            for earlier in runs[:i]:
                if abs(earlier.last_at - d) < MARGIN:
                    unobservable.append({
                        "key": later.job.key, "kind": "cause_ordering", "form": "all",
                        "why": f"job {job_id}: an earlier attempt's last event is "
                               f"{(earlier.last_at - d) / MS:+.0f} ms from a redelivery; clock "
                               f"offsets up to {MAX_OFFSET_MS:.0f} ms can reorder them"})
                if earlier.last_at > d:
                    found.add("visibility_timeout")
                elif earlier.end in ("crash", "lost"):
                    found.add("worker_crash")
                elif earlier.end == "ack":
                    found.add("broker_redelivery")
                elif earlier.end in ("nack", "fail"):
                    found.add("retry_after_failure")
    ordered = [c for c in CAUSES if c in found]
    return ordered or ["unknown"]


def _overruns(model: Model, unobservable: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], dict[int, str | None]]:
    by_key: dict[str, list[Grant]] = defaultdict(list)
    for g in model.grants:
        by_key[g.lock_key].append(g)
    rows: list[dict[str, Any]] = []
    flags: dict[int, str | None] = {}
    for g in model.grants:
        ex = g.ex
        if g.valid_until >= ex.last_at:
            continue
        other = next((o for o in by_key[g.lock_key] if o.owner != g.owner
                      and g.valid_until < o.acquired_at < ex.last_at), None)
        by = other.owner if other else None
        flags[ex.idx] = by
        rows.append({
            "key": ex.job.key, "job_id": ex.job.job_id, "delivery_attempt": _attempt(ex),
            "worker_id": ex.worker_id, "lock_key": g.lock_key, "lock_owner": g.owner,
            "overlapped_by": by, "expired_at": rfc3339(g.valid_until),
            "execution_end": rfc3339(ex.last_at),
            "overrun_ms": (ex.last_at - g.valid_until) // MS})
        edge = min(other.acquired_at - g.valid_until,
                   ex.last_at - other.acquired_at) if other else MARGIN
        if edge < MARGIN:
            unobservable.append({
                "key": ex.job.key, "kind": "overlap_ordering", "form": "all",
                "why": f"{g.lock_key}: the other owner acquired within {MARGIN // MS} ms of the "
                       "gap's edge; clock offsets can move it outside"})
    return rows, flags


def _split_brains(model: Model, unobservable: list[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], set[int]]:
    by_key: dict[str, list[Grant]] = defaultdict(list)
    for g in model.grants:
        by_key[g.lock_key].append(g)
    rows: list[dict[str, Any]] = []
    involved: set[int] = set()
    for lock_key, grants in by_key.items():
        grants.sort(key=lambda g: g.acquired_at)
        for i, a in enumerate(grants):
            for b in grants[i + 1:]:
                if b.acquired_at >= a.held_until:
                    continue
                if a.owner == b.owner:
                    continue
                start, end = b.acquired_at, min(a.held_until, b.held_until)
                rows.append({"lock_key": lock_key, "owners": [a.owner, b.owner],
                             "workers": [a.ex.worker_id, b.ex.worker_id],
                             "keys": [a.ex.job.key, b.ex.job.key],
                             "start": rfc3339(start), "end": rfc3339(end)})
                involved.update((a.ex.idx, b.ex.idx))
                if end - start < MARGIN:
                    unobservable.append({
                        "key": lock_key, "kind": "split_brain_ordering", "form": "all",
                        "why": f"the two grants overlap for {(end - start) // MS} ms only"})
    return rows, involved


def _stampedes(model: Model) -> list[dict[str, Any]]:
    starts: dict[str, list[int]] = defaultdict(list)
    for ex in model.executions:
        starts[ex.job.resource_key].append(ex.deliver_at)
    rows = []
    for resource, ts in sorted(starts.items()):
        if len(ts) < STAMPEDE_MIN_EXECUTIONS:
            continue
        ts.sort()
        marked = [False] * len(ts)
        j = 0
        for i in range(len(ts)):
            j = max(j, i)
            while j + 1 < len(ts) and ts[j + 1] - ts[i] <= STAMPEDE_WINDOW_US:
                j += 1
            if j - i + 1 >= STAMPEDE_MIN_EXECUTIONS:
                for k in range(i, j + 1):
                    marked[k] = True
        i = 0
        while i < len(ts):
            if not marked[i]:
                i += 1
                continue
            k = i
            while k + 1 < len(ts) and marked[k + 1] and ts[k + 1] - ts[k] <= STAMPEDE_WINDOW_US:
                k += 1
            rows.append({"resource_key": resource, "start": rfc3339(ts[i]),
                         "end": rfc3339(ts[k]), "executions": k - i + 1})
            i = k + 1
    return rows


def build_truth(model: Model, n_events: int) -> dict[str, Any]:
    """The ground-truth document for one model run."""
    unobservable: list[dict[str, Any]] = []
    overruns, overrun_by = _overruns(model, unobservable)
    split_brains, split_execs = _split_brains(model, unobservable)
    job_ids_by_key: dict[str, list[str]] = defaultdict(list)
    for job in model.jobs:
        job_ids_by_key[job.key].append(job.job_id)
    execs_by_key: dict[str, list[Execution]] = defaultdict(list)
    for ex in model.executions:
        execs_by_key[ex.job.key].append(ex)

    duplicates = []
    for key in sorted(execs_by_key):
        execs = execs_by_key[key]
        if len(execs) < 2:
            continue
        job_ids = sorted({ex.job.job_id for ex in execs})
        causes = _causes(model, execs, len(set(job_ids_by_key[key])), unobservable)
        side_effects = sum(ex.side_effect for ex in execs)
        if side_effects >= 2:
            outcome = "harmful"
        elif any(ex.effect_reported for ex in execs):
            outcome = "absorbed"
        else:
            outcome = "unknown"
        first, last = min(e.deliver_at for e in execs), max(e.last_at for e in execs)
        duplicates.append({
            "key": key, "job_type": execs[0].job.jt.name, "executions": len(execs),
            "side_effects": side_effects,
            "harmful": None if outcome == "unknown" else outcome == "harmful",
            "outcome": outcome,
            "cause": causes[0], "causes": causes, "job_ids": job_ids,
            "lock_expired_while_running": any(e.idx in overrun_by for e in execs),
            "overlapped": any(overrun_by.get(e.idx) for e in execs),
            "split_brain": any(e.idx in split_execs for e in execs),
            "first_ts": rfc3339(first), "last_ts": rfc3339(last),
        })

    for first_id, second_id in model.keyless_producer_retries:
        unobservable.append({
            "key": first_id, "kind": "producer_retry_without_key", "form": "all",
            "why": f"job type has no idempotency_key: the retried enqueue {second_id} shares no "
                   "key with it, so the duplicate effect cannot be tied together"})
    lost = [ex for ex in model.executions if ex.end in ("crash", "lost")]
    for ex in lost:
        unobservable.append({
            "key": ex.job.key, "kind": "otlp_lost_execution", "form": "otlp",
            "why": f"worker {ex.worker_id} was killed: its execution span of job "
                   f"{ex.job.job_id} was never exported"})

    offsets = dict(sorted(model.offsets_ms.items()))
    return {
        "seed": model.seed,
        "events": n_events,
        "rates": asdict(model.rates),
        "duplicates": duplicates,
        "lock_overruns": overruns,
        "split_brains": split_brains,
        "clock_offsets_ms": offsets,
        "clock_skew_tolerance_ms": SKEW_TOLERANCE_MS,
        "skewed_workers": [w for w, o in offsets.items() if abs(o) > SKEW_TOLERANCE_MS],
        "stampedes": _stampedes(model),
        "stampede_rule": {"min_executions": STAMPEDE_MIN_EXECUTIONS,
                          "window_ms": STAMPEDE_WINDOW_US // MS},
        "otlp_lost_executions": [
            {"key": ex.job.key, "job_id": ex.job.job_id, "delivery_attempt": _attempt(ex),
             "worker_id": ex.worker_id, "side_effect": ex.side_effect} for ex in lost],
        "unobservable": unobservable,
    }
