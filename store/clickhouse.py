"""ClickHouse: a server through clickhouse-connect, or chDB (the same engine, in-process).

Both run the ClickHouse dialect of the query library against one `events` table: a
ReplacingMergeTree partitioned by day and ordered for key lookups, so repeats of an
event_uid also collapse on merges, with TTL retention. Each row also records when it was
inserted (`ingested_at`, filled by the server and left out of `SELECT *`), so that the
derived tables find the rows that arrived since they last looked through a minmax index
instead of reading the history (derive/clickhouse/incremental.py).
"""

from __future__ import annotations

import fcntl
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from store.base import SegmentedStore, Store, StoreError, to_frame
from store.contract import COLUMNS
from store.schema import as_events
from store.sql_files import read, with_identifiers

if TYPE_CHECKING:
    import pandas as pd

_SQL = Path(__file__).with_name("sql")

#: A batch may hold events of any number of days (a file of last quarter's logs, the first
#: read of an exporter's tables): ClickHouse refuses an insert into more than 100
#: partitions unless told otherwise.
ANY_DAYS = "max_partitions_per_insert_block = 0"

#: When a row was inserted: the server's clock at the insert, never sent by a client.
INGESTED_AT = "ingested_at DateTime64(6) MATERIALIZED now64(6)"

#: Rows a mark of a kept table (and of the id index) covers, where ClickHouse's default is
#: 8192: a batch looks up a thousand or so units scattered over all the kept rows (random
#: job_ids), and each lookup reads the granule its unit falls in. At 100M events, looking
#: up a batch's 1,250 job_ids read 859 of 1,531 granules of 12.5M kept jobs; with 1024
#: the same lookups take a third of the time, and the marks of 15M rows still fit in
#: 300 kB.
LOOKUP_GRANULARITY = 1024

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise StoreError(f"not a valid ClickHouse identifier: {name!r}")
    return name


def events_ddl(
    database: str = "default",
    *,
    ttl_days: int | None = None,
    cluster: str | None = None,
) -> list[str]:
    """CREATE statements for the events table (and, on a cluster, its Distributed front).

    Identifiers cannot be bound parameters, so they are validated instead.
    """
    db = _identifier(database)
    on_cluster = f" ON CLUSTER {_identifier(cluster)}" if cluster else ""
    columns = ",\n  ".join(
        [f"{c.name} {c.clickhouse_type}" for c in COLUMNS]
        + [INGESTED_AT]
        # A timeline's second step looks rows up by job_id, which the sort key cannot prune.
        + ["INDEX job_id_bloom job_id TYPE bloom_filter GRANULARITY 4",
           "INDEX ingested_minmax ingested_at TYPE minmax GRANULARITY 1"]
    )
    # Whole days are dropped, never rows inside a day's parts: the derived tables notice
    # retention by a day that is gone (derive/clickhouse/incremental.py).
    ttl = (f"\nTTL toDateTime(ts) + INTERVAL {int(ttl_days)} DAY"
           "\nSETTINGS ttl_only_drop_parts = 1" if ttl_days else "")
    local = "events_local" if cluster else "events"
    engine = (
        "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/events_local', "
        "'{replica}')"
        if cluster
        else "ReplacingMergeTree"
    )
    statements = [
        f"CREATE DATABASE IF NOT EXISTS {db}{on_cluster}",
        f"CREATE TABLE IF NOT EXISTS {db}.{local}{on_cluster} (\n  {columns}\n)\n"
        f"ENGINE = {engine}\nPARTITION BY toDate(ts)\n"
        f"ORDER BY (ifNull(idempotency_key, ''), ifNull(job_id, ''), ts, event_uid){ttl}",
    ]
    if cluster:
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {db}.events{on_cluster} AS {db}.events_local\n"
            f"ENGINE = Distributed({_identifier(cluster)}, {db}, events_local, "
            f"cityHash64(ifNull(idempotency_key, ifNull(job_id, event_uid))))"
        )
    return statements


