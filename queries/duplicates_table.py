"""`duplicates` as one Arrow table, shaped by polars without pandas: what the command line
prints every duplicate from.

A frame of Python lists for the 600k keys of a store of 100M events took seconds to make
and more to print, and importing pandas alone cost a fresh process a few tenths of a
second; this module and what it imports load neither.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from queries.derived import query_arrow
from queries.duplicates_shape import shaped
from store.base import Store

if TYPE_CHECKING:
    import pandas as pd

#: A filter time as a user may give it (naive: UTC); spelled as text, so that naming it
#: loads no pandas.
Time: TypeAlias = "datetime | pd.Timestamp | str | None"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(value: Time) -> int | None:
    """Microseconds since the epoch of a filter time (naive: UTC)."""
    if value is None:
        return None
    if type(value) is datetime:  # what the command's --since and --until give: no pandas
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return (aware - _EPOCH) // timedelta(microseconds=1)
    import pandas as pd  # parses every spelling a user may give; only when one is given

    stamp = pd.Timestamp(value)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1_000)


def filters(
    job_type: str | None = None,
    queue: str | None = None,
    since: Time = None,
    until: Time = None,
) -> dict[str, Any]:
    """The execution filters as the queries bind them."""
    return {
        "job_type": job_type,
        "queue": queue,
        "since_us": micros(since),
        "until_us": micros(until),
    }


def duplicates_arrow(
    store: Store,
    job_type: str | None = None,
    queue: str | None = None,
    since: Time = None,
    until: Time = None,
) -> pa.Table:
    """`queries.duplicates` as an Arrow table of the same columns and values (times as
    UTC timestamps, lists as list columns), shaped by polars for all keys at once."""
    return shaped(query_arrow(store, "duplicates", **filters(job_type, queue, since, until)))
