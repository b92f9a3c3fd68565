"""The id index (store/clickhouse.py ids_ddl) kept during a first read of the exporter's
tables by one fill per chunk instead of its view on every insert block.

The view groups each block of a bulk insert on its own and writes a part of the index per
block: at a first read's millions of rows that was a third of writing `events`. So a
first read drops the view, inserts each chunk into `events`, and fills the index from the
chunk's rows in one INSERT ... SELECT (by `ingested_at`, through its minmax index).

A pending mark, written before each bulk insert and cleared after its fill, keeps the
index complete when a read is killed between the two: the next refresh fills from the
earliest mark first, and opening the store makes the view again. A row indexed twice is
harmless: the index keeps each pair's first insert time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from store.clickhouse import ids_ddl
from store.sql_files import read, with_identifiers

_SQL = Path(__file__).parent / "sql"

Command = Callable[..., object]
Query = Callable[..., pa.Table]


def statement(name: str, own: str) -> str:
    return with_identifiers(read(_SQL, name, "clickhouse"), own=own)


def prepare(command: Command, own: str) -> None:
    """The pending marks' table (made with the store)."""
    command(statement("otel_ids_pending_create", own=own))


def catch_up(command: Command, query: Query, own: str) -> None:
    """Fill the index from the rows of a bulk insert a killed read left unindexed."""
    pending = query(statement("otel_ids_pending_count", own=own))
    if int(pending["n"][0].as_py()) > 0:
        fill(command, own)


def pause(command: Command, own: str) -> None:
    """The view off, for a read's bulk inserts."""
    command(statement("otel_ids_view_drop", own=own))


def mark(command: Command, own: str) -> None:
    """Before a bulk insert: the time from which its rows must reach the index."""
    command(statement("otel_ids_pending_mark", own=own))


def fill(command: Command, own: str) -> None:
    """The index filled from the rows since the earliest pending mark; marks cleared."""
    command(statement("otel_ids_fill", own=own))
    command(statement("otel_ids_pending_clear", own=own))


def resume(command: Command, own: str, **ddl: Any) -> None:
    """The view on again (every statement of ids_ddl is IF NOT EXISTS)."""
    for sql in ids_ddl(own, **ddl):
        command(sql)
