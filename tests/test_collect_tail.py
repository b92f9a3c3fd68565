"""`--tail`: appended lines are picked up, a rotated file is finished and followed, and a
restart resumes from the durable offset without reading anything twice."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
from collect_support import raw_count, running

from store.embedded import EmbeddedStore


def _lines(prefix: str, count: int) -> bytes:
    return b"".join(
        orjson.dumps({"ts": 1_760_000_000 + i, "event": "enqueue", "job_id": f"{prefix}-{i}",
                      "job_type": "send_mail"}) + b"\n"
        for i in range(count)
    )


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def _wait_for(store: EmbeddedStore, rows: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if raw_count(store) >= rows:
            return
        time.sleep(0.1)
    raise AssertionError(f"expected {rows} rows, have {raw_count(store)}")


def test_tail_follows_appends_rotation_and_restarts(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    state = tmp_path / "tail-state.json"
    store = EmbeddedStore(tmp_path / "store")
    log.write_bytes(_lines("a", 5))
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        _wait_for(store, 5)
        _append(log, _lines("b", 3) + b'{"partial": ')  # an unfinished line waits
        _wait_for(store, 8)
        _append(log, b'"line", "ts": 1760000000, "event": "ack", "job_id": "p"}\n')
        _wait_for(store, 9)
        # Rotation: more lines land in the old file after its rename, then a new file starts.
        os.rename(log, tmp_path / "app.log.1")
        _append(tmp_path / "app.log.1", _lines("c", 4))
        log.write_bytes(_lines("d", 2))
        _wait_for(store, 15)
        first_run = c.collector.health()
    assert first_run["received"] == 15 and first_run["rejected"] == 0

    _append(log, _lines("e", 6))  # written while the collector is down
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        _wait_for(store, 21)
        time.sleep(0.6)  # a few more polls: nothing may be read again
        second_run = c.collector.health()
    assert second_run["received"] == 6
    assert raw_count(store) == 21
    job_ids = store.execute("SELECT count(DISTINCT job_id) AS n FROM events")["n"][0]
    assert job_ids == 21


def test_tail_state_defaults_to_the_store_folder(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(_lines("a", 2))
    store = EmbeddedStore(tmp_path / "store")
    with running(store, tail=[str(log)], http_port=None, grpc_port=None):
        _wait_for(store, 2)
    saved = orjson.loads((tmp_path / "store" / "tail-state.json").read_bytes())
    assert saved[str(log)]["offset"] == log.stat().st_size
