"""`--tail`: appended lines are picked up, a rotated file is finished and followed, and a
restart resumes from the durable offset without reading anything twice."""

from __future__ import annotations

import logging
import os
import time
import tracemalloc
from pathlib import Path

import orjson
import pytest
from collect_support import append, raw_count, running, wait_for_rows

from collectors.service import tail
from collectors.service.tail import Tailer
from store.embedded import EmbeddedStore


def _lines(prefix: str, count: int) -> bytes:
    return b"".join(
        orjson.dumps({"ts": 1_760_000_000 + i, "event": "enqueue", "job_id": f"{prefix}-{i}",
                      "job_type": "send_mail"}) + b"\n"
        for i in range(count)
    )


def test_tail_follows_appends_rotation_and_restarts(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    state = tmp_path / "tail-state.json"
    store = EmbeddedStore(tmp_path / "store")
    log.write_bytes(_lines("a", 5))
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        wait_for_rows(store, 5)
        append(log, _lines("b", 3) + b'{"partial": ')  # an unfinished line waits
        wait_for_rows(store, 8)
        append(log, b'"line", "ts": 1760000000, "event": "ack", "job_id": "p"}\n')
        wait_for_rows(store, 9)
        # Rotation: more lines land in the old file after its rename, then a new file starts.
        os.rename(log, tmp_path / "app.log.1")
        append(tmp_path / "app.log.1", _lines("c", 4))
        log.write_bytes(_lines("d", 2))
        wait_for_rows(store, 15)
        first_run = c.collector.health()
    assert first_run["received"] == 15 and first_run["rejected"] == 0

    append(log, _lines("e", 6))  # written while the collector is down
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        wait_for_rows(store, 21)
        time.sleep(0.6)  # a few more polls: nothing may be read again
        second_run = c.collector.health()
    assert second_run["received"] == 6
    assert raw_count(store) == 21
    job_ids = store.execute("SELECT count(DISTINCT job_id) AS n FROM events")["n"][0]
    assert job_ids == 21


def test_a_pattern_follows_files_that_appear_later(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "mail.jsonl").write_bytes(_lines("mail", 3))
    (logs / "notes.txt").write_bytes(b"not a match\n")
    store = EmbeddedStore(tmp_path / "store")
    pattern = str(logs / "*.jsonl")
    with running(store, tail=[pattern], state=tmp_path / "state.json", http_port=None,
                 grpc_port=None) as collector:
        wait_for_rows(store, 3)
        (logs / "billing.jsonl").write_bytes(_lines("billing", 4))
        wait_for_rows(store, 7)
        append(logs / "mail.jsonl", _lines("late", 2))
        wait_for_rows(store, 9)
        health = collector.collector.health()
    assert health["received"] == 9 and health["rejected"] == 0


def test_a_pattern_matches_files_not_folders_nor_names_given_already(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"")
    (tmp_path / "b.log").write_bytes(b"")
    (tmp_path / "c.log").mkdir()
    given = [str(tmp_path / "b.log"), str(tmp_path / "*.log")]
    with running(EmbeddedStore(tmp_path / "store"), http_port=None, grpc_port=None) as c:
        tailer = Tailer(c.collector, given, tmp_path / "state.json")
        assert tailer.current_paths() == [str(tmp_path / "b.log"), str(tmp_path / "a.log")]


def test_a_file_whose_name_has_brackets_is_followed_by_that_name(tmp_path: Path) -> None:
    log = tmp_path / "app[1].log"
    log.write_bytes(_lines("a", 3))
    store = EmbeddedStore(tmp_path / "store")
    with running(store, tail=[str(log)], state=tmp_path / "state.json", http_port=None,
                 grpc_port=None):
        wait_for_rows(store, 3)


def test_a_relative_pattern_is_read_in_a_folder_with_brackets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "proj[old]"
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "a.jsonl").write_bytes(b"")
    monkeypatch.chdir(folder)
    with running(EmbeddedStore(tmp_path / "store"), http_port=None, grpc_port=None) as c:
        tailer = Tailer(c.collector, ["logs/*.jsonl"], tmp_path / "state.json")
        assert tailer.current_paths() == [str(folder / "logs" / "a.jsonl")]


