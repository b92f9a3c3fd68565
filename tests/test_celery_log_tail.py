"""`collect --tail` on a Celery worker's log: told from content, read as it grows (a run's
lines in separate polls still meet), and read again after a restart without a repeat."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
from collect_support import append, raw_count, running, wait_for_rows
from support.celery_log_lines import BANNER, BROKEN, CRASH, FLAKY

from collectors.files import ingest_files
from queries import duplicates
from store.embedded import EmbeddedStore


def _distinct_events(store: EmbeddedStore) -> int:
    return int(store.execute("SELECT count(DISTINCT event_uid) AS n FROM events")["n"][0])


def test_a_growing_celery_log_is_followed_and_its_duplicates_found(tmp_path: Path) -> None:
    log, state = tmp_path / "worker.log", tmp_path / "tail-state.json"
    store = EmbeddedStore(tmp_path / "store")
    crash = CRASH.splitlines(keepends=True)
    log.write_bytes(BANNER)
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        time.sleep(0.6)  # the banner alone: nothing to store
        append(log, b"".join(crash[:2]))  # received, the next poll reads the rest
        wait_for_rows(store, 2)
        append(log, b"".join(crash[2:]))
        wait_for_rows(store, 6)
        health = c.collector.health()
    assert health["rejected"] == 0 and health["received"] == 6
    found = duplicates(store)
    assert dict(zip(found["key"], found["cause"], strict=True)) == {
        "8dc57862-bcda-4bc8-be09-1953ad01680a": "worker_crash"
    }


def test_a_traceback_split_between_polls_adds_no_record(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    store = EmbeddedStore(tmp_path / "store")
    head, tail = BROKEN[: BROKEN.index(b"  File")], BROKEN[BROKEN.index(b"  File") :]
    log.write_bytes(BANNER + head)
    with running(store, tail=[str(log)], state=tmp_path / "state.json", http_port=None,
                 grpc_port=None) as c:
        wait_for_rows(store, 2)
        append(log, tail)
        time.sleep(0.6)  # a few more polls
        health = c.collector.health()
    assert raw_count(store) == 2 and health["rejected"] == 0


def _tail_with_a_restart(tmp_path: Path, store: EmbeddedStore) -> Path:
    """FLAKY's first line read, the collector stopped, the rest written, then read."""
    log, state = tmp_path / "worker.log", tmp_path / "tail-state.json"
    log.write_bytes(BANNER + FLAKY[: FLAKY.index(b"\n") + 1])
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None):
        wait_for_rows(store, 1)
    append(log, FLAKY[FLAKY.index(b"\n") + 1 :])  # written while the collector is down
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        wait_for_rows(store, 4)
        time.sleep(0.6)
        assert c.collector.health()["received"] == 3
    return log


def test_a_restarted_tail_knows_the_worker_and_the_runs_it_had_read(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    _tail_with_a_restart(tmp_path, store)
    rows = store.execute("SELECT event, worker_id, execution_id FROM events ORDER BY ts")
    assert set(rows["worker_id"]) == {"dupescope-test@vm"}  # named in the banner, read before
    assert rows["execution_id"][1] == rows["execution_id"][0]  # the retry ends the first run


def test_a_restart_and_an_ingest_of_the_same_log_count_nothing_twice(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "store")
    log = _tail_with_a_restart(tmp_path, store)
    ingest_files([str(log)], store)
    assert _distinct_events(store) == 4
    found = duplicates(store)
    assert list(found["cause"]) == ["retry_after_failure"]
    assert list(found["executions"]) == [2]


def test_a_real_worker_s_log_followed_as_it_writes_it(tmp_path: Path) -> None:
    """A pool process dies under one task while another runs on: the tail waits for the
    other's end before it says which task the WorkerLostError was."""
    from celery_support import celery_run

    store = EmbeddedStore(tmp_path / "store")
    with celery_run(tmp_path) as run:
        run.env["DUPESCOPE_CELERY_VISIBILITY"] = "60"  # only the crash hands a task out again
        run.log.touch()
        with running(store, tail=[str(run.log)], state=tmp_path / "state.json",
                     http_port=None, grpc_port=None), run.worker():
            run.wait_for(r" ready\.$")
            other = run.send("slow", 3.0)
            run.wait_for(rf"\[{other}\] received")
            crashed = run.send("crash")
            run.wait_for(rf"\[{crashed}\] succeeded in")
            run.wait_for(rf"\[{other}\] succeeded in")
            wait_for_rows(store, 6)
            time.sleep(1.0)  # a few more polls
    found = duplicates(store)
    assert dict(zip(found["key"], found["cause"], strict=True)) == {crashed: "worker_crash"}
    lost = store.execute("SELECT job_id, attrs FROM events WHERE event = 'nack'")
    assert list(lost["job_id"]) == [crashed]
    # Told once the other task's end was read (alone, the older open run would be taken).
    assert orjson.loads(lost["attrs"][0])["celery.attribution"] == "only_open_run"
