"""The OpenTelemetry Collector's ClickHouse tables (`otel_traces`, `otel_logs`), read in place.

Teams that already ship traces and logs with the Collector's ClickHouse exporter point
dupescope at those tables (`clickhouse://host:8123/otel?source=otel`, or
`chdb:///path?source=otel`): no second pipeline, no copy. The `events` relation the query
library reads is a view, the contract mapping over the user's tables
(store/sql/clickhouse/otel_*.sql); the derived tables, kept answers and alert state live
in a database of dupescope's own (`<db>_dupescope`, or `?dupescope_db=`). dupescope never
writes to, alters or adds indexes to the exporter's tables.

The mapping is a view (`otel_events`); what the questions read is `events`, a table in
dupescope's own database that the mapping adds to as the exporter's tables grow: planning
the mapping costs ClickHouse a second or two, which every derived table and key lookup
would otherwise pay again. `events` is sorted by key and carries a bloom filter on job_id,
so a timeline reads a few granules: the key index dupescope keeps of its own, never on the
user's tables.

A refresh reads what is new, not the history: every insert into the exporter's tables
makes a part of new block numbers in its partition, so `otel_read` records, per
partition, the highest block read, and a refresh reads the parts holding a higher one
(from part metadata; a merge of read parts with a new one is read whole again).

One span's meaning depends on others: a span with a lifecycle step as a child span is an
execution. dupescope keeps every step child span read (`otel_step_children`, by parent), so
a parent read later is an execution by its children without reading them again; and it
keeps the spans read that name a job but record no event (`otel_idle_spans`), the only ones
a child read later can change, so those, and no other span read, are read again (by their
trace, through the exporter's TraceId bloom filter). A row read again replaces itself in
`events`, and the derived tables derive what the new rows touch
(queries/incremental_clickhouse.py). A day the exporter's TTL dropped is dropped from
`events` too.

The layout of each table is read from `system.columns`: attribute columns as Maps or as
JSON (`json: true`), and for logs the layout before v0.151 (a `TimestampTime` column) or
since.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from store import otel_index
from store.base import Store, StoreError
from store.clickhouse import ChdbStore, ClickHouseStore, events_ddl
from store.clickhouse import _identifier as identifier
from store.otel_chunks import CHUNK_ROWS, Part, cutoff_day, holding, plan, within
from store.otel_progress import Progress, ReadProgress
from store.refill_holder import Holder, this_host
from store.sql_files import read, with_identifiers, with_includes

DEFAULT_TRACES = "otel_traces"
DEFAULT_LOGS = "otel_logs"
#: Columns the mapping reads, per table: a table without them is not the exporter's.
TRACE_COLUMNS = ("Timestamp", "TraceId", "SpanId", "ParentSpanId", "SpanName", "SpanKind",
                 "Duration", "StatusMessage", "ResourceAttributes", "SpanAttributes",
                 "Events.Timestamp", "Events.Name", "Events.Attributes")
LOG_COLUMNS = ("Timestamp", "TraceId", "SpanId", "Body", "ResourceAttributes", "LogAttributes")

_SQL = Path(__file__).parent / "sql"


def sql_text(name: str) -> str:
    """A statement or mapping stage of store/sql/clickhouse/, its fragments taken in, without
    its comment lines (a view keeps its SELECT as given)."""
    text = with_includes(read(_SQL, name, "clickhouse"), _SQL / "fragments", "clickhouse")
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def statement(name: str, **identifiers: str) -> str:
    """A statement with the database and table names it needs (validated) written in."""
    return with_identifiers(sql_text(name), **identifiers)


@dataclass(frozen=True)
class Layout:
    """What `system.columns` says about one of the exporter's tables."""

    table: str
    json: bool  # attribute columns are JSON (`json: true`), not Maps
    timestamp_time: bool  # otel_logs before v0.151: a TimestampTime column

    def describe(self) -> str:
        kind = "JSON" if self.json else "Map"
        older = ", TimestampTime layout" if self.timestamp_time else ""
        return f"{self.table} ({kind} attributes{older})"


