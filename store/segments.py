"""The embedded store's write path: a batch of rows -> one segment per UTC day (Parquet,
or a collector's hot segment: `store/hot_segments.py`).

Kept apart from the readers (DuckDB, pandas) so that ingest's worker processes, which
write their own segments, import only Arrow and NumPy.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import arrow_values, hot_log, hot_segments
from store.durable import place, temporary_for, write_parquet
from store.schema import EVENTS_SCHEMA, VIEW_SCHEMA, as_events, is_runs

SEGMENT_ROW_GROUP = 122_880
# Columns whose values are all but unique (a uid, a row's other fields, a timestamp) gain
# nothing from a dictionary the writer would build and then drop, and no query prunes row
# groups by the min/max of a uid or of `attrs`: both cost ~10% of a segment's write.
_UNIQUE_COLUMNS = ("event_uid", "attrs")
# Only columns with a few values per row group get a dictionary. Ids and keys (job_id,
# idempotency_key, lock_owner, ...) take one entry every few rows: the writer hashed them
# all, then wrote plain pages that zstd packs smaller than the dictionary's (a 54 MB block
# of canonical lines: 154 ms and 9.09 MB with a dictionary on every text column, 139 ms
# and 8.53 MB so).
_DICTIONARY_COLUMNS = [
    "event", "job_type", "queue", "worker_id", "delivery_attempt", "lock_ttl_ms",
    "visibility_timeout_ms", "service_version", "source",
]
_STATISTICS_COLUMNS = [n for n in EVENTS_SCHEMA.names if n not in _UNIQUE_COLUMNS]
_MICROS_PER_DAY = 86_400_000_000
_EPOCH_DAY = date(1970, 1, 1)
#: A file in the events folder that grows by a byte whenever a segment is added, replaced
#: or dropped: readers stat it instead of every day folder to learn that nothing changed.
CHANGES = ".changes"
#: What the names of a day folder's segments end with: Parquet, hot segments and hot logs.
SEGMENT_SUFFIXES = (".parquet", hot_segments.SUFFIX, hot_log.LOG_SUFFIX)


def note_change(events_dir: Path) -> None:
    """Tell readers the set of segments changed (after the change is in place)."""
    with open(events_dir / CHANGES, "ab") as handle:  # O_APPEND: whole bytes, any process
        handle.write(b".")


def _day_name(day: int) -> str:
    """`YYYY-MM-DD` of a day counted from the Unix epoch."""
    return (_EPOCH_DAY + timedelta(days=day)).isoformat()


def _segment_name(suffix: str = ".parquet") -> str:
    # Time-ordered names, so a listing is also the order of arrival.
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}{suffix}"


@dataclass(frozen=True)
class SegmentWriter:
    """Writes batches as segments of one store's `events` folder.

    A value, not a handle: ingest's worker processes each get one and write the segments of
    the blocks they decode, so a block's rows are never copied to another process.
    """

    events_dir: Path
    #: Write hot segments (Arrow IPC, see `store/hot_segments.py`) instead of Parquet.
    hot: bool = False
    #: Files made ahead for hot segments; without them each write creates its file.
    spares: hot_segments.SpareFiles | None = field(default=None, compare=False)
    #: The open hot logs hot writes append to (`store/hot_log.py`); without them each
    #: hot write is a hot segment of its own.
    logs: hot_log.HotLogs | None = field(default=None, compare=False)

    def write(self, table: pa.Table) -> int:
        """Write one segment per UTC day present in the batch; durable on return.

        The batch is in EVENTS_SCHEMA, VIEW_SCHEMA or RUNS_SCHEMA; all make the same
        segment. A hot segment keeps runs as they are, Parquet string views.
        """
        if table.num_rows == 0:
            return 0
        if not (is_runs(table) if self.hot else table.schema == VIEW_SCHEMA):
            table = as_events(table)
        # Day numbers from the integer µs: a division, where formatting every ts as text
        # cost as much as writing the segment; per row only when the batch spans days.
        bounds = pc.min_max(table["ts"])
        first, last = (bounds["min"].value // _MICROS_PER_DAY,
                       bounds["max"].value // _MICROS_PER_DAY)
        if first == last:
            self._write_segment(_day_name(first), table)
            return int(table.num_rows)
        table = as_events(table)  # Arrow filters neither string views nor runs
        days = np.floor_divide(arrow_values.numbers(table["ts"], np.int64), _MICROS_PER_DAY)
        for day in np.unique(days).tolist():
            self._write_segment(_day_name(day), table.filter(arrow_values.bools(days == day)))
        return int(table.num_rows)

    def _write_segment(self, day: str, table: pa.Table) -> Path:
        folder = self.events_dir / f"day={day}"
        if not folder.is_dir():  # a look, where mkdir of an existing folder raises
            folder.mkdir(parents=True, exist_ok=True)
        if self.hot and self.logs is not None:
            log = self.logs.append(folder, table, _segment_name(hot_log.LOG_SUFFIX))
            if log is not None:
                note_change(self.events_dir)
                return log
        final = folder / _segment_name(hot_segments.SUFFIX if self.hot else ".parquet")
        if self.hot:
            self._write_hot(table, final)
        else:
            write_parquet(
                table,
                final,
                compression="zstd",
                row_group_size=SEGMENT_ROW_GROUP,
                write_page_index=True,
                use_dictionary=_DICTIONARY_COLUMNS,
                write_statistics=_STATISTICS_COLUMNS,
                # The Parquet types alone read back as EVENTS_SCHEMA; a stored Arrow schema
                # would make a segment written from string views read back as views.
                store_schema=False,
            )
        note_change(self.events_dir)
        return final

    def _write_hot(self, table: pa.Table, final: Path) -> None:
        """`table` as the hot segment `final`: written into a spare file where it lies
        and renamed from there into its day folder, one rename (without a spare ready,
        written under a temporary name in the day folder). A spare is never visible to
        readers, so it needs no temporary name of its own."""
        spare = self.spares.take() if self.spares is not None else None
        written = spare if spare is not None else temporary_for(final)
        try:
            hot_segments.write_ipc(table, written)
        except FileNotFoundError:
            if spare is None:
                raise
            written = temporary_for(final)  # the spares' folder went: as without a spare
            hot_segments.write_ipc(table, written)
        place(written, final)
