"""The ingest pool: which inputs start workers, and that workers start with their modules."""

from __future__ import annotations

import gzip
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from collectors import files, ingest_pool


def _sized(path: Path, size: int, head: bytes = b"{}") -> str:
    """A file of `size` bytes that takes no room on disk (a hole after `head`)."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return str(path)


def test_only_a_file_of_a_few_blocks_on_several_cores_wants_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_pool, "cores", lambda: 2)
    block = ingest_pool.BLOCK_BYTES
    big = _sized(tmp_path / "big.jsonl", 2 * block + 1)
    small = _sized(tmp_path / "small.jsonl", 2 * block)
    packed = _sized(tmp_path / "big.jsonl.gz", 2 * block // 5 + 1, gzip.compress(b"{}"))
    assert ingest_pool.wanted([small, big])
    assert not ingest_pool.wanted([small, "-", str(tmp_path / "missing.jsonl")])
    assert ingest_pool.wanted([packed])  # a gzip file inflates to about five times its size
    monkeypatch.setattr(ingest_pool, "cores", lambda: 1)
    assert not ingest_pool.wanted([big])


def _modules_at_start() -> list[str]:
    return [name for name in ("polars", "collectors.blocks", "pandas") if name in sys.modules]


@pytest.mark.skipif(sys.platform != "linux", reason="the fork server is a Linux start method")
def test_workers_start_with_the_decoders_imported() -> None:
    """A worker forked from the server finds polars, the decoders and pandas (which pyarrow
    imports on first use) already imported: a spawned one would import them for each pool."""
    ingest_pool.start_early()
    context = ingest_pool.context()
    assert context.get_start_method() == "forkserver"
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        assert pool.submit(_modules_at_start).result() == ["polars", "collectors.blocks", "pandas"]


@pytest.mark.parametrize("total", [1, 1000, 7 * 64 + 5, 13 * 64, 23 * 64 - 1])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_blocks_are_even_and_a_multiple_of_the_workers(total: int, workers: int) -> None:
    """No worker decodes a file's last block alone while the others wait."""
    size = files._even_block_bytes(total, 64, workers)
    count = -(-total // size)
    assert size <= 64
    assert count % workers == 0 or count < workers
    assert count * size - total < count  # every block within a byte of the others
