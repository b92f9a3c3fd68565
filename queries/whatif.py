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
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa

from queries.derived import query_arrow
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
    "a retry that meets a dead holder's lock is taken to wait for it, unless runs of its "
    "job type were seen giving up on a held lock: then it gives up after the longest wait "
    "seen, its side effect is absorbed and its work dropped (retries_dropped)",
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

SUMMARY_COLUMNS = [
    "job_type", "duplicates_before", "duplicates_after", "harmful_before", "harmful_after",
    "unknown_harm_before", "unknown_harm_after", "extra_runs_before", "extra_runs_after",
    "runs_avoided", "effects_absorbed", "still_overrunning", "new_overruns",
    "recoveries", "retries_dropped", "added_delay_p50_ms", "added_delay_p95_ms",
    "added_delay_max_ms",
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
    runs = query_arrow(store, "whatif_runs", **bound, key=None)
    keys = query_arrow(store, "duplicates", **bound)
    overruns = query_arrow(store, "whatif_new_overruns", **bound, **settings.params())
    return replay(runs, keys, settings, overruns)


#: Rows as a caller may hold them: Arrow from the store, pandas in tests, or polars.
Rows: TypeAlias = "pd.DataFrame | pa.Table | pl.DataFrame"

_RUN_TYPES: dict[str, Any] = {
    "execution_uid": pl.String, "key": pl.String, "job_id": pl.String, "job_type": pl.String,
    "start_us": pl.Float64, "end_us": pl.Float64, "terminal": pl.String,
    "lost_worker": pl.Boolean, "had_side_effect": pl.Boolean, "lock_contended": pl.Boolean,
    "lock_wait_ms": pl.Float64,
    "visibility_timeout_ms": pl.Float64, "lock_acquired_us": pl.Float64,
    "lock_ttl_ms": pl.Float64, "lock_valid_until_us": pl.Float64,
    "lock_released_us": pl.Float64, "lock_expired_while_running": pl.Boolean,
    "missing_attempts_before": pl.Float64, "key_enqueued_jobs": pl.Float64,
    **{f"cause_{c}": pl.Boolean for c in CAUSES[1:]},
    "overlapped_by_uid": pl.String,
}
_PREVIOUS = ("execution_uid", "start_us", "end_us", "terminal", "lost_worker",
             "visibility_timeout_ms", "lock_ttl_ms", "lock_valid_until_us",
             "lock_released_us")


def _polars(rows: Rows) -> pl.DataFrame:
    if isinstance(rows, pl.DataFrame):
        return rows
    if isinstance(rows, pa.Table):
        found = pl.from_arrow(rows)
        assert isinstance(found, pl.DataFrame)
        return found
    return pl.from_pandas(rows)


def _typed(rows: pl.DataFrame, types: dict[str, Any]) -> pl.DataFrame:
    """The columns named in `types`, cast (flags: null is false; counts: null is 0)."""
    columns = []
    for name, kind in types.items():
        column = pl.col(name) if name in rows.columns else pl.lit(None)
        column = column.cast(kind, strict=False)
        if kind == pl.Boolean:
            column = column.fill_null(False)
        columns.append(column.alias(name))
    return rows.select(columns)


def _first_cause(flags: dict[str, pl.Expr]) -> pl.Expr:
    """The contract's first cause among `flags` (cause -> expression), else unknown."""
    named: pl.Expr = pl.lit("unknown")
    for cause in reversed(CAUSES):
        named = pl.when(flags[cause]).then(pl.lit(cause)).otherwise(named)
    return named


def replay(
    runs: Rows,
    keys: Rows,
    settings: Settings,
    new_overruns: Rows | None = None,
) -> WhatIf:
    """The rules, over `whatif_runs` rows (`runs`) and `duplicates` rows (`keys`)."""
    duplicates = _typed(_polars(keys), {
        "key": pl.String, "job_type": pl.String, "executions": pl.Int64,
        "harmful": pl.Boolean, **{c: pl.Boolean for c in CAUSES}})
    # Harm is read as the duplicates answer gives it: null (unknown) stays null, so the
    # flag is cast without filling it in.
    duplicates = duplicates.with_columns(
        _polars(keys).get_column("harmful").cast(pl.Boolean, strict=False).alias("harmful")
        if duplicates.height else pl.col("harmful"))
    table = _typed(_polars(runs), _RUN_TYPES)
    table = table.filter(pl.col("key").is_in(duplicates.get_column("key").implode()))
    # The run before each of its job_id: sorted by job_id, the row above where it has the
    # same job_id (a window per job_id cost 2 s at 120k runs; this, a few ms).
    same_job = pl.col("job_id") == pl.col("job_id").shift(1)
    table = table.sort(["job_id", "start_us", "execution_uid"]).with_columns(
        pl.when(same_job).then(pl.col(c).shift(1)).otherwise(None).alias(f"prev_{c}")
        for c in _PREVIOUS
    ).sort(["key", "start_us", "execution_uid"])
    fresh = None if new_overruns is None else _polars(new_overruns)
    table = _judged(_with_recovery(table, settings, fresh), settings)
    after = _per_key(table)
    judged = _keys_after(duplicates, after)
    delays = table.filter(col_retry & ~pl.col("gives_up") & pl.lit(settings.changed)).select(
        "key", "job_type", "execution_uid", "added_delay_ms")
    limits = list(LIMITS)
    silent = int(judged.get_column("silent_before").sum())
    if silent:
        limits.append(f"{silent} redelivered run(s) followed an attempt that went silent: "
                      "whether it crashed or ran on is unknown, so they are kept")
    no_vt = table.get_column("visibility_timeout_ms").null_count()
    if settings.visibility_timeout_ms is not None and no_vt:
        limits.append(f"{no_vt} run(s) reported no visibility_timeout_ms: the added wait of "
                      "their retries cannot be judged")
    return WhatIf(settings, _summary(judged, delays, fresh), _changed_keys(judged),
                  delays.to_pandas(), _cause_counts(judged), limits)


def _judged(runs: pl.DataFrame, settings: Settings) -> pl.DataFrame:
    """Each run with what the settings do to it: `avoided` (its redelivery would not have
    happened), `absorbed` (its effect would have met a held lock), `still` (its limit is
    outgrown even so), `silent_before` (its earlier attempt's length is unknowable)."""
    vt_new, ttl_new = settings.visibility_timeout_ms, settings.lock_ttl_ms
    beat = settings.heartbeat_ms is not None
    col = pl.col
    # An earlier attempt whose end is its own (ack, nack or fail by its worker) ran as long
    # as observed; one that went silent may have crashed or run on: unknowable.
    prev_known_end = (col("prev_terminal").is_in(["ack", "nack", "fail"]).fill_null(False)
                      & ~col("prev_lost_worker").fill_null(False))
    prev_duration_ms = (col("prev_end_us") - col("prev_start_us")) / 1000.0
    rerun = col("cause_visibility_timeout") & col("prev_execution_uid").is_not_null()
    if beat:
        fits = prev_known_end
    elif vt_new is not None:
        fits = prev_known_end & (prev_duration_ms <= vt_new).fill_null(False)
    else:
        fits = pl.lit(False)
    # A holder whose lock lapsed while it ran and was taken by another run of the same key:
    # with the lock valid for the whole run, the taker finds it held and is absorbed.
    holder_known_end = col("terminal").is_in(["ack", "nack", "fail"]).fill_null(False) & ~col(
        "lost_worker")
    if beat:
        covers = holder_known_end
    elif ttl_new is not None:
        covers = ((col("end_us") - col("lock_acquired_us")) / 1000.0 <= ttl_new).fill_null(False)
    else:
        covers = pl.lit(False)
    takers = runs.select(col("execution_uid").alias("overlapped_by_uid"),
                         col("key").alias("taker_key"))
    runs = runs.join(takers, on="overlapped_by_uid", how="left", maintain_order="left")
    same_key_taker = (col("lock_expired_while_running") & col("overlapped_by_uid").is_not_null()
                      & (col("taker_key") == col("key")).fill_null(False))
    judged = runs.with_columns(
        (rerun & fits).alias("avoided"),
        (rerun & prev_known_end & ~fits & pl.lit(vt_new is not None or beat)).alias("still_vt"),
        (rerun & ~prev_known_end).alias("silent_before"),
        (same_key_taker & covers).alias("covered_taker"),
        (same_key_taker & ~covers & pl.lit(ttl_new is not None or beat)).alias("still_lock"),
    )
    covered = judged.filter(col("covered_taker")).get_column("overlapped_by_uid").implode()
    return judged.with_columns(
        ((col("execution_uid").is_in(covered) | col("gives_up")) & ~col("avoided")
         & col("had_side_effect")).alias("absorbed"),
    ).with_columns(
        (col("had_side_effect") & ~col("avoided") & ~col("absorbed")).alias("effect_after"),
        (col("still_vt") | col("still_lock")).alias("still"),
    )


def _per_key(runs: pl.DataFrame) -> pl.DataFrame:
    """Per key: runs and effects left, what was avoided or absorbed, its causes after."""
    col = pl.col
    kept = ~col("avoided")
    return runs.group_by("key").agg(
        pl.when(kept).then(1 + col("missing_attempts_before").fill_null(0)).otherwise(0)
        .sum().alias("executions_after"),
        col("effect_after").sum().alias("effects_after"),
        col("avoided").sum().alias("runs_avoided"),
        col("absorbed").sum().alias("effects_absorbed"),
        col("still").sum().alias("still_overrunning"),
        col("silent_before").sum().alias("silent_before"),
        col("gives_up").sum().alias("retries_dropped"),
        ((col("job_id").filter(kept).n_unique() >= 2)
         | (col("key_enqueued_jobs").filter(kept).max().fill_null(0) >= 2))
        .alias("after_producer_retry"),
        *(col(f"cause_{c}").filter(kept).any().alias(f"after_{c}") for c in CAUSES[1:]),
    )


def _keys_after(duplicates: pl.DataFrame, after: pl.DataFrame) -> pl.DataFrame:
    """The duplicates rows, in their order, with what the replay says of each key."""
    col = pl.col
    counts = ("executions_after", "effects_after", "runs_avoided", "effects_absorbed",
              "still_overrunning", "silent_before", "retries_dropped")
    table = duplicates.join(after, on="key", how="left", maintain_order="left").with_columns(
        *(col(c).fill_null(0).cast(pl.Int64) for c in counts),
        *(col(f"after_{c}").fill_null(False) for c in CAUSES),
    )
    dup_after = col("executions_after") > 1
    return table.with_columns(
        col("executions").alias("executions_before"),
        col("harmful").alias("harmful_before"),
        _first_cause({c: col(c) for c in CAUSES}).alias("cause_before"),
        dup_after.alias("duplicate_after"),
        # A key no longer a duplicate is neither harmful nor absorbed: null, not counted.
        pl.when(col("harmful").is_not_null() & dup_after)
        .then(col("effects_after") >= 2).otherwise(None).alias("harmful_after"),
        pl.when(dup_after).then(_first_cause({c: col(f"after_{c}") for c in CAUSES}))
        .otherwise(None).alias("cause_after"),
    )


def _changed_keys(table: pl.DataFrame) -> pd.DataFrame:
    col = pl.col
    changed = table.filter(
        ~col("duplicate_after") | (col("effects_absorbed") > 0)
        | (col("duplicate_after") & col("harmful_after").ne_missing(col("harmful_before"))))
    fewer = (col("executions_before") - col("executions_after")).cast(pl.String)
    rows = changed.select(
        "key", "job_type", col("cause_before").alias("cause"), "executions_before",
        "executions_after", "harmful_before", "harmful_after",
        pl.when(~col("duplicate_after")).then(pl.lit("no longer a duplicate"))
        .when(col("effects_absorbed") > 0).then(pl.lit("side effect absorbed by the lock"))
        .otherwise(fewer + pl.lit(" run(s) fewer, still a duplicate")).alias("change"),
    ).to_pandas()
    for column in ("harmful_before", "harmful_after"):
        rows[column] = rows[column].astype(object).where(rows[column].notna(), None)
    return rows


#: A retry of a crashed run: the run before it of its job_id crashed (went silent, or was
#: settled for a lost worker) and it is named a worker_crash redelivery.
col_retry = (pl.col("cause_worker_crash") & pl.col("prev_execution_uid").is_not_null()
             & ((pl.col("prev_terminal") == "none").fill_null(False)
                | pl.col("prev_lost_worker").fill_null(False)))


def _with_recovery(runs: pl.DataFrame, settings: Settings,
                   per_job_type: pl.DataFrame | None) -> pl.DataFrame:
    """Each retry of a crashed run with how much later it could start under `settings`
    (`added_delay_ms`; negative: sooner), or whether it would give up (`gives_up`).

    The retry waits for the visibility deadline when the crash was silent (a lost
    worker's parent settles it at once), and for the dead holder's lock when it held one
    and never released it. Where runs of its job type were seen giving up on a held lock
    (`lock_contended` after waiting), a retry that would meet the lock for longer than the
    longest wait seen (`give_up_ms` of whatif_new_overruns.sql) gives up instead:
    absorbed, its work dropped, no delay."""
    col = pl.col
    beat = settings.heartbeat_ms is not None
    kinds = {"job_type": pl.String, "give_up_ms": pl.Float64}
    patience = (pl.DataFrame(schema=kinds) if per_job_type is None or per_job_type.height == 0
                else _typed(per_job_type, kinds))
    runs = runs.join(patience, on="job_type", how="left", maintain_order="left")
    silent = (col("prev_terminal") == "none").fill_null(False) & ~col(
        "prev_lost_worker").fill_null(False)
    vt_old = col("prev_visibility_timeout_ms") * 1000.0
    vt_new = vt_old if settings.visibility_timeout_ms is None else pl.lit(
        settings.visibility_timeout_ms * 1000.0)
    deadline_old = col("prev_start_us") + vt_old
    deadline_new = (col("prev_end_us") if beat else col("prev_start_us")) + vt_new
    shift = pl.when(silent & vt_old.is_not_null()).then(deadline_new - deadline_old) \
        .otherwise(0.0).fill_null(0.0)
    redelivered_new = pl.max_horizontal(col("start_us") + shift, col("prev_end_us"))
    valid_old = col("prev_lock_valid_until_us")
    ttl_old = col("prev_lock_ttl_ms") * 1000.0
    ttl_new = ttl_old if settings.lock_ttl_ms is None else pl.lit(settings.lock_ttl_ms * 1000.0)
    dead_holder = valid_old.is_not_null() & col("prev_lock_released_us").is_null()
    granted = valid_old - ttl_old
    valid_new = (pl.max_horizontal(granted, col("prev_end_us")) if beat else granted) + ttl_new
    never = float("-inf")
    free_old = pl.when(dead_holder).then(valid_old).otherwise(never).fill_null(never)
    free_new = pl.when(dead_holder).then(valid_new).otherwise(never).fill_null(never)
    patience_us = col("give_up_ms") * 1000.0
    gives_up = (col_retry & pl.lit(settings.changed) & col("give_up_ms").is_not_null()
                & (free_new > redelivered_new + patience_us).fill_null(False)
                & ~(free_old > col("start_us") + patience_us).fill_null(False))
    added = (pl.max_horizontal(redelivered_new, free_new)
             - pl.max_horizontal(col("start_us"), free_old)) / 1000.0
    return runs.with_columns(gives_up.alias("gives_up"), added.alias("added_delay_ms"))


def _summary(table: pl.DataFrame, delays: pl.DataFrame,
             new_overruns: pl.DataFrame | None) -> pd.DataFrame:
    """Per job type, the counts over its duplicate keys and the delays' quantiles."""
    col = pl.col
    dup_after = col("duplicate_after")
    counts = table.group_by("job_type").agg(
        pl.len().alias("duplicates_before"),
        dup_after.sum().alias("duplicates_after"),
        col("harmful_before").fill_null(False).sum().alias("harmful_before"),
        col("harmful_after").fill_null(False).sum().alias("harmful_after"),
        col("harmful_before").is_null().sum().alias("unknown_harm_before"),
        (col("harmful_after").is_null() & dup_after).sum().alias("unknown_harm_after"),
        (col("executions_before") - 1).sum().alias("extra_runs_before"),
        (col("executions_after") - 1).clip(lower_bound=0).sum().alias("extra_runs_after"),
        col("runs_avoided").sum(), col("effects_absorbed").sum(),
        col("still_overrunning").sum(), col("retries_dropped").sum(),
    )
    kinds = {"job_type": pl.String, "new_visibility_overruns": pl.Int64,
             "new_lock_overruns": pl.Int64}
    fresh = (pl.DataFrame(schema=kinds) if new_overruns is None or new_overruns.height == 0
             else _typed(new_overruns, kinds))
    waits = delays.group_by("job_type").agg(
        pl.len().alias("recoveries"),
        col("added_delay_ms").quantile(0.5, "linear").alias("added_delay_p50_ms"),
        col("added_delay_ms").quantile(0.95, "linear").alias("added_delay_p95_ms"),
        col("added_delay_ms").max().alias("added_delay_max_ms"),
    )
    summary = counts.join(fresh, on="job_type", how="full", coalesce=True).join(
        waits, on="job_type", how="left")
    whole = [c for c in SUMMARY_COLUMNS if c not in (
        "job_type", "added_delay_p50_ms", "added_delay_p95_ms", "added_delay_max_ms")]
    new_vt = col("new_visibility_overruns").fill_null(0)
    summary = summary.with_columns(
        (col("duplicates_after").fill_null(0) + new_vt).alias("duplicates_after"),
        (col("extra_runs_after").fill_null(0) + new_vt).alias("extra_runs_after"),
        (new_vt + col("new_lock_overruns").fill_null(0)).alias("new_overruns"),
    ).with_columns(*(col(c).fill_null(0).cast(pl.Int64) for c in whole if c != "new_overruns"),
                   col("new_overruns").cast(pl.Int64))
    frame = summary.sort("job_type").select(SUMMARY_COLUMNS).to_pandas()
    for column in ("added_delay_p50_ms", "added_delay_p95_ms", "added_delay_max_ms"):
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


def _cause_counts(table: pl.DataFrame) -> pd.DataFrame:
    """Duplicate keys per job type and cause, before and after."""
    before = table.group_by("job_type", col_cause := "cause_before").len("before").rename(
        {col_cause: "cause"})
    after = table.filter(pl.col("duplicate_after")).group_by("job_type", "cause_after").len(
        "after").rename({"cause_after": "cause"})
    both = before.join(after, on=["job_type", "cause"], how="full", coalesce=True).with_columns(
        pl.col("before").fill_null(0).cast(pl.Int64), pl.col("after").fill_null(0).cast(pl.Int64),
        pl.col("cause").replace_strict({c: i for i, c in enumerate(KEY_CAUSES)},
                                       return_dtype=pl.Int64).alias("_order"))
    return both.sort("job_type", "_order").select("job_type", "cause", "before", "after") \
        .to_pandas()
