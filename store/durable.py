"""Files placed atomically and durably: what every writer of the embedded store needs.

A file is written under a temporary name, fsynced, renamed into place and its folder
fsynced, so a reader sees it whole or not at all, and a crash after the rename keeps it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def temporary_for(final: Path) -> Path:
    """Where `final` is written before `place` renames it."""
    return final.with_name(final.name + ".tmp")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def place(temporary: Path, final: Path) -> None:
    """Make the written `temporary` durable, then `final`, in one rename."""
    with open(temporary, "rb") as handle:
        os.fsync(handle.fileno())
    os.rename(temporary, final)
    fsync_dir(final.parent)


def write_parquet(table: pa.Table, final: Path, **options: Any) -> None:
    """`table` as the Parquet file `final` (pyarrow's write options), atomically."""
    temporary = temporary_for(final)
    pq.write_table(table, temporary, **options)
    place(temporary, final)
