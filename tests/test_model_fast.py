"""Fast mode writes valid contract JSON lines and the same rows as Arrow batches."""

from __future__ import annotations

from pathlib import Path

import orjson

from sample_data import fast


def test_jsonl_has_exact_count_and_canonical_fields(tmp_path: Path) -> None:
    n = 45_000  # two whole copies of the base block and part of a third
    path = fast.write_jsonl(tmp_path / "e.jsonl", n, seed=7)
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert len(rows) == n
    assert all({"ts", "event"} <= r.keys() for r in rows)
    assert all(r["ts"].endswith("Z") and len(r["ts"]) == 27 for r in rows)
    assert all("job_id" in r for r in rows if r["event"] not in
               ("enqueue_deduped", "worker_start", "worker_stop"))
    job_ids = {r["job_id"] for r in rows if r["event"] == "enqueue"}
    assert len(job_ids) == sum(r["event"] == "enqueue" for r in rows)


def test_arrow_batches_match_jsonl(tmp_path: Path) -> None:
    n = 30_000
    path = fast.write_jsonl(tmp_path / "e.jsonl", n, seed=7)
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    batches = list(fast.arrow_batches(n, seed=7, batch_rows=8_000))
    assert [b.num_rows for b in batches] == [8_000, 8_000, 8_000, 6_000]
    assert batches[0].schema == fast.SCHEMA
    last = batches[-1].slice(5_999).to_pylist()[0]
    assert last["job_id"] == rows[-1].get("job_id")
    assert last["ts"].strftime("%Y-%m-%dT%H:%M:%S.%fZ") == rows[-1]["ts"]
