"""The query stage: named SQL per question, run on any store, answers as data frames."""

from queries.forensics import (
    CAUSES,
    checklist,
    duplicates,
    duplicates_over_time,
    duration_samples,
    durations,
    executions,
    filter_values,
    key_suggestions,
    lint,
    lock_overruns,
    split_brains,
    stale_owner_writes,
    store_summary,
)
from queries.key_forensics import KeyForensics, key_forensics
from queries.loader import query_names, run
from queries.timeline import timeline

__all__ = [
    "CAUSES",
    "KeyForensics",
    "checklist",
    "duplicates",
    "duplicates_over_time",
    "duration_samples",
    "durations",
    "executions",
    "filter_values",
    "key_forensics",
    "key_suggestions",
    "lint",
    "lock_overruns",
    "query_names",
    "run",
    "split_brains",
    "stale_owner_writes",
    "store_summary",
    "timeline",
]
