"""The OpenTelemetry Collector's ClickHouse tables (`otel_traces`, `otel_logs`), read in place.

Teams that already ship traces and logs with the Collector's ClickHouse exporter point
dupescope at those tables (`clickhouse://host:8123/otel?source=otel`, or
`chdb:///path?source=otel`): no second pipeline, no copy. The `events` relation the query
library reads is a view, the contract mapping over the user's tables
(store/sql/clickhouse/otel_*.sql); the derived tables, kept answers and alert state live
in a database of dupescope's own (`<db>_dupescope`, or `?dupescope_db=`). dupescope never
writes to, alters or adds indexes to the exporter's tables.

The mapping is a view (`otel_events`); what the questions read is `events`, a table in
dupescope's own database filled from that view whenever the exporter's tables changed (one
pass of the mapping, swapped in whole): planning the mapping costs ClickHouse a second or
two, which every derived table and key lookup would otherwise pay again. `events` is sorted
by key and carries a bloom filter on job_id, so a timeline reads a few granules: the key
index dupescope keeps of its own, never on the user's tables.

The layout of each table is read from `system.columns`: attribute columns as Maps or as
JSON (`json: true`), and for logs the layout before v0.151 (a `TimestampTime` column) or
since.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from store.base import Store, StoreError
from store.clickhouse import ChdbStore, ClickHouseStore, events_ddl
from store.clickhouse import _identifier as identifier
from store.sql_files import read, with_identifiers

DEFAULT_TRACES = "otel_traces"
DEFAULT_LOGS = "otel_logs"
#: Columns the mapping reads, per table: a table without them is not the exporter's.
TRACE_COLUMNS = ("Timestamp", "TraceId", "SpanId", "ParentSpanId", "SpanName", "SpanKind",
                 "Duration", "StatusMessage", "ResourceAttributes", "SpanAttributes",
                 "Events.Timestamp", "Events.Name", "Events.Attributes")
LOG_COLUMNS = ("Timestamp", "TraceId", "SpanId", "Body", "ResourceAttributes", "LogAttributes")

_SQL = Path(__file__).parent / "sql"


def sql_text(name: str) -> str:
    """A statement or mapping stage of store/sql/clickhouse/, without its comment lines
    (a view keeps its SELECT as given)."""
    text = read(_SQL, name, "clickhouse")
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
    ) -> None:
        self.source_db = identifier(source_db)
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
        own = self.own_db
        command(statement("otel_database_create", own=own))
        use(own)
        records: list[str] = []
        self.stages = []
        for layout, source, steps in (
            (self.traces, "otel_traces_source", _span_steps),
            (self.logs, "otel_logs_source", _log_steps),
        ):
            if layout is None:
                continue
            command(
                statement(
                    "otel_source_view",
                    own=own, view=source, source_db=self.source_db, table=layout.table,
                )
            )
            # Composed here: a view whose SELECT is a mapping file, and below the UNION ALL
            # of the layouts present. Every name in them was validated as an identifier.
            for name, query_file, stage in steps(layout.json):
                view = f"{name}_view" if stage else name
                command(f"CREATE OR REPLACE VIEW {own}.{view} AS {sql_text(query_file)}")
                if stage:
                    command(statement("otel_stage_create", own=own, stage=name, view=view))
                    self.stages.append((name, view))
            records.append(f"SELECT * FROM {own}.{steps(layout.json)[-1][0]}")
        command(f"CREATE OR REPLACE VIEW {own}.otel_records AS {' UNION ALL '.join(records)}")
        command(f"CREATE OR REPLACE VIEW {own}.otel_events AS {sql_text('otel_events')}")
        stale = query(sql_text("otel_events_view_stale"), {"database": own})
        if not stale.empty:
            command(statement("otel_events_view_drop", own=own))
        for ddl in events_ddl(own):
            command(ddl)
        command(statement("otel_refreshed_create", own=own))

    def fingerprint_sql(self) -> str:
        """A cheap statement whose answer changes when the exporter's tables do: their
        count(), which a MergeTree answers from part metadata (the exporter only inserts;
        TTL drops whole parts). It runs before every question, so it reads no column."""
        parts = []
        for layout in (self.traces, self.logs):
            if layout is not None:
                parts.append(
                    f"SELECT '{layout.table}' AS t, count() AS n "
                    f"FROM {self.source_db}.{layout.table}"
                )
        return " UNION ALL ".join(parts)

    def describe(self) -> str:
        tables = ", ".join(t.describe() for t in (self.traces, self.logs) if t is not None)
        return f"the Collector's tables in {self.source_db}: {tables}; own tables in {self.own_db}"


#: How long a refresh waits for another process's refill, and when a lock is a dead one's.
REFILL_WAIT_S = 300
REFILL_STALE_S = 900


class OtelReading(Store):
    """What both kinds of store do over the exporter's tables: keep `events` current.

    Mixed in before ChdbStore or ClickHouseStore, whose command, execute, arrow and
    describe it uses (declared by `Store`, which both implement)."""

    source: OtelSource
    _refreshed: str | None = None

    def refresh(self) -> str:
        """Refill `events` from the mapping if the exporter's tables changed; returns the
        fingerprint of what `events` now holds."""
        frame = self.execute(self.source.fingerprint_sql())
        # UNION ALL answers its parts in any order: the fingerprint must not follow it.
        current = ";".join(sorted(f"{r.t}:{r.n}" for r in frame.itertuples()))
        if current == self._refreshed:
            return current
        own = self.source.own_db
        if self._refilled_from() == current:
            self._refreshed = current  # another process refilled events from these tables
            return current
        self._lock_refill()
        try:
            if self._refilled_from() != current:
                self._refill(current)
        finally:
            self.command(statement("otel_refill_unlock", own=own))
        self._refreshed = current
        return current

    def _refilled_from(self) -> str | None:
        kept = self.execute(statement("otel_refreshed", own=self.source.own_db))
        return None if kept.empty else str(kept["fingerprint"].iloc[0])

    def _lock_refill(self) -> None:
        """One refill at a time (a dashboard and `watch` may share the store): the stage
        tables are shared. CREATE TABLE is the lock, as it fails where the table exists; a
        lock older than REFILL_STALE_S is a dead process's and is taken over."""
        own = self.source.own_db
        deadline = time.monotonic() + REFILL_WAIT_S
        while True:
            try:
                self.command(statement("otel_refill_lock", own=own))
                return
            except StoreError:
                pass
            age = self.execute(sql_text("otel_refill_lock_age"), {"database": own})
            if not age.empty and int(age["age"].iloc[0]) > REFILL_STALE_S:
                self.command(statement("otel_refill_unlock", own=own))
                continue
            if time.monotonic() > deadline:
                raise StoreError(
                    f"another process has been refilling {own}.events for over "
                    f"{REFILL_WAIT_S} s (drop {own}.otel_refilling if none is running)"
                )
            time.sleep(0.2)

    def _refill(self, fingerprint: str) -> None:
        """`events` from the mapping in one pass, swapped in whole."""
        own = self.source.own_db
        for stage, view in self.source.stages:
            self.command(statement("otel_stage_truncate", own=own, stage=stage))
            self.command(statement("otel_stage_fill", own=own, stage=stage, view=view))
        for name in (
            "otel_events_next_drop",
            "otel_events_next_create",
            "otel_events_next_fill",
            "otel_events_swap",
            "otel_events_next_drop",
        ):
            self.command(statement(name, own=own))
        self.command(
            statement("otel_refreshed_set", own=own), {"fingerprint": fingerprint}
        )

    def snapshot_id(self) -> str:
        """The derived tables' cache key (queries/derived.py), after a refresh."""
        return self.refresh()

    def key_rows(self, key: str) -> pa.Table:
        """A superset of the rows of `key`'s timeline, read by the sort key and the job_id
        bloom filter of dupescope's own `events` (queries/timeline.py groups them)."""
        self.refresh()
        return self.arrow(sql_text("otel_key_rows"), {"key": key})

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
