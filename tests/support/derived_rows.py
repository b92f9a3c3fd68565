"""A store's whole derived state as comparable rows: what the differential suites compare
batch after batch against a build from nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from queries import derived
from store.base import Store


def plain(value: object) -> object:
    """A value as compared: lists as sets, floats to 10 digits (a sum depends on the
    order it adds in, which the engine chooses)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return sorted(plain(v) for v in value)
    if isinstance(value, float):
        return f"{value:.10g}"
    if value is pd.NA:
        return None
    return value


def state(store: Store) -> dict[str, list[tuple[str, ...]]]:
    """Every derived table and kept answer, as sorted rows of text (row order and the
    numbering of a kept answer's rows aside: ties may be numbered either way)."""
    tables = {}
    for table, kept in derived.tables(store).items():
        frame = kept.to_pandas().drop(columns=["answer_row"], errors="ignore")
        tables[table] = sorted(
            tuple(repr(plain(v)) for v in row) for row in frame.itertuples(index=False)
        )
    return tables