def layouts(
    columns: pd.DataFrame, traces: str, logs: str
) -> tuple[Layout | None, Layout | None]:
    """The layouts of the traces and logs tables from system.columns rows (None: absent).

    Raises StoreError, naming the table and the columns, for a table of that name that is
    not the exporter's."""
    found: list[Layout | None] = []
    for table, needed in ((traces, TRACE_COLUMNS), (logs, LOG_COLUMNS)):
        rows = columns[columns["table"] == table]
        if rows.empty:
            found.append(None)
            continue
        types = dict(zip(rows["name"], rows["type"], strict=True))
        missing = [c for c in needed if c not in types]
        if missing:
            raise StoreError(
                f"the table {table!r} is not the OpenTelemetry Collector's ClickHouse "
                f"exporter's: it has no {', '.join(missing)}"
            )
        attrs = types["ResourceAttributes"]
        found.append(Layout(table, attrs.startswith("JSON"), "TimestampTime" in types))
    return found[0], found[1]


# ClickHouse plans a query over views by inlining them, and a column of a view that is used
# in many places is planned in each: over the whole chain of the mapping that took seconds
# (tens with the JSON layout's flattening), for every statement. So the chain is cut into
# stages, each kept as a table in dupescope's own database and refilled in order when the
# exporter's tables changed. A stage holds what it reads in a form the next reads cheaply:
# the JSON layout's attributes flattened into Maps, and one row per span that names a job.


def _newest(parts: list[Part]) -> dict[tuple[str, str], int]:
    """(table, partition) -> the highest block any of its parts holds."""
    newest: dict[tuple[str, str], int] = {}
    for p in parts:
        newest[(p.table, p.partition)] = max(newest.get((p.table, p.partition), -1),
                                             p.max_block)
    return newest


def _signature(parts: list[Part]) -> str:
    """What the exporter's tables hold, as far as reading them goes: the newest block of
    each partition (a merge changes part names, not this)."""
    return ";".join(f"{t}:{d}:{b}" for (t, d), b in sorted(_newest(parts).items()))


def _span_steps(json: bool) -> list[tuple[str, str, bool]]:
    """(relation, query file, kept as a table?) in build order, for otel_traces."""
    return [
        ("otel_spans", "otel_spans_json" if json else "otel_spans", json),
        ("otel_span_kinds_stage", "otel_span_kinds", True),
        ("otel_span_records", "otel_span_records", False),
    ]


def _log_steps(json: bool) -> list[tuple[str, str, bool]]:
    """(relation, query file, kept as a table?) in build order, for otel_logs."""
    return [
        ("otel_logs_rows", "otel_logs_json" if json else "otel_logs", json),
        ("otel_log_attrs", "otel_log_attrs", False),
        ("otel_log_records", "otel_log_records", False),
    ]