def ids_ddl(database: str, *, ttl_days: int | None = None,
            cluster: str | None = None) -> list[str]:
    """The id index beside `events`: each (key, job_id) pair under its job_id and under
    its key, with its first insert time, kept by a materialized view of every insert.

    A derivation looks the touched keys and jobs up here to learn which pairs have rows
    from before what it read; only those are read from `events`. Looking thousands of
    job_ids up in `events` itself passes its bloom filter in every granule, which made a
    batch cost as much as reading the history. It outlives its events by a day under
    retention: a pair listed whose rows are gone costs a read that finds nothing, while a
    pair missing would lose rows."""
    db = _identifier(database)
    on_cluster = f" ON CLUSTER {_identifier(cluster)}" if cluster else ""
    local = "events_ids_local" if cluster else "events_ids"
    engine = (
        "ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/"
        "events_ids_local', '{replica}')" if cluster else "AggregatingMergeTree"
    )
    # Not partitioned: a lookup of thousands of values would probe every day's parts.
    # Expired rows go in merges instead of with whole parts.
    ttl = f"\nTTL day + INTERVAL {int(ttl_days) + 1} DAY" if ttl_days else ""
    rows = with_identifiers(read(_SQL, "events_ids_rows", "clickhouse"), db=db,
                            events="events_local" if cluster else "events")
    statements = [
        f"CREATE TABLE IF NOT EXISTS {db}.{local}{on_cluster} (\n"
        "  value String,\n  idempotency_key String,\n  job_id String,\n  day Date,\n"
        "  first_ingested SimpleAggregateFunction(min, DateTime64(6))\n)\n"
        f"ENGINE = {engine}\n"
        f"ORDER BY (value, idempotency_key, job_id, day){ttl}\n"
        f"SETTINGS index_granularity = {LOOKUP_GRANULARITY}",
    ]
    if cluster:
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {db}.events_ids{on_cluster} AS {db}.events_ids_local\n"
            f"ENGINE = Distributed({_identifier(cluster)}, {db}, events_ids_local, rand())"
        )
    statements.append(f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.events_ids_mv{on_cluster} "
                      f"TO {db}.{local} AS\n{rows}")
    return statements


def ids_fill_statements(database: str, *, cluster: str | None = None) -> list[str]:
    """What an `events` table made before the id index needs: the index filled from its
    rows (after the view is made, so no insert is missed; a row both ways is harmless, as
    the index keeps the first insert time), then a mark that it was."""
    db = _identifier(database)
    on_cluster = f" ON CLUSTER {_identifier(cluster)}" if cluster else ""
    rows = with_identifiers(read(_SQL, "events_ids_rows", "clickhouse"), db=db,
                            events="events")
    return [
        f"INSERT INTO {db}.events_ids\n{rows}\nSETTINGS {ANY_DAYS}",
        f"CREATE TABLE IF NOT EXISTS {db}.events_ids_filled{on_cluster} (at DateTime) "
        "ENGINE = MergeTree ORDER BY tuple()",
    ]


def upgrade_statements(database: str = "default", *, cluster: str | None = None) -> list[str]:
    """What an `events` table made before rows recorded their insert time needs: the
    column, written into the rows there are (else each read would give them the time of
    the read, and they would look new forever), and its index."""
    db = _identifier(database)
    on_cluster = f" ON CLUSTER {_identifier(cluster)}" if cluster else ""
    local = f"{db}.events_local" if cluster else f"{db}.events"
    wait = " SETTINGS mutations_sync = 2"
    statements = [
        f"ALTER TABLE {local}{on_cluster} ADD COLUMN IF NOT EXISTS {INGESTED_AT}",
        f"ALTER TABLE {local}{on_cluster} MATERIALIZE COLUMN ingested_at{wait}",
        f"ALTER TABLE {local}{on_cluster} ADD INDEX IF NOT EXISTS ingested_minmax "
        "ingested_at TYPE minmax GRANULARITY 1",
        f"ALTER TABLE {local}{on_cluster} MATERIALIZE INDEX ingested_minmax{wait}",
    ]
    if cluster:
        statements.insert(1, f"ALTER TABLE {db}.events{on_cluster} "
                             f"ADD COLUMN IF NOT EXISTS {INGESTED_AT}")
    return statements


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("'", "\\'")


def param_text(value: Any, *, nested: bool = False) -> str:
    """A value in ClickHouse's query-parameter text form (what `param_<name>` carries)."""
    if value is None:
        return "NULL" if nested else "\\N"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        text = value.strftime("%Y-%m-%d %H:%M:%S.%f")
    elif isinstance(value, date):
        text = value.isoformat()
    elif isinstance(value, list | tuple):
        return "[" + ",".join(param_text(v, nested=True) for v in value) + "]"
    elif isinstance(value, int | float):
        return repr(value)
    else:
        text = str(value)
    return f"'{_escape(text)}'" if nested else _escape(text)


