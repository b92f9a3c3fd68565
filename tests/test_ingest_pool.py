"""The ingest pool: which inputs start workers, how they start (forked from a fresh command,
or from a fork server), and how a file is cut into their blocks."""

from __future__ import annotations

import gzip
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from support.same_rows import same_rows

from collectors import files, ingest_pool
from collectors.arrow_batch import rows_to_table
from collectors.jsonlines import decode_lines
from collectors.normalise import Normaliser
from sample_data import log_shapes as shapes
from store.embedded import EmbeddedStore


def _sized(path: Path, size: int, head: bytes = b"{}") -> str:
    """A file of `size` bytes that takes no room on disk (a hole after `head`)."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return str(path)


def test_only_a_file_of_a_few_blocks_wants_workers(tmp_path: Path) -> None:
    block = ingest_pool.BLOCK_BYTES
    big = _sized(tmp_path / "big.jsonl", 2 * block + 1)
    small = _sized(tmp_path / "small.jsonl", 2 * block)
    packed = _sized(tmp_path / "big.jsonl.gz", 2 * block // 5 + 1, gzip.compress(b"{}"))
    assert ingest_pool.wanted([small, big])
    assert not ingest_pool.wanted([small, "-", str(tmp_path / "missing.jsonl")])
    assert ingest_pool.wanted([packed])  # a gzip file inflates to about five times its size
    assert ingest_pool.wanted([small], block_bytes=block // 2)


def test_an_unreadable_file_is_left_for_the_ingest_to_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = _sized(tmp_path / "big.jsonl", 2 * ingest_pool.BLOCK_BYTES + 1)

    def refused(*_: object, **__: object) -> None:
        raise PermissionError(13, "Permission denied", big)

    monkeypatch.setattr("builtins.open", refused)
    assert not ingest_pool.wanted([big])


def _modules_at_start() -> list[str]:
    return [name for name in ("polars", "collectors.blocks") if name in sys.modules]


@pytest.mark.skipif(sys.platform != "linux", reason="the fork server is a Linux start method")
def test_workers_from_the_fork_server_start_with_the_decoders_imported() -> None:
    """A worker forked from the server finds polars and the decoders already imported: a
    spawned one would import them for each pool."""
    context = ingest_pool.context()
    assert context.get_start_method() == "forkserver"
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        assert pool.submit(_modules_at_start).result() == ["polars", "collectors.blocks"]


# Run in a process of its own: only a process that has used no polars may fork its workers.
_FRESH_COMMAND = """
import multiprocessing, sys
from collectors import files, ingest_pool
from store.embedded import EmbeddedStore

started = []
context = ingest_pool.context
ingest_pool.context = lambda **how: started.append(how) or context(**how)
files.BLOCK_BYTES = 20_000
files._workers = lambda: 2
report = files.ingest_files([sys.argv[1]], EmbeddedStore(sys.argv[2]), fork_workers=True)
print(report.rows, len(report.rejected), started)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="fork is a POSIX start method")
def test_a_fresh_command_forks_its_workers_and_stores_the_line_paths_rows(
    tmp_path: Path,
) -> None:
    path = shapes.write("field_order", 1000, tmp_path / "lines.jsonl")
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_COMMAND, str(path), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["1000", "0", "[{'fork':", "True}]"]
    lines = path.read_bytes().split(b"\n")[:-1]
    decoded = decode_lines(list(enumerate(lines, start=1)), Normaliser(), str(path))
    want = rows_to_table(decoded.rows).sort_by("event_uid")
    stored = EmbeddedStore(tmp_path / "store").arrow("SELECT * FROM events ORDER BY event_uid")
    same_rows(stored.cast(want.schema), want)


@pytest.mark.parametrize("total", [1, 1000, 7 * 64 + 5, 13 * 64, 23 * 64 - 1])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_blocks_are_even_and_a_multiple_of_the_workers(total: int, workers: int) -> None:
    """No worker decodes a file's last block alone while the others wait."""
    size = files._even_block_bytes(total, 64, workers)
    count = -(-total // size)
    assert size <= 64
    assert count % workers == 0 or count < workers
    assert count * size - total < count  # every block within a byte of the others