class OtelSource:
    """The views that make the exporter's tables read as dupescope's `events`."""

    def __init__(
        self,
        source_db: str,
        own_db: str | None = None,
        traces_table: str = DEFAULT_TRACES,
        logs_table: str = DEFAULT_LOGS,
        since: timedelta | None = None,
    ) -> None:
        self.source_db = identifier(source_db)
        #: History read: the days from `now - since` on (`?since=7d`), or all of it.
        self.since = since
        self.own_db = identifier(own_db or f"{source_db}_dupescope")
        if self.own_db == self.source_db:
            raise StoreError(
                f"dupescope's own database must not be the exporter's ({source_db!r}): "
                "its derived tables and alert state would land beside the user's tables"
            )
        self.traces_table = identifier(traces_table)
        self.logs_table = identifier(logs_table)
        self.traces: Layout | None = None
        self.logs: Layout | None = None
        #: Whether the server fuses a filter into an ARRAY JOIN, which the append turns off.
        self.fuses_array_join_filters = False
        #: (table, the view it is refilled from), in the order a refresh refills them.
        self.stages: list[tuple[str, str]] = []

    def install(
        self,
        command: Callable[[str], object],
        query: Callable[[str, dict[str, Any]], pd.DataFrame],
        use: Callable[[str], None],
    ) -> None:
        """Detect the layouts and (re)create the views in dupescope's own database.

        `use(db)` makes `db` the current database: the views name one another unqualified,
        and ClickHouse resolves such names in the current database when it creates a view.
        """
        columns = query(
            sql_text("otel_columns"),
            {"database": self.source_db, "tables": [self.traces_table, self.logs_table]},
        )
        self.traces, self.logs = layouts(columns, self.traces_table, self.logs_table)
        if self.traces is None and self.logs is None:
            raise StoreError(
                f"no {self.traces_table} or {self.logs_table} table in the database "
                f"{self.source_db!r}: is that where the Collector's ClickHouse exporter "
                "writes?"
            )
        self.fuses_array_join_filters = not query(
            sql_text("otel_setting_known"),
            {"name": "query_plan_fuse_filter_into_array_join"}).empty
        own = self.own_db
        command(statement("otel_database_create", own=own))
        use(own)
        command(statement("otel_window_create", own=own))
        # A database read before the step child spans were kept: read the tables whole
        # once more, so that every parent's children are known.
        keeps_children = not query(sql_text("otel_table_exists"),
                                   {"database": own, "name": "otel_idle_spans"}).empty
        for table in ("otel_step_children_create", "otel_step_parents_create",
                      "otel_idle_spans_create"):
            command(statement(table, own=own))
        records: list[str] = []
        self.stages = []
        for layout, source, steps in (
            (self.traces, "otel_traces_source", _span_steps),
            (self.logs, "otel_logs_source", _log_steps),
        ):
            if layout is None:
                continue
            parts, traces = f"{source}_parts", f"{source}_traces"
            command(statement("otel_reading_create", own=own, parts=parts))
            command(statement("otel_reading_traces_create", own=own, traces=traces))
            if layout is self.traces:
                command(statement("otel_traces_source_view", own=own, view=source,
                                  source_db=self.source_db, table=layout.table, parts=parts,
                                  traces=traces))
            else:
                command(statement("otel_source_view", own=own, view=source,
                                  source_db=self.source_db, table=layout.table, parts=parts))
            # Composed here: a view whose SELECT is a mapping file, and below the UNION ALL
            # of the layouts present. Every name in them was validated as an identifier.
            for name, query_file, stage in steps(layout.json):
                view = f"{name}_view" if stage else name
                command(f"CREATE OR REPLACE VIEW {own}.{view} AS {sql_text(query_file)}")
                if stage:
                    command(statement("otel_stage_create", own=own, stage=name, view=view))
                    self.stages.append((name, view))
            records.append(f"SELECT * FROM {own}.{steps(layout.json)[-1][0]}")
        if self.traces is not None:
            command(statement("otel_step_children_read", own=own))
        command(f"CREATE OR REPLACE VIEW {own}.otel_records AS {' UNION ALL '.join(records)}")
        command(f"CREATE OR REPLACE VIEW {own}.otel_events AS {sql_text('otel_events')}")
        stale = query(sql_text("otel_events_view_stale"), {"database": own})
        if not stale.empty:
            command(statement("otel_events_view_drop", own=own))
        for ddl in events_ddl(own):
            command(ddl)
        command(statement("otel_read_create", own=own))
        command(statement("otel_read_parts_create", own=own))
        otel_index.prepare(command, own)
        if not keeps_children:
            command(statement("otel_read_forget", own=own))
            command(statement("otel_read_parts_forget", own=own))

    def tables(self) -> list[tuple[Layout, str]]:
        """(layout, its source view) of each of the exporter's tables present."""
        return [(layout, source) for layout, source in
                ((self.traces, "otel_traces_source"), (self.logs, "otel_logs_source"))
                if layout is not None]

    def describe(self) -> str:
        tables = ", ".join(t.describe() for t in (self.traces, self.logs) if t is not None)
        return f"the Collector's tables in {self.source_db}: {tables}; own tables in {self.own_db}"


