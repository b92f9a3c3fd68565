"""Settings lint: turn observed durations and lock/redelivery facts into findings.

Each finding names the setting to change, the job type, what was seen (evidence, with
numbers) and the change that removes the risk. Pure functions over data frames, so the
rules can be read and tested without a store.
"""

from __future__ import annotations

import math

import pandas as pd

FINDING_COLUMNS = ("setting", "job_type", "finding", "evidence", "change")


def _number(value: object) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def lint_findings(durations: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """Findings from `durations()` rows and `lint_facts` rows (both per job type)."""
    merged = durations.merge(facts, on="job_type", how="outer", suffixes=("", "_facts"))
    findings: list[dict[str, str]] = []
    for row in merged.to_dict(orient="records"):
        job_type = row["job_type"]
        p99 = _number(row.get("p99_ms"))
        ttl = _number(row.get("lock_ttl_ms"))
        visibility = _number(row.get("visibility_timeout_ms"))
        renewed = _number(row.get("renewed_executions_facts", row.get("renewed_executions"))) or 0
        if p99 is not None and ttl is not None and p99 > ttl and renewed == 0:
            findings.append(
                {
                    "setting": "lock_ttl_ms",
                    "job_type": job_type,
                    "finding": "p99 duration above the lock TTL and the lock is never renewed",
                    "evidence": f"p99 {p99:.0f} ms > lock_ttl_ms {ttl:.0f} ms; "
                    f"0 of {int(row.get('locked_executions') or 0)} locked runs renewed",
                    "change": f"raise lock_ttl_ms to at least {math.ceil(2 * p99)} ms "
                    "(2 x p99) or renew the lock from a heartbeat every ttl/3",
                }
            )
        if p99 is not None and visibility is not None and p99 > visibility:
            findings.append(
                {
                    "setting": "visibility_timeout_ms",
                    "job_type": job_type,
                    "finding": "p99 duration above the visibility timeout: the queue "
                    "redelivers jobs that are still running",
                    "evidence": f"p99 {p99:.0f} ms > visibility_timeout_ms {visibility:.0f} ms",
                    "change": f"raise visibility_timeout_ms to at least {math.ceil(2 * p99)} ms "
                    "(2 x p99) or extend visibility while the job runs",
                }
            )
        without_key = _number(row.get("redelivered_without_key")) or 0
        if without_key > 0:
            findings.append(
                {
                    "setting": "idempotency_key",
                    "job_type": job_type,
                    "finding": "jobs with no idempotency key were delivered more than once",
                    "evidence": f"{int(without_key)} job_id(s) without an idempotency key "
                    "ran more than once",
                    "change": "give the job an idempotency key (the business identity of "
                    "its effect) and record completion under it",
                }
            )
        mismatches = _number(row.get("release_mismatches")) or 0
        if mismatches > 0:
            findings.append(
                {
                    "setting": "lock_ttl_ms",
                    "job_type": job_type,
                    "finding": "locks released with a token that no longer matched: the lock "
                    "had expired or passed to another owner while the holder ran",
                    "evidence": f"{int(mismatches)} lock_release with released=false",
                    "change": "raise lock_ttl_ms above the p99 duration or renew the lock, "
                    "and fence writes with the lock token",
                }
            )
    return pd.DataFrame(findings, columns=list(FINDING_COLUMNS))
