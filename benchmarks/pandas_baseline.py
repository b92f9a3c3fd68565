"""The duplicate analysis a user would write without dupescope: pandas over JSON lines.

Read the file, name each execution (a deliver and the later events of its job_id, worker
and attempt), count executions and side effects per key, call a key harmful when two or
more executions ran the effect, and classify why it ran again with the contract's causes.
It is the yardstick for `benchmarks.forensics_speed`, so it is written plainly but without
deliberate waste: vectorised pandas, one `merge_asof` for the execution assignment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

PRODUCER_EVENTS = ("outbox_write", "enqueue", "enqueue_deduped", "worker_start", "worker_stop")
CAUSES = ("producer_retry", "visibility_timeout", "worker_crash", "broker_redelivery",
          "retry_after_failure")


@dataclass
class Timing:
    events: int
    read_s: float
    analyse_s: float
    duplicate_keys: int
    harmful_keys: int


def read_events(path: Path, n_events: int | None) -> pd.DataFrame:
    """The first `n_events` lines (all when None), as pandas reads JSON lines."""
    frame = pd.read_json(path, lines=True, nrows=n_events, dtype=False, convert_dates=False)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True, format="ISO8601")
    return frame


def executions(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per execution: key, job_id, start, end, terminal, side effects."""
    job_keys = frame.dropna(subset=["job_id"]).groupby("job_id")["idempotency_key"].max()
    worker = frame[~frame["event"].isin(PRODUCER_EVENTS) & frame["job_id"].notna()].copy()
    worker["m_worker"] = worker["worker_id"].fillna("")
    worker["m_attempt"] = worker["delivery_attempt"].fillna(-1).astype("int64")
    worker = worker.sort_values("ts")
    delivers = worker.loc[worker["event"] == "deliver", ["ts", "job_id", "m_worker", "m_attempt"]]
    delivers = delivers.assign(execution=np.arange(len(delivers)))
    assigned = pd.merge_asof(
        worker, delivers, on="ts", by=["job_id", "m_worker", "m_attempt"], direction="backward"
    ).dropna(subset=["execution"])
    event = assigned["event"]
    assigned = assigned.assign(
        side_effect=event.eq("side_effect"),
        ack_ts=assigned["ts"].where(event.eq("ack")),
        failed_ts=assigned["ts"].where(event.isin(("nack", "fail"))),
    )
    per = assigned.groupby("execution").agg(
        job_id=("job_id", "first"),
        start=("ts", "min"),
        end=("ts", "max"),
        side_effects=("side_effect", "sum"),
        first_ack=("ack_ts", "min"),
        failed=("failed_ts", "max"),
    )
    per["key"] = per["job_id"].map(job_keys).fillna(per["job_id"])
    per["terminal"] = np.select(
        [per["first_ack"].notna(), per["failed"].notna()], ["ack", "failed"], "none"
    )
    return per.reset_index()


def duplicates(frame: pd.DataFrame) -> pd.DataFrame:
    """Keys with more than one execution, their side effects, harm and first cause."""
    runs = executions(frame)
    counts = runs.groupby("key")["execution"].transform("size")
    runs = runs[counts > 1]
    enqueued = frame[frame["event"].eq("enqueue")]
    enqueued_keys = enqueued.assign(
        key=enqueued["idempotency_key"].fillna(enqueued["job_id"])
    ).groupby("key")["job_id"].nunique()
    pairs = runs.merge(runs, on="job_id", suffixes=("", "_before"))
    pairs = pairs[pairs["start_before"] < pairs["start"]]
    pairs = pairs.assign(
        visibility_timeout=pairs["end_before"] > pairs["start"],
        worker_crash=pairs["terminal_before"].eq("none"),
        broker_redelivery=pairs["first_ack_before"] <= pairs["start"],
        retry_after_failure=pairs["failed_before"] <= pairs["start"],
    )
    flags = ["visibility_timeout", "worker_crash", "broker_redelivery", "retry_after_failure"]
    per_execution = pairs.groupby("execution")[flags].any()
    runs = runs.join(per_execution, on="execution").fillna({f: False for f in flags})
    per_key = runs.groupby("key").agg(
        executions=("execution", "size"),
        side_effects=("side_effects", lambda s: int((s > 0).sum())),
        job_ids=("job_id", "nunique"),
        **{f: (f, "any") for f in flags},
    )
    per_key["producer_retry"] = (per_key["job_ids"] >= 2) | (
        per_key.index.map(enqueued_keys).fillna(0).to_numpy() >= 2
    )
    per_key["harmful"] = per_key["side_effects"] >= 2
    found = per_key[list(CAUSES)].to_numpy()
    first = np.where(found.any(axis=1), found.argmax(axis=1), len(CAUSES))
    per_key["cause"] = np.array([*CAUSES, "unknown"])[first]
    return per_key.reset_index()


def run(path: Path, n_events: int | None) -> Timing:
    """Time the read and the analysis separately (the read dominates)."""
    started = time.perf_counter()
    frame = read_events(path, n_events)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    found = duplicates(frame)
    analyse_s = time.perf_counter() - started
    return Timing(len(frame), read_s, analyse_s, len(found), int(found["harmful"].sum()))