#: How long a refresh waits for another process's refill, and how long a lock may go
#: unmarked (its holder marks it after each chunk it reads) before it is a dead one's.
REFILL_WAIT_S = 300
#: Reads of a chunk's parts, each after a merge took some of them while the last ran,
#: before a refresh gives up (and the next one reads that chunk again).
MERGE_ROUNDS = 10
REFILL_STALE_S = 900


class OtelReading(Store):
    """What both kinds of store do over the exporter's tables: keep `events` current.

    Mixed in before ChdbStore or ClickHouseStore, whose command, execute, arrow and
    describe it uses (declared by `Store`, which both implement)."""

    source: OtelSource
    _refreshed: str | None = None
    #: Rows a chunk of a read holds at most (store/otel_chunks.py).
    chunk_rows: int = CHUNK_ROWS
    #: Where reads stand, for the CLI and /metrics (store/otel_progress.py).
    progress: Progress

    #: Set by `read_recent_first`: where a refresh facing a backlog of more than a chunk
    #: starts, leaving the older rows to the next refresh.
    recent_from: datetime | None = None
    #: The tables' signature and `recent_from` when the recent rows were read first, and
    #: what that refresh returned: asked again alike in this process, it reads nothing.
    _recent_read: tuple[str, datetime, str] | None = None
    #: The parts (table, name) the read under way has read, whole or from its window (set
    #: by each read as it starts).
    _read_now: set[tuple[str, str]]

    def read_recent_first(self, since: datetime) -> None:
        """Let the next refresh answer from the rows at or after `since` alone when the
        unread backlog is more than a chunk: a first read of a large table then answers
        a question about the last hour in seconds, not after the whole history.

        The parts of the days from `since` on are read from `since` on and recorded as
        unread, so the next refresh without it reads them whole (a row read twice
        replaces itself) with the older days. Until then a key is judged by its rows
        from `since` on, as under `?since=`."""
        self.recent_from = since.astimezone(UTC)

    def read_newest_first(self, window: timedelta | None) -> None:
        """`read_recent_first` from the exporter's newest row less `window`, or (None) read
        the backlog whole again from the next refresh on.

        `watch`'s first round looks only at the last `--lateness` behind the newest event:
        on a table never read, that window read first gives its first alerts in seconds,
        and the next round reads the rest."""
        if window is None:
            self.recent_from = None
            return
        newest = self._newest_row()
        if newest is not None:
            self.read_recent_first(newest - window)

    def _newest_row(self) -> datetime | None:
        """The newest row time of the exporter's tables, from each one's newest day."""
        newest: dict[str, str] = {}
        for part in self._parts():
            newest[part.table] = max(newest.get(part.table, ""), part.partition)
        found: list[int] = []
        for table, partition in newest.items():
            row = self.arrow(statement("otel_newest", source_db=self.source.source_db,
                                       table=table), {"partition": partition}).to_pylist()[0]
            if int(row["n"]) > 0:
                found.append(int(row["newest_us"]))
        if not found:
            return None
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=max(found))

    def refresh(self) -> str:
        """Add the mapping of the exporter's new rows to `events`; returns a signature
        of what has been read (it changes when the exporter's tables do)."""
        parts = self._parts()
        current = _signature(parts)
        if current == self._refreshed:
            return current
        if self._recent_read is not None and self._recent_read[:2] == (current,
                                                                       self.recent_from):
            return self._recent_read[2]
        read = self._read()
        if not self._unread(parts, read) and not self._days_gone(parts, read):
            self._refreshed = current  # another process read these already
            return current
        self._lock_refill()
        try:
            otel_index.catch_up(self.command, self.arrow, self.source.own_db)
            parts, read = self._parts(), self._read()
            unread, gone = self._unread(parts, read), self._days_gone(parts, read)
            recent = self._recent_parts(unread)
            if recent:
                return self._read_recent(recent, unread, _signature(parts))
            if unread or gone:
                self._read_chunks(unread, first=not read)
                self._drop_days(gone)
            current = _signature(parts)
        finally:
            self.command(statement("otel_refill_unlock", own=self.source.own_db))
        self._refreshed = current
        return current

    def _recent_parts(self, unread: list[Part]) -> list[Part]:
        """The unread parts of the days from `recent_from` on, where a recent window is
        asked for and the backlog is more than a chunk (else the read is whole)."""
        if self.recent_from is None or sum(p.rows for p in unread) <= self.chunk_rows:
            return []
        return within(unread, self.recent_from.date())

    def _read_recent(self, recent: list[Part], unread: list[Part], current: str) -> str:
        """The rows from `recent_from` on of the `recent` parts into `events`, recorded
        as read nowhere; the rest of the backlog told as left for the next refresh."""
        assert self.recent_from is not None
        rows_total = sum(p.rows for p in unread)
        progress = ReadProgress(rows_total=rows_total, chunks_total=1,
                                partition=max(p.partition for p in recent),
                                recent_from=self.recent_from.isoformat())
        self._read_now = set()
        self._append_current(recent, first=False, read_from=self.recent_from)
        progress.chunks_read = 1
        progress.finished = True
        self.progress.tell(progress)
        answered = f"{current}|from {self.recent_from.isoformat()}"
        self._recent_read = (current, self.recent_from, answered)
        return answered

    def _parts(self) -> list[Part]:
        tables = [layout.table for layout, _ in self.source.tables()]
        found = self.arrow(sql_text("otel_parts"),
                           {"database": self.source.source_db, "tables": tables}).to_pylist()
        return [Part(str(r["table"]), str(r["partition_id"]), str(r["name"]),
                     int(r["max_block_number"]), int(r["rows"]), int(r["min_block_number"]))
                for r in found]

    def _read(self) -> dict[tuple[str, str], int]:
        read = self.arrow(statement("otel_read", own=self.source.own_db)).to_pylist()
        return {(str(r["table"]), str(r["partition_id"])): int(r["max_block"]) for r in read}

    def _unread(self, parts: list[Part], read: dict[tuple[str, str], int]) -> list[Part]:
        """Parts holding a block not read yet (a new insert, or a merge that took one), of
        the days `since` keeps, less those a chunked read took before it was stopped."""
        done = {(str(r["table"]), str(r["name"])) for r in self.arrow(
            statement("otel_read_parts", own=self.source.own_db)).to_pylist()}
        first_day = cutoff_day(self.source.since, datetime.now(UTC))
        return [p for p in within(parts, first_day)
                if p.max_block > read.get((p.table, p.partition), -1)
                and (p.table, p.name) not in done]

    def _read_chunks(self, unread: list[Part], *, first: bool) -> None:
        """The unread parts mapped into `events` chunk by chunk, newest day first, each
        chunk recorded as read once it is in (a read killed halfway resumes at the chunk
        it was in), with its progress told to whoever follows it."""
        chunks = plan(unread, self.chunk_rows)
        progress = ReadProgress(rows_total=sum(p.rows for p in unread),
                                chunks_total=len(chunks))
        left: dict[tuple[str, str], int] = {}
        for part in unread:
            left[(part.table, part.partition)] = left.get((part.table, part.partition), 0) + 1
        newest = _newest(unread)
        own = self.source.own_db
        self._read_now = set()
        if first:  # the index filled once a chunk, not by its view (store/otel_index.py)
            otel_index.pause(self.command, own)
        try:
            for chunk in chunks:
                self._read_chunk(chunk, first=first, alone=len(chunks) == 1,
                                 left=left, newest=newest, progress=progress)
        finally:
            if first:
                otel_index.resume(self.command, own)
        progress.finished = True
        self.progress.tell(progress)

    def _read_chunk(self, chunk: list[Part], *, first: bool, alone: bool,
                    left: dict[tuple[str, str], int], newest: dict[tuple[str, str], int],
                    progress: ReadProgress) -> None:
        """One chunk into `events` (and, on a first read, the id index), recorded as read."""
        # A parent span and its step children may fall in different chunks: only a
        # read in one chunk may take the first read's shortcut.
        read = self._append_current(chunk, first=first and alone, bulk=first)
        for part in chunk:
            left[(part.table, part.partition)] -= 1
        # By name only the parts of days not read whole yet: a day read whole is
        # recorded by its newest block, so the list stays as short as a read's backlog.
        # The merged parts read in place of planned ones too: a read resumed after a kill
        # finds those, not the parts planned.
        partial = [p for p in chunk + read if left[(p.table, p.partition)] > 0]
        if partial:
            self.command(statement("otel_read_parts_add", own=self.source.own_db),
                         {"tables": [p.table for p in partial],
                          "names": [p.name for p in partial]})
        self._record([(t, d, newest[(t, d)]) for (t, d) in {(p.table, p.partition)
                                                           for p in chunk}
                      if left[(t, d)] == 0])
        self._mark_refill()
        progress.chunks_read += 1
        progress.rows_read += sum(p.rows for p in chunk)
        progress.partition = chunk[0].partition
        self.progress.tell(progress)

    def _append_current(self, planned: list[Part], *, first: bool, bulk: bool = False,
                        read_from: datetime | None = None) -> list[Part]:
        """`_append` of the parts that hold the `planned` parts' rows now; returns them.

        The exporter's server merges parts all the time, and a read of many chunks runs
        for minutes: a part planned for a later chunk may be merged away before that chunk
        reads it, and reading it by its old name would find nothing. So each chunk reads
        the active parts that hold its planned ones (the merged part, whole, where one was
        merged), and once more any of those a merge took while the chunk was read: the
        chunk's statements each read the tables as they are when they start. A part
        already read whole by this read is not read again (a part's name names its rows):
        a merged part holding several chunks' parts is read once."""
        def unread(parts: list[Part]) -> list[Part]:
            return [p for p in parts if (p.table, p.name) not in self._read_now]

        reading = unread(holding(planned, self._parts()))
        read: list[Part] = []
        for _ in range(MERGE_ROUNDS):
            if not reading:
                return read
            self._append(reading, first=first and not read, bulk=bulk, read_from=read_from)
            read += reading
            self._read_now |= {(p.table, p.name) for p in reading}
            active = self._parts()
            names = {(p.table, p.name) for p in active}
            reading = unread(holding([p for p in reading if (p.table, p.name) not in names],
                                     active))
        if reading:  # not recorded as read: the next refresh reads this chunk again
            raise StoreError(
                f"parts of {self.source.source_db} were merged while each of "
                f"{MERGE_ROUNDS} reads of them ran ({', '.join(p.name for p in reading)}); "
                "the next refresh reads them again"
            )
        return read

    def _days_gone(self, parts: list[Part], read: dict[tuple[str, str], int]) -> list[str]:
        """Partitions `events` holds that were read and that no exporter table holds any
        more (retention)."""
        held = {p.partition for p in parts}
        was_read = {partition for _, partition in read}
        ours = self.execute(sql_text("otel_events_days"), {"database": self.source.own_db})
        return sorted(d for d in ours["partition_id"] if d in was_read and d not in held)

    def _append(self, unread: list[Part], *, first: bool, bulk: bool = False,
                read_from: datetime | None = None) -> None:
        """The mapping of the unread parts' rows (from `read_from` on, where given) added
        to `events`, with the spans read earlier that a new step child span makes
        executions (none on a first read, which reads everything)."""
        own = self.source.own_db
        self.command(statement("otel_window_clear", own=own))
        if read_from is not None:
            self.command(statement("otel_window_set", own=own), {"read_from": read_from})
        for layout, source in self.source.tables():
            parts, traces = f"{source}_parts", f"{source}_traces"
            for table in (parts, traces):
                self.command(statement("otel_reading_truncate", own=own, parts=table))
            names = [p.name for p in unread if p.table == layout.table]
            if names:
                self.command(statement("otel_reading_fill", own=own, parts=parts),
                             {"names": names})
        spans = [s for s in self.source.stages if s[0] == "otel_spans"]
        rest = [s for s in self.source.stages if s[0] != "otel_spans"]
        if self.source.traces is not None:
            self._fill(spans)
            if not first and self._revisit():
                self._fill(spans)
            self.command(statement("otel_step_children_add", own=own))
            self.command(statement("otel_step_parents_truncate", own=own))
            fill = "otel_step_parents_fill_read" if first else self._parents_fill(unread)
            if fill is not None:
                self.command(statement(fill, own=own))
        self._fill(rest)
        if self.source.traces is not None:
            self.command(statement("otel_idle_spans_add", own=own))
        if bulk:
            otel_index.mark(self.command, own)
        self.command(statement("otel_events_append_unfused"
                               if self.source.fuses_array_join_filters
                               else "otel_events_append", own=own))
        if bulk:
            otel_index.fill(self.command, own)
        # Emptied now, not by the next refresh: dropping a first read's millions of rows
        # takes seconds, which the first read pays better than the next small batch.
        for stage, _ in self.source.stages:
            self.command(statement("otel_stage_truncate", own=own, stage=stage))
        if read_from is not None:
            self.command(statement("otel_window_clear", own=own))

    def _parents_fill(self, reading: list[Part]) -> str | None:
        """How a read that is not a first read in one chunk finds the spans it reads that
        have a kept step child span: not at all where none is kept (an exporter whose steps
        are span events), through a set of the kept children's parents where they are no
        more than the spans read (a first read in chunks, where a set of each chunk's two
        million span ids cost ten times as long), else through a set of the spans read,
        looked up by the kept children's sort key (a batch of new spans over a long
        history of step child spans)."""
        assert self.source.traces is not None
        traces = self.source.traces.table
        spans = sum(p.rows for p in reading if p.table == traces)
        kept = int(self.execute(statement("otel_reading_count", own=self.source.own_db,
                                          table="otel_step_children"))["n"].iloc[0])
        if kept == 0:
            return None
        return ("otel_step_parents_fill_few_children" if kept <= spans
                else "otel_step_parents_fill")

    def _fill(self, stages: list[tuple[str, str]]) -> None:
        for stage, view in stages:
            self.command(statement("otel_stage_truncate", own=self.source.own_db, stage=stage))
            self.command(statement("otel_stage_fill", own=self.source.own_db, stage=stage,
                                   view=view))

    def _revisit(self) -> bool:
        """Mark for reading again the traces of spans read earlier that name a job and
        record no event, where a span now read is a step child of theirs; whether any."""
        own, traces = self.source.own_db, "otel_traces_source_traces"
        self.command(statement("otel_revisit_fill", own=own, traces=traces))
        found = self.execute(statement("otel_reading_count", own=own, table=traces))
        return int(found["n"].iloc[0]) > 0

    def _drop_days(self, days: list[str]) -> None:
        own = self.source.own_db
        for day in days:
            self.command(statement("otel_events_drop_day", own=own), {"partition": day})
            if self.source.traces is not None:
                for table in ("otel_step_children", "otel_idle_spans"):
                    self.command(statement("otel_bookkeeping_drop_day", own=own, table=table),
                                 {"partition": day})

    def _record(self, done: list[tuple[str, str, int]]) -> None:
        """Partitions read whole, each up to its newest block: (table, partition, block)."""
        if done:
            self.command(statement("otel_read_set", own=self.source.own_db),
                         {"tables": [t for t, _, _ in done],
                          "partitions": [d for _, d, _ in done],
                          "blocks": [b for _, _, b in done]})

    def _lock_refill(self) -> None:
        """One refresh at a time (a dashboard and `watch` may share the store): the stage
        tables are shared. CREATE TABLE is the lock, as it fails where the table exists.
        A lock whose holder's process has ended on this host is taken over at once; one
        not marked for REFILL_STALE_S (store/refill_holder.py) is a dead process's too."""
        own = self.source.own_db
        deadline = time.monotonic() + REFILL_WAIT_S
        while True:
            try:
                self.command(statement("otel_refill_lock", own=own))
                self._mark_refill()
                return
            except StoreError:
                pass
            holder = self._refill_holder()
            if holder is not None and holder.gone(REFILL_STALE_S):
                self.command(statement("otel_refill_unlock", own=own))
                continue
            if time.monotonic() > deadline:
                raise StoreError(
                    f"another process has been refilling {own}.events for over "
                    f"{REFILL_WAIT_S} s (drop {own}.otel_refilling if none is running)"
                )
            time.sleep(0.2)

    def _mark_refill(self) -> None:
        """Tell other processes that this one holds the refill lock and is reading."""
        self.command(statement("otel_refill_mark", own=self.source.own_db),
                     {"host": this_host(), "pid": os.getpid()})

    def _refill_holder(self) -> Holder | None:
        """The refill lock's holder, by its last mark; by the lock's own age where it
        bears no mark yet (or is a lock of an earlier layout); None where no lock is
        held any more."""
        own = self.source.own_db
        try:
            marks = self.execute(statement("otel_refill_holder", own=own))
        except StoreError:
            marks = None
        if marks is not None and not marks.empty:
            row = marks.iloc[0]
            return Holder(str(row["host"]), int(row["pid"]), int(row["age"]))
        age = self.execute(sql_text("otel_refill_lock_age"), {"database": own})
        return None if age.empty else Holder("", 0, int(age["age"].iloc[0]))

    def snapshot_id(self) -> str:
        """The derived tables' cache key (queries/derived.py), after a refresh."""
        return self.refresh()

    def key_rows(self, key: str) -> pa.Table | None:
        """None, after a refresh: timeline.sql finds the key in dupescope's own `events` by
        its sort key and job_id bloom filter, as on any ClickHouse store."""
        self.refresh()
        return None

    def write(self, table: pa.Table) -> int:
        raise StoreError(
            f"{self.describe()} is read in place: the Collector writes its tables, dupescope "
            "never does (send events to a store of dupescope's own to ingest them)"
        )



