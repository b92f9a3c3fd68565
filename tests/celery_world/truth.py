"""What really ran, from the ledger and from what the harness injected: which keys (and
which job_ids) ran more than once, and the true cause of each, in the contract's words."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from celery_world.ledger import Entry

#: The contract's priority: where several causes apply, the first is the cause.
PRIORITY = ("producer_retry", "visibility_timeout", "worker_crash", "broker_redelivery")
#: The cause each injected fault must produce.
PLANNED_CAUSE = {
    "slow": "producer_retry",
    "crash": "worker_crash",
    "outlive": "visibility_timeout",
}


@dataclass(frozen=True)
class Run:
    """One run of a task's body, as the ledger saw it."""

    key: str
    task_id: str
    node: str
    pid: int
    effect_t: float
    done_t: float | None  # None: it never returned (its worker was killed)


@dataclass
class Truth:
    """The duplicates of one run of the scenario.

    by_key: idempotency key -> true cause, for every key whose effect ran more than once.
    by_job_id: task id -> true cause, for every task id that ran more than once: the truth
        for sources that carry no idempotency key (plain logs, the event stream, bare
        CeleryInstrumentor spans), whose key is the job_id. A producer retry is two
        task ids that each ran once: such a source cannot link them, so it is in
        `by_key` only (listed in `unlinkable`).
    """

    runs: list[Run]
    sent: list[dict]
    killed_nodes: list[str]
    by_key: dict[str, str] = field(default_factory=dict)
    by_job_id: dict[str, str] = field(default_factory=dict)

    @property
    def keys(self) -> set[str]:
        return {s["key"] for s in self.sent}

    @property
    def job_ids(self) -> set[str]:
        return {s["task_id"] for s in self.sent}

    @property
    def planned(self) -> dict[str, str]:
        """key -> the cause the injected fault should have produced (faulty keys only)."""
        return {
            s["key"]: PLANNED_CAUSE[s["behaviour"]]
            for s in self.sent
            if s["behaviour"] in PLANNED_CAUSE
        }

    @property
    def harmful_keys(self) -> set[str]:
        """Keys whose effect ran two or more times (every run in this app runs it)."""
        return {k for k in self.by_key if sum(r.key == k for r in self.runs) >= 2}

    @property
    def harmful_job_ids(self) -> set[str]:
        """Task ids whose effect ran two or more times."""
        return {j for j in self.by_job_id if sum(r.task_id == j for r in self.runs) >= 2}

    @property
    def unlinkable(self) -> set[str]:
        """Keys duplicated only by producer retries: invisible where the key is the job_id."""
        return {k for k, cause in self.by_key.items() if cause == "producer_retry"}


def _first(causes: set[str]) -> str:
    return next(c for c in PRIORITY if c in causes)


def job_causes(runs: list[Run]) -> set[str]:
    """Why one task id ran again: judged, like the contract, against its earlier runs."""
    ordered = sorted(runs, key=lambda r: r.effect_t)
    causes: set[str] = set()
    for i, later in enumerate(ordered[1:], start=1):
        for earlier in ordered[:i]:
            if earlier.done_t is None:
                causes.add("worker_crash")
            elif earlier.done_t > later.effect_t:
                causes.add("visibility_timeout")
            else:
                causes.add("broker_redelivery")
    return causes


def runs_from(entries: list[Entry]) -> list[Run]:
    done = {e.run: e.t for e in entries if e.kind == "done"}
    return [
        Run(e.key, e.task_id, e.node, e.pid, e.t, done.get(e.run))
        for e in entries
        if e.kind == "effect"
    ]


def build(entries: list[Entry], sent: list[dict], killed_nodes: list[str]) -> Truth:
    runs = runs_from(entries)
    truth = Truth(runs, sent, killed_nodes)
    by_key: dict[str, list[Run]] = defaultdict(list)
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_key[run.key].append(run)
        by_job[run.task_id].append(run)
    for task_id, job_runs in by_job.items():
        if len(job_runs) > 1:
            truth.by_job_id[task_id] = _first(job_causes(job_runs))
    for key, key_runs in by_key.items():
        if len(key_runs) < 2:
            continue
        causes: set[str] = set()
        if len({r.task_id for r in key_runs}) > 1:
            causes.add("producer_retry")
        for task_id in {r.task_id for r in key_runs}:
            causes |= job_causes([r for r in key_runs if r.task_id == task_id])
        truth.by_key[key] = _first(causes)
    return truth