class ClickHouseEngine(Store):
    """What chDB and a ClickHouse server answer alike: the dialect, frames from Arrow, and
    no snapshot id, key index or segments of their own (the engine keeps those)."""

    dialect = "clickhouse"

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
        return to_frame(self.arrow(sql, params))

    def snapshot_id(self) -> str | None:
        """None: the fingerprint is a query over `events` (queries/derived.py)."""
        return None

    def key_rows(self, key: str) -> pa.Table | None:
        """None: timeline.sql finds the key by the table's sort key and bloom filter."""
        return None

    def segmented(self) -> SegmentedStore | None:
        return None

    database: str
    cluster: str | None = None
    ttl_days: int | None = None

    #: A derivation lock older than this was left by a process that died holding it.
    STALE_LOCK_SECONDS = 300

    def _upgrade(self) -> None:
        """Bring an `events` table made by an earlier version up to this one."""
        present = self.arrow(read(_SQL, "events_ingested_at_present", "clickhouse"),
                             {"database": self.database})
        if not present["present"][0].as_py():
            for statement in upgrade_statements(self.database, cluster=self.cluster):
                self.command(statement)
        for statement in ids_ddl(self.database, ttl_days=self.ttl_days, cluster=self.cluster):
            self.command(statement)
        filled = self.arrow(read(_SQL, "events_ids_filled", "clickhouse"),
                            {"database": self.database})
        if not filled["filled"][0].as_py():
            for statement in ids_fill_statements(self.database, cluster=self.cluster):
                self.command(statement)

    @contextmanager
    def derivation_lock(self) -> Iterator[None]:
        """One process at a time brings the derived tables up to date: a table that only
        one CREATE can make (a lock every client of the server sees), taken over when
        its holder has held it for longer than any derivation takes."""
        lock = with_identifiers(read(_SQL, "derive_lock", "clickhouse"), db=self.database)
        while True:
            try:
                self.command(lock)
                break
            except StoreError:
                age = self.arrow(read(_SQL, "derive_lock_age", "clickhouse"),
                                 {"database": self.database})["age"].to_pylist()
                if age and age[0] is not None and age[0] > self.STALE_LOCK_SECONDS:
                    self.command(with_identifiers(read(_SQL, "derive_unlock", "clickhouse"),
                                                  db=self.database))
                else:
                    time.sleep(0.05)
        try:
            yield
        finally:
            self.command(with_identifiers(read(_SQL, "derive_unlock", "clickhouse"),
                                          db=self.database))


class ChdbStore(ClickHouseEngine):
    """chDB: the ClickHouse engine in-process, on a folder (or in memory with no path)."""

    def __init__(self, path: str | None = None, database: str = "dupescope") -> None:
        from chdb import session

        self.path = path
        self.database = _identifier(database)
        self._session = session.Session(path) if path else session.Session()
        for statement in events_ddl(self.database):
            self._session.query(statement)
        self._session.query(f"USE {self.database}")
        self._upgrade()

    _deriving: threading.Lock | None = None

    @contextmanager
    def derivation_lock(self) -> Iterator[None]:
        """chDB lives in one process: a lock file beside its data, which the kernel gives
        back when the process dies, however it dies."""
        if self._deriving is None:
            self._deriving = threading.Lock()
        with self._deriving:
            if self.path is None:
                yield
                return
            lock = Path(self.path) / f"dupescope-derive-{self.database}.lock"
            with open(lock, "a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def write(self, table: pa.Table) -> int:
        if table.num_rows == 0:
            return 0
        batch = as_events(table)  # noqa: F841 - read by chDB's Python() by name
        self._session.query(f"INSERT INTO {self.database}.events SELECT * FROM Python(batch)"
                            f" SETTINGS {ANY_DAYS}")
        return int(table.num_rows)

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        text_params = {k: param_text(v) for k, v in (params or {}).items()}
        try:
            return self._session.query(sql, "ArrowTable", params=text_params)
        except Exception as exc:  # chDB raises its own error types
            raise StoreError(f"query failed on {self.describe()}: {exc}") from exc

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """Run a statement that returns no rows (derived tables, alert state)."""
        text_params = {k: param_text(v) for k, v in (params or {}).items()}
        try:
            self._session.query(sql, params=text_params)
        except Exception as exc:
            raise StoreError(f"statement failed on {self.describe()}: {exc}") from exc

    def describe(self) -> str:
        return f"chDB at {self.path}" if self.path else "chDB in memory"

    def close(self) -> None:
        self._session.close()


class ClickHouseStore(ClickHouseEngine):
    """A ClickHouse server (or cluster) through clickhouse-connect."""

    def __init__(
        self,
        *,
        host: str,
        port: int = 8123,
        username: str = "default",
        password: str = "",
        database: str = "default",
        secure: bool = False,
        cluster: str | None = None,
        ttl_days: int | None = None,
    ) -> None:
        import clickhouse_connect

        self.database = _identifier(database)
        self.cluster = cluster
        self.ttl_days = ttl_days
        try:
            self._client = clickhouse_connect.get_client(
                host=host, port=port, username=username, password=password, secure=secure
            )
            for statement in events_ddl(self.database, ttl_days=ttl_days, cluster=cluster):
                self._client.command(statement)
        except Exception as exc:
            raise StoreError(f"cannot open ClickHouse at {host}:{port}: {exc}") from exc
        self._client.database = self.database
        self._where = f"ClickHouse at {host}:{port}/{database}"
        self._upgrade()

    def write(self, table: pa.Table) -> int:
        if table.num_rows == 0:
            return 0
        self._client.insert_arrow("events", as_events(table), database=self.database,
                                  settings={"max_partitions_per_insert_block": 0})
        return int(table.num_rows)

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        try:
            return self._client.query_arrow(sql, parameters=params or {})
        except Exception as exc:
            raise StoreError(f"query failed on {self.describe()}: {exc}") from exc

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """Run a statement that returns no rows (derived tables, alert state)."""
        try:
            self._client.command(sql, parameters=params or {})
        except Exception as exc:
            raise StoreError(f"statement failed on {self.describe()}: {exc}") from exc

    def describe(self) -> str:
        return self._where

    def close(self) -> None:
        self._client.close()