class OtelChdbStore(OtelReading, ChdbStore):
    """chDB holding the exporter's tables (a copy of a server's, or a test's)."""

    def __init__(self, path: str | None, source: OtelSource) -> None:
        from chdb import session

        self.path = path
        self.source = source
        self.database = source.own_db
        self.progress = Progress()
        self._session = session.Session(path) if path else session.Session()
        source.install(self.command, self._query, lambda db: self.command(f"USE {db}"))
        self._upgrade()

    def _query(self, sql: str, params: dict[str, Any]) -> pd.DataFrame:
        return self.execute(sql, params)

    def describe(self) -> str:
        where = f"chDB at {self.path}" if self.path else "chDB in memory"
        return f"{where}, {self.source.describe()}"


class OtelClickHouseStore(OtelReading, ClickHouseStore):
    """A ClickHouse server where the Collector's exporter writes."""

    def __init__(self, *, source: OtelSource, host: str, port: int = 8123,
                 username: str = "default", password: str = "", secure: bool = False) -> None:
        import clickhouse_connect

        self.source = source
        self.database = source.own_db
        self.cluster = None
        self.progress = Progress()
        self._where = f"ClickHouse at {host}:{port}"
        try:
            self._client = clickhouse_connect.get_client(
                host=host, port=port, username=username, password=password, secure=secure
            )
            source.install(self._client.command, self._query, self._use)
            self._upgrade()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot open ClickHouse at {host}:{port}: {exc}") from exc

    def _use(self, database: str) -> None:
        self._client.database = database

    def _query(self, sql: str, params: dict[str, Any]) -> pd.DataFrame:
        return self._client.query_df(sql, parameters=params)

    def describe(self) -> str:
        return f"{self._where}, {self.source.describe()}"