def test_a_rotated_file_a_pattern_also_matches_adds_no_row_twice(tmp_path: Path) -> None:
    """It is read again from its start (an inode is no proof of identity); its lines are
    repeats, dropped as such."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_bytes(_lines("a", 3))
    store = EmbeddedStore(tmp_path / "store")
    with running(store, tail=[str(logs / "app.log*")], state=tmp_path / "state.json",
                 http_port=None, grpc_port=None) as collector:
        wait_for_rows(store, 3)
        os.rename(logs / "app.log", logs / "app.log.1")
        append(logs / "app.log.1", _lines("b", 2))
        (logs / "app.log").write_bytes(_lines("c", 4))
        wait_for_rows(store, 9)
        time.sleep(0.6)  # a few more polls
        health = collector.collector.health()
    assert raw_count(store) == 9
    assert health["written"] == 9 and health["received"] - health["deduplicated"] == 9


def test_a_file_named_like_a_pattern_is_followed_once_it_appears(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    literal = tmp_path / "app[1].log"
    with running(store, tail=[str(literal)], state=tmp_path / "state.json", http_port=None,
                 grpc_port=None):
        literal.write_bytes(_lines("late", 2))
        wait_for_rows(store, 2)


def test_an_unreadable_file_is_logged_once_not_every_poll(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="dupescope.collect")
    folder = tmp_path / "logs.log"
    folder.mkdir()  # named like a log: reading it fails at every poll
    with running(EmbeddedStore(tmp_path / "store"), tail=[str(folder)],
                 state=tmp_path / "state.json", http_port=None, grpc_port=None):
        time.sleep(0.8)  # three polls and more
    failed = [r for r in caplog.records if r.getMessage() == f"tail {folder} failed"]
    assert len(failed) == 1


def test_tail_state_defaults_to_the_store_folder(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(_lines("a", 2))
    store = EmbeddedStore(tmp_path / "store")
    with running(store, tail=[str(log)], http_port=None, grpc_port=None):
        wait_for_rows(store, 2)
    saved = orjson.loads((tmp_path / "store" / "tail-state.json").read_bytes())
    assert saved[str(log)]["offset"] == log.stat().st_size


def test_collect_command_reports_a_port_in_use(tmp_path: Path) -> None:
    import socket

    from click.testing import CliRunner

    from dupescope.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, [
            "collect", "--store", str(tmp_path / "store"), "--http-port", str(port),
            "--grpc-port", "-1",
        ])
    assert result.exit_code == 1
    assert "cannot start the collector" in result.output


def _tailed_pattern(tmp_path: Path, collector) -> Tailer:
    """A tailer of `logs/*.jsonl` that has read `a.jsonl` and `b.jsonl`."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("a", "b"):
        (logs / f"{name}.jsonl").write_bytes(_lines(name, 2))
    tailer = Tailer(collector, [str(logs / "*.jsonl")], tmp_path / "state.json")
    tailer.cycle()
    assert sorted(Path(p).name for p in tailer.state.positions) == ["a.jsonl", "b.jsonl"]
    return tailer


def test_the_position_of_a_deleted_file_is_dropped(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), http_port=None, grpc_port=None) as c:
        tailer = _tailed_pattern(tmp_path, c.collector)
        (tmp_path / "logs" / "a.jsonl").unlink()
        assert tailer.prune(tailer.current_paths()) == [str(tmp_path / "logs" / "a.jsonl")]
    saved = orjson.loads((tmp_path / "state.json").read_bytes())
    assert list(saved) == [str(tmp_path / "logs" / "b.jsonl")]


