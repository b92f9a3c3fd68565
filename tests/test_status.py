"""`dupescope status` tells what the store holds and warns of a fragmented day."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from dupescope.cli import main
from store.embedded import EmbeddedStore
from store.schema import EVENTS_SCHEMA
from store.status import FRAGMENTED_AWAITING

DAY_START = 1_764_504_000_000_000  # 2025-11-30T12:00Z, µs


def _row(i: int) -> pa.Table:
    return pa.Table.from_pylist([{
        "ts": DAY_START + i, "event": "deliver", "job_id": f"j{i}", "job_type": "t",
        "event_uid": f"u{i}",
    }], schema=EVENTS_SCHEMA)


def _status(store: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(main, ["--memory", "512MB", "--store", str(store), "status",
                                       "--format", "json"])
    return result.exit_code, json.loads(result.output)


def test_status_warns_of_a_fragmented_day_until_it_is_compacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DUPESCOPE_MEMORY", raising=False)  # --memory sets it: restored after
    store = EmbeddedStore(tmp_path / "store")
    for i in range(FRAGMENTED_AWAITING + 1):
        store.write(_row(i))
    code, found = _status(store.root)
    assert code == 1
    assert found["events"] == FRAGMENTED_AWAITING + 1
    assert found["days"] == [{"day": "2025-11-30", "events": FRAGMENTED_AWAITING + 1,
                              "segments": FRAGMENTED_AWAITING + 1,
                              "awaiting_compaction": FRAGMENTED_AWAITING + 1}]
    assert found["memory_budget_bytes"] == 512 * 1024**2
    assert any("fragmented" in w for w in found["warnings"])
    store.compact()
    code, found = _status(store.root)
    assert found["days"][0]["segments"] == 1 and found["days"][0]["awaiting_compaction"] == 0
    assert not any("fragmented" in w for w in found["warnings"])
    assert found["disk_bytes"]["events"] > 0
