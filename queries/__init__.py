"""The query stage: named SQL per question, run on any store, answers as data frames.

The names below load on first use, so a process that needs one module of the stage (the
command line printing `duplicates` as JSON, say) pays for that module's imports alone:
the forensic calls bring pandas, a few tenths of a second to import.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queries.duplicates_shape import CAUSES
    from queries.forensics import (
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

#: Each name of the stage's API -> the module that defines it.
_HOMES = {
    **dict.fromkeys(
        ("checklist", "duplicates", "duplicates_over_time", "duration_samples",
         "durations", "executions", "filter_values", "key_suggestions", "lint",
         "lock_overruns", "split_brains", "stale_owner_writes", "store_summary"),
        "queries.forensics",
    ),
    "CAUSES": "queries.duplicates_shape",
    "KeyForensics": "queries.key_forensics",
    "key_forensics": "queries.key_forensics",
    "query_names": "queries.loader",
    "run": "queries.loader",
    "timeline": "queries.timeline",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'queries' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


class _Stage(types.ModuleType):
    """This package. Three of its names are functions and modules both (`lint`,
    `timeline`, `key_forensics`): importing such a module sets it as an attribute of the
    package, and the name must go on meaning the function, loaded by `__getattr__`."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Stage


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
