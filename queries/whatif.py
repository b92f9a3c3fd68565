"""The what-if replay: the observed runs of duplicated keys, judged again under proposed
settings (a visibility timeout, a lock TTL, a heartbeat).

A duplicate that a setting would have prevented is one whose cause is a limit the run
outgrew: a redelivery while the earlier attempt still ran (it goes away when that
attempt's observed run fits the new visibility timeout, or a heartbeat extends the
timeout while the run lives), or a lock that expired while its holder ran (the run that
took the lock in the gap would have found it held: it still ran, but its side effect is
absorbed). Producer retries, crashes, broker redeliveries and retries after a failure
happen whatever the limits. The price is recovery: a crashed run's retry waits the longer
visibility timeout, and a dead holder's lock blocks its retry for the longer TTL.

`replay` is a pure function over the rows of `whatif_runs.sql` and `duplicates.sql`, so
the rules can be read and tested without a store; `whatif` asks a store for them.
docs/whatif.md describes the rules and what the replay cannot know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from queries.derived import query
from queries.duplicates_shape import CAUSES
from queries.duplicates_table import Time
from queries.duplicates_table import filters as bound_filters
from store.base import Store

#: What the replay cannot know, said with every answer (counts are added where known).
LIMITS: tuple[str, ...] = (
    "a run that outgrew the old limit might have been stopped before the new one by a "
    "deploy, a restart or a hard time limit: it is taken to run as long as it did",
    "a run that went silent with no later sign is counted as at least as long as observed",
    "retries caused by an avoided redelivery are avoided once, with it, not followed further",
    "a crashed run's retry is taken to wait the visibility timeout from its delivery "
    "(from its last sign of life with a heartbeat); a consumer that extends visibility "
    "while it runs waits less",
    "a longer lock TTL also blocks other jobs on the same lock behind a dead holder; only "
    "the retry of the dead holder's own job is counted",
)


@dataclass(frozen=True)
class Settings:
    """Proposed settings, each None where it stays as observed (ms)."""

    visibility_timeout_ms: int | None = None
    lock_ttl_ms: int | None = None
    heartbeat_ms: int | None = None

    def __post_init__(self) -> None:
        for name in ("visibility_timeout_ms", "lock_ttl_ms", "heartbeat_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, not {value}")
        beat = self.heartbeat_ms
        for name in ("visibility_timeout_ms", "lock_ttl_ms"):
            limit = getattr(self, name)
            if beat is not None and limit is not None and beat >= limit:
                raise ValueError(f"a heartbeat every {beat} ms cannot keep a {name} of "
                                 f"{limit} ms alive: it must be shorter")

    @property
    def changed(self) -> bool:
        return any(v is not None for v in (self.visibility_timeout_ms, self.lock_ttl_ms,
                                           self.heartbeat_ms))

    def params(self) -> dict[str, int | None]:
        return {"visibility_timeout_ms": self.visibility_timeout_ms,
                "lock_ttl_ms": self.lock_ttl_ms, "heartbeat_ms": self.heartbeat_ms}


#: The causes a key can be named by, in the contract's order, and `unknown`.
KEY_CAUSES: tuple[str, ...] = (*CAUSES, "unknown")

#: How a run that is avoided or whose effect is absorbed is reported.
AVOIDED_BY = ("visibility_timeout", "lock_expiry")

SUMMARY_COLUMNS = [
    "job_type", "duplicates_before", "duplicates_after", "harmful_before", "harmful_after",
    "unknown_harm_before", "unknown_harm_after", "extra_runs_before", "extra_runs_after",
    "runs_avoided", "effects_absorbed", "still_overrunning", "new_overruns",
    "recoveries", "added_delay_p50_ms", "added_delay_p95_ms", "added_delay_max_ms",
]


@dataclass
class WhatIf:
    """The replay's answer: per job type (`summary`), per key that changes (`keys`), the
    added recovery delay of each crashed run's retry (`delays`), duplicates by cause
    before and after (`causes`), and what the replay cannot know (`cannot_know`)."""

    settings: Settings
    summary: pd.DataFrame
    keys: pd.DataFrame
    delays: pd.DataFrame
    causes: pd.DataFrame
    cannot_know: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """One JSON-ready row per job type, with its changed keys and causes in it."""
        out: list[dict[str, Any]] = []
        for row in self.summary.to_dict(orient="records"):
            job_type = row["job_type"]
            keys = self.keys[self.keys["job_type"] == job_type]
            causes = self.causes[self.causes["job_type"] == job_type]
            out.append({
                **{str(k): _plain(v) for k, v in row.items()},
                "settings": self.settings.params(),
                "by_cause": {c["cause"]: {"before": int(c["before"]), "after": int(c["after"])}
                             for c in causes.to_dict(orient="records")},
                "keys_changed": [{str(k): _plain(v) for k, v in r.items() if k != "job_type"}
                                 for r in keys.to_dict(orient="records")],
                "cannot_know": list(self.cannot_know),
            })
        return out


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def whatif(
    store: Store,
    settings: Settings,
    job_type: str | None = None,
    queue: str | None = None,
    since: Time = None,
    until: Time = None,
) -> WhatIf:
    """Replay the store's duplicated keys (those the filters select) under `settings`."""
    bound = bound_filters(job_type, queue, since, until)
    runs = query(store, "whatif_runs", **bound, key=None)
    keys = query(store, "duplicates", **bound)
    overruns = query(store, "whatif_new_overruns", **bound, **settings.params())
    return replay(runs, keys, settings, overruns)


