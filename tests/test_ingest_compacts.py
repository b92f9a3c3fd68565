"""`dupescope ingest` leaves a compacted store: the next reader needs no `compact`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dupescope.cli import main
from store.embedded import MERGE_FANOUT, EmbeddedStore


def _log(path: Path, day: int, keys: range) -> Path:
    """Two deliveries of each key on day `day` of December 2025 (each a duplicate)."""
    rows = [
        {"ts": f"2025-12-{day:02d}T10:00:{i % 60:02d}.{attempt}Z", "event": event,
         "job_id": f"j{k}", "job_type": "t", "idempotency_key": f"k{k}", "worker_id": "w",
         "delivery_attempt": attempt}
        for k in keys for i, attempt in ((k, 1), (k, 2)) for event in ("deliver", "ack")
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_ingest_then_timeline_and_duplicates_read_a_compacted_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    files = [str(_log(tmp_path / f"{n}.jsonl", 1, range(n * 10, n * 10 + 10)))
             for n in range(9)]
    runner = CliRunner()
    for name in files:  # one load after another, as a user would
        assert runner.invoke(main, ["--store", str(store), "ingest", "-q", name]).exit_code == 0
    segments = EmbeddedStore(store).segments()
    # Merged by size tier: fewer than MERGE_FANOUT a tier, however many loads came.
    assert len(segments) < MERGE_FANOUT
    assert {p.suffix for p in segments} == {".parquet"}
    shown = runner.invoke(main, ["--store", str(store), "timeline", "k42", "--format", "json"])
    assert shown.exit_code == 0 and len(json.loads(shown.output)) == 4
    listed = runner.invoke(main, ["--store", str(store), "duplicates", "--format", "json"])
    assert listed.exit_code == 0 and len(json.loads(listed.output)) == 90
