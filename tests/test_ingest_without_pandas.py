"""`dupescope ingest` into the embedded store loads no pandas, in its own process or in its
workers, while it loads: pandas costs 0.2-0.3 s to import, paid before the first block is
read. (The compaction after the load builds the day's key index with Arrow's Acero, which
loads it; `--no-compact` leaves that out.)

Each check runs in a fresh interpreter, where nothing else has imported pandas yet.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

# Lines that take every path of a block: epochs and RFC 3339 times (with an offset) in one
# column, rows on two UTC days (a segment each), a line read on its own (the `\u0022`
# escape), a value only the line-by-line normaliser reads, and a line that is no JSON.
LINES = [
    '{"ts":"2025-11-30T23:59:59Z","event":"enqueue","job_id":"j1","idempotency_key":"k1"}',
    '{"ts":1764547200,"event":"deliver","job_id":"j1","idempotency_key":"k1",'
    '"delivery_attempt":1}',
    '{"ts":"2025-12-01T00:00:01.5+01:00","event":"ack","job_id":"j1","delivery_attempt":"2"}',
    '{"ts":"2025-12-01T00:00:03Z","event":"ack","job_id":"j\\u0022q"}',
    "not json",
]


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_a_worker_decodes_and_writes_a_block_without_pandas(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    log.write_text("\n".join(LINES) + "\n")
    found = _run(
        f"""
        import json, sys
        from pathlib import Path
        from collectors import files
        from collectors.normalise import Normaliser
        from store.segments import SegmentWriter

        files._start_worker(
            files.lines_decoder(views=True),
            Normaliser().mapping,
            SegmentWriter(Path({str(tmp_path / "events")!r})),
        )
        spooled = files._decode_in_worker({str(log)!r}, 0, {log.stat().st_size}, "log", None)
        print(json.dumps({{
            "stored": spooled.stored,
            "rejected": len(spooled.result.rejected),
            "pandas": "pandas" in sys.modules,
        }}))
        """
    )
    assert found == {"stored": 4, "rejected": 1, "pandas": False}
    assert sorted(p.name for p in (tmp_path / "events").glob("day=*")) == [
        "day=2025-11-30",
        "day=2025-12-01",
    ]


def test_the_ingest_command_loads_no_pandas(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    log.write_text("\n".join(LINES) + "\n")
    found = _run(
        f"""
        import json, sys
        from click.testing import CliRunner
        from dupescope.cli import main

        done = CliRunner().invoke(
            main, ["ingest", "--quiet", "--no-compact", "--store", {str(tmp_path / "store")!r},
                   {str(log)!r}]
        )
        print(json.dumps({{"exit": done.exit_code, "pandas": "pandas" in sys.modules}}))
        """
    )
    # Exit 0: rows were stored; the line that is no JSON is reported, not fatal.
    assert found == {"exit": 0, "pandas": False}