def _flag(frame: pd.DataFrame, column: str) -> pd.Series:
    return frame[column].astype("boolean").fillna(False).astype(bool)


def _number(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column], errors="coerce").astype("float64")


def _with_previous(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run with the run before it of its job_id (`prev_*`; NaN for a first run)."""
    runs = runs.sort_values(["job_id", "start_us", "execution_uid"], kind="stable")
    grouped = runs.groupby("job_id", sort=False)
    for column in ("execution_uid", "start_us", "end_us", "terminal", "lost_worker",
                   "visibility_timeout_ms", "lock_acquired_us", "lock_ttl_ms",
                   "lock_valid_until_us", "lock_released_us"):
        runs[f"prev_{column}"] = grouped[column].shift(1)
    return runs.sort_values(["key", "start_us", "execution_uid"], kind="stable")


def _key_causes(runs: pd.DataFrame, kept: pd.Series) -> pd.DataFrame:
    """Per key, its cause flags over the runs `kept` selects, as `duplicates.sql` names
    them: producer_retry from job_ids (or enqueues), the others from the runs' flags."""
    chosen = runs[kept]
    grouped = chosen.groupby("key", sort=False)
    flags = pd.DataFrame({
        "producer_retry": (grouped["job_id"].nunique() >= 2)
        | (grouped["key_enqueued_jobs"].max() >= 2),
        **{c: grouped[f"cause_{c}"].any() for c in CAUSES[1:]},
    })
    return flags


def _first_cause(flags: pd.DataFrame) -> pd.Series:
    conditions = [flags[c].astype(bool).to_numpy() for c in CAUSES]
    named = np.select(conditions, list(CAUSES), default="unknown")
    return pd.Series(named, index=flags.index, dtype=object)


def replay(
    runs: pd.DataFrame,
    keys: pd.DataFrame,
    settings: Settings,
    new_overruns: pd.DataFrame | None = None,
) -> WhatIf:
    """The rules, over `whatif_runs` rows (`runs`) and `duplicates` rows (`keys`)."""
    runs = runs[runs["key"].isin(keys["key"])].copy()
    for column in ("lost_worker", "had_side_effect", "lock_expired_while_running",
                   *(f"cause_{c}" for c in CAUSES[1:])):
        runs[column] = _flag(runs, column)
    runs["missing_attempts_before"] = _number(runs, "missing_attempts_before").fillna(0)
    runs["key_enqueued_jobs"] = _number(runs, "key_enqueued_jobs").fillna(0)
    runs = _with_previous(runs)

    vt_new = settings.visibility_timeout_ms
    ttl_new = settings.lock_ttl_ms
    beat = settings.heartbeat_ms is not None

    # An earlier attempt whose end is its own (ack, nack or fail by its worker) ran as long
    # as observed; one that went silent may have crashed or run on: unknowable.
    prev_known_end = (runs["prev_terminal"].isin(["ack", "nack", "fail"])
                      & ~runs["prev_lost_worker"].astype("boolean").fillna(False).astype(bool))
    prev_duration_ms = (_number(runs, "prev_end_us") - _number(runs, "prev_start_us")) / 1000.0
    redelivered_while_running = (runs["cause_visibility_timeout"]
                                 & runs["prev_execution_uid"].notna())
    if beat:
        fits = prev_known_end
    elif vt_new is not None:
        fits = prev_known_end & (prev_duration_ms <= vt_new)
    else:
        fits = pd.Series(False, index=runs.index)
    avoided = redelivered_while_running & fits
    still_overrunning = redelivered_while_running & prev_known_end & ~fits & (
        vt_new is not None or beat)
    silent_before = redelivered_while_running & ~prev_known_end

    # A holder whose lock lapsed while it ran and was taken by another run of the same key:
    # with the lock valid for the whole run, the taker finds it held and is absorbed.
    hold_ms = (_number(runs, "end_us") - _number(runs, "lock_acquired_us")) / 1000.0
    holder_known_end = runs["terminal"].isin(["ack", "nack", "fail"]) & ~runs["lost_worker"]
    if beat:
        covers = holder_known_end
    elif ttl_new is not None:
        covers = hold_ms <= ttl_new
    else:
        covers = pd.Series(False, index=runs.index)
    overlapped = runs["lock_expired_while_running"] & runs["overlapped_by_uid"].notna()
    at = pd.Index(runs["execution_uid"]).get_indexer(runs["overlapped_by_uid"])
    keys_of_runs = runs["key"].to_numpy(dtype=object)
    taker_key = np.where(at >= 0, keys_of_runs[np.maximum(at, 0)], None)
    same_key_taker = overlapped & (taker_key == keys_of_runs)
    takers = set(runs.loc[same_key_taker & covers, "overlapped_by_uid"])
    absorbed = runs["execution_uid"].isin(takers) & ~avoided & runs["had_side_effect"]
    lock_still = same_key_taker & ~covers & (ttl_new is not None or beat)

    kept = ~avoided
    runs["effect_after"] = runs["had_side_effect"] & kept & ~absorbed
    per_key = runs.groupby("key", sort=False)
    counted = (1 + runs["missing_attempts_before"])
    after = pd.DataFrame({
        "executions_after": counted.where(kept, 0).groupby(runs["key"], sort=False).sum(),
        "effects_after": runs["effect_after"].groupby(runs["key"], sort=False).sum(),
        "runs_avoided": avoided.groupby(runs["key"], sort=False).sum(),
        "effects_absorbed": absorbed.groupby(runs["key"], sort=False).sum(),
        "still_overrunning": (still_overrunning | lock_still).groupby(
            runs["key"], sort=False).sum(),
        "silent_before": silent_before.groupby(runs["key"], sort=False).sum(),
    })
    cause_after = _first_cause(_key_causes(runs, kept).reindex(after.index, fill_value=False))
    del per_key

    table = keys.copy()
    table["job_type"] = table["job_type"].astype(object)
    table["cause_before"] = _first_cause(
        pd.DataFrame({c: _flag(table, c) for c in CAUSES}, index=table.index))
    # Harm is read as the duplicates answer gives it; a harm it does not know (null) stays
    # unknown after, never counted as absorbed.
    harmful_before = table["harmful"].astype("boolean")
    if table.empty:  # joining an empty arrow-backed key column fails: nothing to join
        table = table.assign(**{c: pd.Series(dtype="int64") for c in after.columns})
    else:
        table = table.join(after, on="key")
    table["executions_before"] = _number(table, "executions").astype("int64")
    for column in ("executions_after", "effects_after", "runs_avoided", "effects_absorbed",
                   "still_overrunning", "silent_before"):
        table[column] = table[column].fillna(0).astype("int64")
    dup_after = table["executions_after"] > 1
    table["duplicate_after"] = dup_after
    table["harmful_before"] = harmful_before
    # A key no longer a duplicate is neither harmful nor absorbed (NA: not counted).
    judged = (harmful_before.notna() & dup_after).to_numpy()
    table["harmful_after"] = pd.arrays.BooleanArray(
        (table["effects_after"] >= 2).to_numpy(dtype=bool), ~judged)
    table["cause_after"] = table["key"].map(cause_after).where(dup_after, None)

    changed = table[(~dup_after) | (table["effects_absorbed"] > 0)
                    | (table["harmful_after"].astype("object")
                       != table["harmful_before"].astype("object"))
                    & dup_after]
    key_rows = pd.DataFrame({
        "key": changed["key"],
        "job_type": changed["job_type"],
        "cause": changed["cause_before"],
        "executions_before": changed["executions_before"],
        "executions_after": changed["executions_after"],
        "harmful_before": changed["harmful_before"].astype(object).where(
            changed["harmful_before"].notna(), None),
        "harmful_after": changed["harmful_after"].astype(object).where(
            changed["harmful_after"].notna(), None),
        "change": np.where(
            ~changed["duplicate_after"], "no longer a duplicate",
            np.where(changed["effects_absorbed"] > 0, "side effect absorbed by the lock",
                     (changed["executions_before"] - changed["executions_after"]).astype(str)
                     + " run(s) fewer, still a duplicate")),
    }).reset_index(drop=True)

    delays = _recovery_delays(runs, settings)
    summary = _summary(table, delays, new_overruns)
    causes = _cause_counts(table)
    limits = list(LIMITS)
    silent = int(table["silent_before"].sum())
    if silent:
        limits.append(f"{silent} redelivered run(s) followed an attempt that went silent: "
                      "whether it crashed or ran on is unknown, so they are kept")
    no_vt = int(runs["visibility_timeout_ms"].isna().sum())
    if vt_new is not None and no_vt:
        limits.append(f"{no_vt} run(s) reported no visibility_timeout_ms: the added wait of "
                      "their retries cannot be judged")
    return WhatIf(settings, summary, key_rows, delays, causes, limits)


def _recovery_delays(runs: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """For each retry of a crashed run: how much later it could start under `settings`
    (ms; negative: sooner). The retry waits for the visibility deadline when the crash
    was silent (a lost worker's parent settles it at once), and for the dead holder's lock
    when it held one and never released it."""
    crashed_prev = (runs["prev_terminal"].eq("none")
                    | runs["prev_lost_worker"].astype("boolean").fillna(False).astype(bool))
    pairs = runs[runs["cause_worker_crash"] & runs["prev_execution_uid"].notna() & crashed_prev]
    columns = ["key", "job_type", "execution_uid", "added_delay_ms"]
    if pairs.empty or not settings.changed:
        return pd.DataFrame(columns=columns)
    beat = settings.heartbeat_ms is not None
    start = _number(pairs, "start_us")
    prev_start = _number(pairs, "prev_start_us")
    prev_end = _number(pairs, "prev_end_us")
    silent = pairs["prev_terminal"].eq("none") & ~pairs["prev_lost_worker"].astype(
        "boolean").fillna(False).astype(bool)
    vt_old = _number(pairs, "prev_visibility_timeout_ms") * 1000.0
    vt_new = vt_old if settings.visibility_timeout_ms is None else pd.Series(
        settings.visibility_timeout_ms * 1000.0, index=pairs.index)
    deadline_old = prev_start + vt_old
    deadline_new = (prev_end if beat else prev_start) + vt_new
    shift = (deadline_new - deadline_old).where(silent & vt_old.notna(), 0.0).fillna(0.0)
    redelivered_new = np.maximum(start + shift, prev_end)

    valid_old = _number(pairs, "prev_lock_valid_until_us")
    ttl_old = _number(pairs, "prev_lock_ttl_ms") * 1000.0
    ttl_new = ttl_old if settings.lock_ttl_ms is None else pd.Series(
        settings.lock_ttl_ms * 1000.0, index=pairs.index)
    dead_holder = valid_old.notna() & pairs["prev_lock_released_us"].isna()
    granted = valid_old - ttl_old
    valid_new = (np.maximum(granted, prev_end) if beat else granted) + ttl_new
    free_old = valid_old.where(dead_holder, -np.inf).fillna(-np.inf)
    free_new = valid_new.where(dead_holder, -np.inf).fillna(-np.inf)

    recovered_old = np.maximum(start, free_old)
    recovered_new = np.maximum(redelivered_new, free_new)
    return pd.DataFrame({
        "key": pairs["key"].to_numpy(),
        "job_type": pairs["job_type"].to_numpy(),
        "execution_uid": pairs["execution_uid"].to_numpy(),
        "added_delay_ms": np.asarray(recovered_new - recovered_old, float) / 1000.0,
    }, columns=columns)


def _summary(table: pd.DataFrame, delays: pd.DataFrame,
             new_overruns: pd.DataFrame | None) -> pd.DataFrame:
    """Per job type, the counts of `table` (one row per duplicate key) and the delays'
    quantiles, computed a column at a time (a loop over 50 job types took 0.4 s)."""
    dup_after = table["duplicate_after"].astype(bool)
    harmful_before = table["harmful_before"].astype("boolean")
    harmful_after = table["harmful_after"].astype("boolean")
    per_key = pd.DataFrame({
        "job_type": table["job_type"].astype(object),
        "duplicates_before": 1,
        "duplicates_after": dup_after.astype("int64"),
        "harmful_before": harmful_before.fillna(False).astype("int64"),
        "harmful_after": harmful_after.fillna(False).astype("int64"),
        "unknown_harm_before": harmful_before.isna().astype("int64"),
        "unknown_harm_after": (harmful_after.isna() & dup_after).astype("int64"),
        "extra_runs_before": table["executions_before"] - 1,
        "extra_runs_after": (table["executions_after"] - 1).clip(lower=0),
        "runs_avoided": table["runs_avoided"],
        "effects_absorbed": table["effects_absorbed"],
        "still_overrunning": table["still_overrunning"],
    })
    counts = per_key.groupby("job_type", sort=True).sum()
    fresh = (pd.DataFrame(columns=["job_type", "new_visibility_overruns", "new_lock_overruns"])
             if new_overruns is None else new_overruns)
    fresh = fresh.assign(job_type=fresh["job_type"].astype(object)).set_index("job_type")
    counts = counts.reindex(counts.index.union(fresh.index), fill_value=0)
    new_vt = pd.to_numeric(fresh["new_visibility_overruns"], errors="coerce").reindex(
        counts.index).fillna(0).astype("int64")
    new_lock = pd.to_numeric(fresh["new_lock_overruns"], errors="coerce").reindex(
        counts.index).fillna(0).astype("int64")
    counts["duplicates_after"] += new_vt
    counts["extra_runs_after"] += new_vt
    counts["new_overruns"] = new_vt + new_lock
    added = delays.assign(job_type=delays["job_type"].astype(object),
                          added_delay_ms=delays["added_delay_ms"].astype("float64"))
    grouped = added.groupby("job_type", sort=True)["added_delay_ms"]
    counts["recoveries"] = grouped.size().reindex(counts.index).fillna(0).astype("int64")
    for column, q in (("added_delay_p50_ms", 0.5), ("added_delay_p95_ms", 0.95)):
        counts[column] = grouped.quantile(q, interpolation="linear").reindex(counts.index)
    counts["added_delay_max_ms"] = grouped.max().reindex(counts.index)
    summary = counts.reset_index().rename(columns={"index": "job_type"})
    summary = summary[SUMMARY_COLUMNS]
    for column in ("added_delay_p50_ms", "added_delay_p95_ms", "added_delay_max_ms"):
        summary[column] = summary[column].astype(object).where(summary[column].notna(), None)
    return summary


def _quantile(values: pd.Series, q: float) -> float | None:
    return float(np.quantile(values.to_numpy(), q)) if len(values) else None


def _cause_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Duplicate keys per job type and cause, before and after."""
    job_types = table["job_type"].astype(object)
    before = pd.DataFrame({"job_type": job_types, "cause": table["cause_before"]}).value_counts()
    after = pd.DataFrame({"job_type": job_types, "cause": table["cause_after"]})[
        table["duplicate_after"].to_numpy(dtype=bool)].value_counts()
    both = pd.concat({"before": before, "after": after}, axis=1).fillna(0).astype("int64")
    both = both.reset_index()
    order = {c: i for i, c in enumerate(KEY_CAUSES)}
    both = both.assign(_order=both["cause"].map(order)).sort_values(["job_type", "_order"])
    return both[["job_type", "cause", "before", "after"]].reset_index(drop=True)