def test_the_position_of_a_rotated_file_is_kept_until_it_is_read(tmp_path: Path) -> None:
    with running(EmbeddedStore(tmp_path / "store"), http_port=None, grpc_port=None) as c:
        tailer = _tailed_pattern(tmp_path, c.collector)
        (tmp_path / "logs" / "a.jsonl").rename(tmp_path / "logs" / "a.jsonl.1")
        assert tailer.prune(tailer.current_paths()) == []
    assert str(tmp_path / "logs" / "a.jsonl") in tailer.state.positions


def test_polling_drops_gone_positions_now_and_then(tmp_path: Path, monkeypatch) -> None:
    with running(EmbeddedStore(tmp_path / "store"), http_port=None, grpc_port=None) as c:
        tailer = _tailed_pattern(tmp_path, c.collector)
        (tmp_path / "logs" / "a.jsonl").unlink()
        tailer.cycle()
        assert len(tailer.state.positions) == 2  # not looked for yet
        monkeypatch.setattr(tail, "PRUNE_EVERY", 0.0)
        tailer.cycle()
    assert list(tailer.state.positions) == [str(tmp_path / "logs" / "b.jsonl")]


def test_a_line_longer_than_a_read_is_skipped_and_counted_and_the_rest_kept(
    tmp_path: Path,
) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(_lines("a", 1) + b'{"note": "' + b"x" * 1000 + b'"}\n' + _lines("b", 2))
    store = EmbeddedStore(tmp_path / "store")
    with running(store, http_port=None, grpc_port=None) as c:
        tailer = Tailer(c.collector, [str(log)], tmp_path / "state.json", read_chunk=256)
        assert tailer.poll(str(log)) == 3
        assert c.collector.health()["rejected"] == 1
    assert tailer.state.positions[str(log)].offset == log.stat().st_size


def test_a_long_line_still_being_written_is_looked_at_in_bounded_memory(
    tmp_path: Path,
) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"x" * (16 << 20))  # no newline yet
    store = EmbeddedStore(tmp_path / "store")
    with running(store, http_port=None, grpc_port=None) as c:
        tailer = Tailer(c.collector, [str(log)], tmp_path / "state.json", read_chunk=256 << 10)
        tracemalloc.start()
        try:
            assert tailer.poll(str(log)) == 0
            assert tailer.poll(str(log)) == 0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2 << 20  # a few chunks of 256 KB, not the 16 MB line
        append(log, b"\n" + _lines("a", 1))
        assert tailer.poll(str(log)) == 1
        assert c.collector.health()["rejected"] == 1


def test_a_file_rewritten_in_place_past_the_old_offset_is_read_from_its_start(
    tmp_path: Path,
) -> None:
    log = tmp_path / "app.log"
    state = tmp_path / "state.json"
    log.write_bytes(_lines("a", 3))
    store = EmbeddedStore(tmp_path / "store")
    with running(store, http_port=None, grpc_port=None) as c:
        assert Tailer(c.collector, [str(log)], state).poll(str(log)) == 3
    inode = log.stat().st_ino
    log.write_bytes(_lines("new", 8))  # emptied and written again while the tail was down
    assert log.stat().st_ino == inode
    with running(store, http_port=None, grpc_port=None) as c:
        assert Tailer(c.collector, [str(log)], state).poll(str(log)) == 8
    assert raw_count(store) == 11


def test_a_file_found_by_the_old_inode_but_starting_otherwise_is_not_read(
    tmp_path: Path,
) -> None:
    log, other = tmp_path / "app.log", tmp_path / "other.log"
    log.write_bytes(_lines("a", 2))
    other.write_bytes(_lines("o", 5))
    head = b"what app.log began with"
    state = tmp_path / "state.json"
    state.write_bytes(orjson.dumps({str(log): {
        "inode": other.stat().st_ino, "offset": 40,
        "head": tail.fingerprint(head), "head_len": len(head),
    }}))  # app.log was rotated away and deleted, and its inode number given to other.log
    store = EmbeddedStore(tmp_path / "store")
    with running(store, http_port=None, grpc_port=None) as c:
        assert Tailer(c.collector, [str(log)], state).poll(str(log)) == 2
