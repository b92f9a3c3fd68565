"""Merging more than the memory budget holds: sorted runs by key range, then one stream.

DuckDB spills a sort to disk, but not the window that drops repeated event_uids: a day of
10M events merged under 256 MB ran out of memory ("failed to pin block"). So a merge whose
rows would not fit is cut into runs by ranges of the sort key, each run small enough to
sort and deduplicate in memory, written to a Parquet file of its own; the runs, read in
key order, are then copied into the one compacted segment, a streaming copy that holds a
few row groups at a time. Repeats of an event carry the same idempotency key and job_id,
so each falls in one run and is dropped there. Key ranges come from a sample of the
rows, so a skewed day (one key with most rows) gets narrower ranges where its rows are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from store.hot_log import is_hot
from store.schema import EVENTS_SCHEMA

#: Sorting and deduplicating rows takes about this many times their uncompressed bytes.
WORKING_FACTOR = 3
#: Rows sampled per run to place the ranges' bounds.
SAMPLE_PER_RUN = 200
#: How many runs a merge may be cut into at most (a run per 4 MB of rows at 100 GB).
MAX_RUNS = 4096
#: Runs a merge is cut into when the memory it was estimated to fit in ran out.
FIRST_SPLIT = 4


@dataclass(frozen=True)
class Run:
    """One run's rows: a WHERE clause over (idempotency_key, job_id) and its parameters."""

    where: str
    params: dict[str, Any]
    #: The same rows as an Arrow filter, for rows DuckDB cannot hold (see `write_runs`).
    expression: pc.Expression


def uncompressed_bytes(paths: list[Path]) -> int:
    """What the segments' rows take in memory, about (Parquet's own count; a hot
    segment's file size, which is its Arrow layout)."""
    total = 0
    for path in paths:
        if is_hot(path):
            total += path.stat().st_size
            continue
        metadata = pq.read_metadata(path)
        total += sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    return total


def runs_needed(nbytes: int, memory_limit: str) -> int:
    """How many runs keep each one's sort within `memory_limit` (a DuckDB size: `256MB`)."""
    limit = duckdb_bytes(memory_limit)
    return min(MAX_RUNS, max(1, math.ceil(nbytes * WORKING_FACTOR / limit)))


def duckdb_bytes(size: str) -> int:
    """Bytes of a DuckDB size `NNNMB` / `NNNGB` (the only forms the store writes)."""
    number, unit = size[:-2], size[-2:].upper()
    return int(float(number) * {"KB": 1024, "MB": 1024**2, "GB": 1024**3}.get(unit, 1))


def ranges(con: duckdb.DuckDBPyConnection, source: str, params: dict[str, Any],
           runs: int) -> list[Run]:
    """About `runs` key ranges over the rows of `source` (a SELECT), in output order:
    idempotency keys ascending, then rows without one by job_id, then rows with neither."""
    sample = con.execute(
        f"SELECT idempotency_key, job_id FROM ({source}) "
        f"USING SAMPLE reservoir({runs * SAMPLE_PER_RUN} ROWS) REPEATABLE (7)",
        params,
    ).fetchall()
    keyed = sorted(k for k, _ in sample if k is not None)
    jobs = sorted(j for k, j in sample if k is None and j is not None)
    total = max(len(sample), 1)
    found = list(_ranged("idempotency_key", keyed, round(runs * len(keyed) / total)))
    no_key = pc.field("idempotency_key").is_null()
    found += [
        Run(f"idempotency_key IS NULL AND ({r.where})", r.params, no_key & r.expression)
        for r in _ranged("job_id", jobs, round(runs * len(jobs) / total))
    ]
    found.append(Run(
        "idempotency_key IS NULL AND job_id IS NULL", {}, no_key & pc.field("job_id").is_null()
    ))
    return found


def _ranged(column: str, values: list[str], runs: int) -> Iterator[Run]:
    """Ranges of `column` cut at quantiles of the sorted sample `values` (all non-null
    values of the column fall in one of them)."""
    step = len(values) / max(runs, 1)
    bounds = sorted({values[int(i * step)] for i in range(1, max(runs, 1))})
    lower: str | None = None
    for bound in [*bounds, None]:
        clauses, params = [f"{column} IS NOT NULL"], {}
        expression = pc.field(column).is_valid()
        if lower is not None:
            clauses.append(f"{column} >= $lo")
            params["lo"] = lower
            expression = expression & (pc.field(column) >= lower)
        if bound is not None:
            clauses.append(f"{column} < $hi")
            params["hi"] = bound
            expression = expression & (pc.field(column) < bound)
        yield Run(" AND ".join(clauses), params, expression)
        lower = bound


def write_runs(
    con: duckdb.DuckDBPyConnection,
    source: str,
    params: dict[str, Any],
    select: str,
    folder: Path,
    runs: list[Run],
    files: list[str],
    between: Callable[[], None] = lambda: None,
) -> list[Path]:
    """Each run's rows of `source` (the Parquet `files`), through `select` (a statement
    over `rows` that drops repeats and sorts), as a Parquet file in `folder`; the files in
    output order."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number, run in enumerate(runs):
        between()  # a compaction asked to stop stops here
        path = folder / f"run-{number:05d}.parquet"
        target = str(path).replace("'", "''")  # COPY's target cannot be a parameter
        rows = f"SELECT * FROM ({source}) WHERE {run.where}"
        try:
            con.execute(
                f"COPY (WITH rows AS ({rows}) {select}) "
                f"TO '{target}' (FORMAT parquet, COMPRESSION zstd)",
                {**params, **run.params},
            )
        except duckdb.OutOfMemoryException:
            # Rows too wide for DuckDB (megabytes of attributes each, which it cannot
            # spill): read and sorted in Arrow, which holds them once.
            import pyarrow.dataset as ds  # here: it loads pandas, which ingest never needs

            table = ds.dataset(files, schema=EVENTS_SCHEMA).to_table(filter=run.expression)
            pq.write_table(sorted_once(table), path, compression="zstd")
        written.append(path)
    return written


def sorted_once(table: pa.Table) -> pa.Table:
    """`table` without repeated event_uids (the earliest kept), sorted by
    (idempotency_key, job_id, ts) with nulls last: the merge's order, in Arrow."""
    if table.num_rows == 0:
        return table
    by_uid = table.sort_by([("event_uid", "ascending"), ("ts", "ascending")])
    uids = by_uid["event_uid"].combine_chunks()
    first = pc.not_equal(uids[1:], uids[:-1])
    keep = pa.concat_arrays([pa.array([True]), pc.fill_null(first, True)])
    return by_uid.filter(keep).sort_by([
        ("idempotency_key", "ascending", "at_end"), ("job_id", "ascending", "at_end"),
        ("ts", "ascending", "at_end"),
    ])


def concatenate(runs: list[Path], target: Path, metadata: dict[str, str], row_group: int,
                row_group_bytes: int) -> None:
    """The runs, in order, as one Parquet file `target` with `metadata`: a row group at a
    time, in row groups of at most `row_group` rows and about `row_group_bytes` bytes."""
    schema = EVENTS_SCHEMA.with_metadata(metadata)
    with pq.ParquetWriter(target, schema, compression="zstd", write_page_index=True,
                          store_schema=False) as writer:
        for run in runs:
            handle = pq.ParquetFile(run)
            for group in range(handle.num_row_groups):
                table = handle.read_row_group(group).cast(EVENTS_SCHEMA)
                width = max(table.nbytes // max(table.num_rows, 1), 1)
                rows = max(1, min(row_group, row_group_bytes // width))
                writer.write_table(table.replace_schema_metadata(metadata), row_group_size=rows)
