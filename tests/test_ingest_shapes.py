"""Log shapes other programs write (`sample_data/log_shapes.py`) are read column-wise, and give
exactly the rows and rejections of the per-line path, block by block and through
`dupescope ingest`."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from support.same_rows import same_rows

from collectors import files
from collectors.arrow_batch import rows_to_table
from collectors.blocks import BlockDecoder
from collectors.jsonlines import decode_lines
from collectors.mapping import DEFAULT_MAPPING
from collectors.normalise import Normaliser
from dupescope.cli import main
from sample_data import log_shapes as shapes
from store.embedded import EmbeddedStore

LINES = 1500


def per_line(lines: list[bytes], source: str) -> tuple[pa.Table, list[str]]:
    decoded = decode_lines(list(enumerate(lines, start=1)), Normaliser(), source)
    return rows_to_table(decoded.rows), [str(r) for r in decoded.rejected]


def shape_lines(shape: str, count: int = LINES) -> list[bytes]:
    """The shape's lines as a file holds them (CRLF shapes keep their CR)."""
    end = shapes.SHAPES[shape][1]
    return [line + end[:-1] for line in shapes.lines(shape, count)]


@pytest.mark.parametrize("shape", list(shapes.SHAPES))
def test_a_shape_is_read_column_wise_as_the_line_path_reads_it(shape: str) -> None:
    lines = shape_lines(shape)
    want, want_rejected = per_line(lines, "shape")
    result = BlockDecoder(DEFAULT_MAPPING).decode(b"\n".join(lines) + b"\n", 1, "shape")
    same_rows(result.table, want)
    assert [str(r) for r in result.rejected] == want_rejected == []
    assert result.per_line <= len(lines) // 100  # the column-wise path reads nearly all


@pytest.mark.parametrize("shape", list(shapes.SHAPES))
def test_dupescope_ingest_stores_a_shapes_rows_as_the_line_path_builds_them(
    tmp_path: Path, monkeypatch, shape: str
) -> None:
    path = shapes.write(shape, 800, tmp_path / shapes.file_name(shape))
    monkeypatch.setattr(files, "BLOCK_BYTES", 60_000)  # several blocks
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["ingest", "--quiet", "--store", str(store), str(path)])
    assert result.exit_code == 0, result.output
    assert "800 events stored" in result.output
    text = gzip.decompress(path.read_bytes()) if shapes.SHAPES[shape][2] else path.read_bytes()
    want, _ = per_line(text.split(b"\n")[:-1], str(path))
    stored = EmbeddedStore(store).arrow("SELECT * FROM events ORDER BY event_uid")
    expected = want.sort_by("event_uid")
    same_rows(stored.cast(expected.schema), expected)


def test_all_shapes_in_one_file_ingest_in_worker_processes(tmp_path: Path, monkeypatch) -> None:
    lines = [line for shape in shapes.SHAPES for line in shape_lines(shape, 400)]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(files, "BLOCK_BYTES", 100_000)  # many blocks, so the pool starts
    monkeypatch.setattr(files, "_workers", lambda: 2)
    store = EmbeddedStore(tmp_path / "store")
    report = files.ingest_files([str(path)], store)
    want, _ = per_line(lines, str(path))
    assert report.rejected == [] and report.rows == want.num_rows == len(lines)
    stored = store.arrow("SELECT * FROM events ORDER BY event_uid")
    expected = want.sort_by("event_uid")
    same_rows(stored.cast(expected.schema), expected)


def test_a_gzip_file_is_inflated_here_and_decoded_in_worker_processes(
    tmp_path: Path, monkeypatch
) -> None:
    lines = shape_lines("gzip", 3000)
    path = tmp_path / "mixed.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    monkeypatch.setattr(files, "BLOCK_BYTES", 100_000)  # a few blocks, and the pool starts
    monkeypatch.setattr(files, "_workers", lambda: 2)
    started = []
    monkeypatch.setattr(files, "_inflated_in_workers", _spy(files._inflated_in_workers, started))
    store = EmbeddedStore(tmp_path / "store")
    report = files.ingest_files([str(path)], store)
    assert started == [str(path)]
    want, _ = per_line(lines, str(path))
    assert report.rejected == [] and report.rows == want.num_rows == len(lines)
    stored = store.arrow("SELECT * FROM events ORDER BY event_uid")
    expected = want.sort_by("event_uid")
    same_rows(stored.cast(expected.schema), expected)


def _spy(function, calls: list):  # type: ignore[no-untyped-def]
    def spied(pool, rows_spool, spool, path, *rest):  # type: ignore[no-untyped-def]
        calls.append(path)
        return function(pool, rows_spool, spool, path, *rest)

    return spied
