"""The derived tables' kept form on ClickHouse and chDB: rows versioned by unit.

Every derived table is made of units (a key's executions, a job, an execution's lock
incidents; derive/catalogue.py names them). On ClickHouse each is kept as
`<table>_rows`, a ReplacingMergeTree ordered by (unit, row number in the unit) with a row
version and a deleted flag: deriving a unit again writes its rows under a newer version,
and a tombstone for each row number it no longer fills. `FINAL` then gives the newest
version of every row, without the tombstones, and the table's usual name is a view that
reads just that. Nothing is ever rewritten in place, so a write is as large as the units
it derives, and a process killed halfway leaves rows the next derivation overwrites.

`derived_status` records where the tables stand (what rows they have read), and
`derived_answers` at which generation each kept answer was computed. On a cluster every
table here is replicated to every node (one shard: the derived tables are small beside
`events`) and made ON CLUSTER.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from store.clickhouse import LOOKUP_GRANULARITY, ClickHouseEngine
from store.sql_files import read, with_identifiers

_SQL = Path(__file__).parents[1] / "sql"

#: The layout of what this module keeps; another one is rebuilt from nothing, but for
#: those in UPGRADABLE.
FORMAT = 3
#: Earlier layouts brought to FORMAT in place: 1 lacked the lookup projections, 1 and 2
#: kept the duplicates answer whole (computed again each generation) instead of by key.
UPGRADABLE = frozenset({1, 2})


#: Columns a kept row carries besides its table's own.
VERSION_COLUMNS = ("_row", "_version", "_deleted")


def sql(name: str, **identifiers: str) -> str:
    """A statement of derive/sql/clickhouse with its identifiers put in."""
    return with_identifiers(read(_SQL, name, "clickhouse"), **identifiers)


@dataclass(frozen=True)
class Status:
    """Where the derived tables stand.

    `high` is the newest `ingested_at` they have read, `recent` a checksum (count and
    hash sum of event_uids) of the rows inserted in the window before it (a row that
    became visible late, inserted before `high`, changes it), `partitions` the days
    `events` held (one gone: retention).
    `generation` counts derivations since `epoch` (a build from nothing); `version` is
    the row version of the last one."""

    format: int
    epoch: str
    generation: int
    version: int
    high: str
    recent: str
    partitions: tuple[str, ...]


def engine(store: ClickHouseEngine, arguments: str = "") -> str:
    """`ReplacingMergeTree(arguments)`, replicated to every node on a cluster (a path
    of the table's own UUID: a table built aside and exchanged keeps its replicas)."""
    if store.cluster is None:
        return f"ReplacingMergeTree({arguments})"
    path = "'/clickhouse/tables/{uuid}', '{replica}'"
    return f"ReplicatedReplacingMergeTree({path}{', ' + arguments if arguments else ''})"


def on_cluster(store: ClickHouseEngine) -> str:
    cluster = store.cluster
    return f" ON CLUSTER {cluster}" if cluster else ""


def create_bookkeeping(store: ClickHouseEngine) -> None:
    """The status and answer stamp tables, if they are not there."""
    db, where = store.database, on_cluster(store)
    store.command(
        f"CREATE TABLE IF NOT EXISTS {db}.derived_status{where} (format UInt32, epoch String,"
        " generation UInt64, version UInt64, high String, recent String,"
        f" partitions Array(String)) ENGINE = {engine(store, 'version')}"
        " ORDER BY tuple()")
    store.command(
        f"CREATE TABLE IF NOT EXISTS {db}.derived_answers{where} (name String, epoch String,"
        " generation UInt64, version UInt64)"
        f" ENGINE = {engine(store, 'version')} ORDER BY name")


def status(store: ClickHouseEngine) -> Status | None:
    """The recorded status, or None where nothing was derived yet."""
    create_bookkeeping(store)
    rows = store.arrow(sql("derived_status", db=store.database)).to_pylist()
    if not rows:
        return None
    row = rows[0]
    return Status(int(row["format"]), row["epoch"], int(row["generation"]),
                  int(row["version"]), row["high"], row["recent"],
                  tuple(row["partitions"]))


def set_status(store: ClickHouseEngine, new: Status) -> None:
    store.command(sql("derived_status_set", db=store.database),
                  {"format": new.format, "epoch": new.epoch, "generation": new.generation,
                   "version": new.version, "high": new.high,
                   "recent": new.recent, "partitions": list(new.partitions)})


def now_us(store: ClickHouseEngine) -> int:
    """The server's clock: row versions order writes made by any process."""
    return int(store.arrow(sql("server_version_us"))["now_us"][0].as_py())


def partitions(store: ClickHouseEngine) -> tuple[str, ...]:
    table = "events_local" if store.cluster else "events"
    found = store.arrow(sql("events_partitions"),
                        {"database": store.database, "table": table})["partitions"]
    return tuple(sorted(found[0].as_py() or []))


def columns(store: ClickHouseEngine, table: str) -> list[tuple[str, str]]:
    """(name, type) of a table of the store's database, in order."""
    rows = store.arrow(sql("relation_columns"),
                       {"database": store.database, "table": table}).to_pylist()
    return [(r["name"], r["type"]) for r in rows]


def rows_table(table: str) -> str:
    return f"{table}_rows"


def create_rows_table(store: ClickHouseEngine, name: str, shape: list[tuple[str, str]],
                      unit: str, lookup: str | None = None) -> None:
    """`name`: kept rows of the columns `shape`, by `unit` (replacing any table there).

    `lookup` names a column the units are also found by: a projection keeps its values
    sorted with their unit, so a read of a few of them finds their units without a scan
    of every row (merges rebuild it, as rows are replaced)."""
    db, where = store.database, on_cluster(store)
    listed = ",\n  ".join(f"`{column}` {kind}" for column, kind in shape)
    projection = settings = ""
    if lookup is not None:
        projection = f",\n  PROJECTION {_projection(unit, lookup)}"
        settings = f", {_REBUILD_PROJECTIONS}"
    store.command(f"DROP TABLE IF EXISTS {db}.{name}{where} SYNC")
    store.command(
        f"CREATE TABLE {db}.{name}{where} (\n  {listed},\n  _row UInt32,\n"
        "  _version UInt64,\n  _deleted UInt8,\n"
        f"  INDEX version_minmax _version TYPE minmax GRANULARITY 1{projection}\n)\n"
        f"ENGINE = {engine(store, '_version, _deleted')}\n"
        f"ORDER BY (`{unit}`, _row)\nSETTINGS allow_nullable_key = 1, "
        f"index_granularity = {LOOKUP_GRANULARITY}{settings}")


#: A ReplacingMergeTree keeps a projection only if its merges rebuild it.
_REBUILD_PROJECTIONS = "deduplicate_merge_projection_mode = 'rebuild'"


def _projection(unit: str, lookup: str) -> str:
    """The projection's name and query: each `lookup` value with its unit, sorted."""
    return f"by_{lookup} (SELECT `{lookup}`, `{unit}` ORDER BY `{lookup}`)"


def add_lookup(store: ClickHouseEngine, name: str, unit: str, lookup: str) -> None:
    """The `lookup` projection of `create_rows_table`, added to a table made without it
    and filled from the rows there (a few seconds for 16M kept executions)."""
    db, where = store.database, on_cluster(store)
    store.command(f"ALTER TABLE {db}.{name}{where} MODIFY SETTING {_REBUILD_PROJECTIONS}")
    store.command(f"ALTER TABLE {db}.{name}{where} "
                  f"ADD PROJECTION IF NOT EXISTS {_projection(unit, lookup)}")
    store.command(f"ALTER TABLE {db}.{name}{where} MATERIALIZE PROJECTION by_{lookup} "
                  "SETTINGS mutations_sync = 2")


def replace_table(store: ClickHouseEngine, name: str, built: str) -> None:
    """Put the table `built` in the place of `name` (one atomic exchange where `name`
    exists), then drop what was there."""
    db, where = store.database, on_cluster(store)
    exists = store.arrow(sql("relation_columns"), {"database": db, "table": name})
    if exists.num_rows:
        store.command(f"EXCHANGE TABLES {db}.{built} AND {db}.{name}{where}")
        store.command(f"DROP TABLE IF EXISTS {db}.{built}{where} SYNC")
    else:
        store.command(f"RENAME TABLE {db}.{built} TO {db}.{name}{where}")


def create_view(store: ClickHouseEngine, table: str, numbered: str | None = None) -> None:
    """`table` as its readers know it: the newest version of each row, no tombstone
    (`numbered`: a kept answer's rows, numbered as `answer_row` in that order)."""
    db, where = store.database, on_cluster(store)
    hidden = ", ".join(VERSION_COLUMNS)
    number = "" if numbered is None else (
        f"toUInt64(row_number() OVER (ORDER BY {numbered})) AS answer_row, ")
    store.command(f"CREATE OR REPLACE VIEW {db}.{table}{where} AS SELECT {number}"
                  f"* EXCEPT ({hidden}) FROM {db}.{rows_table(table)} FINAL WHERE _deleted = 0")


def drop_table(store: ClickHouseEngine, name: str) -> None:
    """Drop table `name` if there is one (a kept answer of an earlier layout, where this
    one keeps a view)."""
    db, where = store.database, on_cluster(store)
    store.command(f"DROP TABLE IF EXISTS {db}.{name}{where} SYNC")


def answer_stamps(store: ClickHouseEngine) -> dict[str, tuple[str, int]]:
    """Kept answer -> (epoch, generation) it was computed at."""
    create_bookkeeping(store)
    rows = store.arrow(sql("derived_answers", db=store.database)).to_pylist()
    return {r["name"]: (r["epoch"], int(r["generation"])) for r in rows}


def stamp_answer(store: ClickHouseEngine, name: str, epoch: str, generation: int) -> None:
    store.command(sql("derived_answer_set", db=store.database),
                  {"name": name, "epoch": epoch, "generation": generation})


def lag_seconds(store: ClickHouseEngine) -> float | None:
    """How long the oldest row the derived tables have not read has waited: 0 when they
    hold everything, None before anything was derived (the collector's /metrics)."""
    current = status(store)
    if current is None:
        return None
    found = store.arrow(sql("derivation_lag", db=store.database), {"high": current.high})
    return max(float(found["lag"][0].as_py()), 0.0)
