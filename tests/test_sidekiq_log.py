"""Sidekiq's own logs as a source (`--format sidekiq-log`): the lines Sidekiq 6.4 writes,
in its default and JSON formats, become the contract's events; a failure's exception entry
and a push-back at shutdown say how a run ended. The lines here are as a real Sidekiq 6.4.1
process wrote them (tests/sidekiq_lab)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import orjson
from click.testing import CliRunner
from collect_support import append, running, wait_for_rows
from support.sidekiq_log_lines import JOB, PUSHED_BACK, RERUN, RETRIED, json_line

from collectors.files import ingest_files
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from collectors.sidekiq_log import SidekiqLogReader, looks_like_sidekiq_log
from dupescope.cli import main
from queries import duplicates
from store.embedded import EmbeddedStore


def _rows(body: bytes, normaliser: Normaliser | None = None) -> list[dict]:
    decoded = SidekiqLogReader(normaliser, name="/var/log/web-1.log").decode(body, 1, "w.log")
    assert decoded.rejected == []
    return decoded.rows


def _attrs(row: dict) -> dict:
    return orjson.loads(row["attrs"]) if row["attrs"] else {}


def test_a_run_is_its_start_and_its_end_in_one_execution() -> None:
    rows = _rows(RETRIED)
    deliver, ack = rows[2], rows[3]
    assert (deliver["event"], ack["event"]) == ("deliver", "ack")
    assert deliver["job_id"] == ack["job_id"] == "9c00d0"
    assert deliver["job_type"] == "ChargeJob" and deliver["worker_id"] == "web-1.log:20902"
    assert ack["execution_id"] == deliver["execution_id"] == deliver["event_uid"]
    assert _attrs(ack)["sidekiq.elapsed_s"] == 0.05


def test_a_failure_is_settled_by_its_exception_entry_with_the_payload() -> None:
    deliver, nack = _rows(RETRIED)[:2]
    assert nack["event"] == "nack" and nack["execution_id"] == deliver["execution_id"]
    assert nack["queue"] == "billing" and nack["delivery_attempt"] == 1
    attrs = _attrs(nack)
    assert attrs["reason"] == "Job raised exception: retried from the retry set"
    assert attrs["sidekiq.args.0"] == "order-7" and attrs["sidekiq.elapsed_s"] == 0.005
    assert "sidekiq.retry_count" not in attrs  # a first run's payload has none


def test_the_next_start_of_a_jid_is_its_next_delivery_attempt() -> None:
    assert [(r["event"], r["delivery_attempt"]) for r in _rows(RETRIED)] == [
        ("deliver", 1), ("nack", 1), ("deliver", 2), ("ack", 2),
    ]


def test_the_json_format_gives_the_rows_the_default_format_gives() -> None:
    pretty = b"".join(
        line for line in RETRIED.splitlines(keepends=True) if b" class=" in line
    )
    as_json = b"".join(
        json_line(line.split(b" ")[0].decode(), "t1", line.rsplit(b": ", 1)[1].strip().decode(),
              **{"class": "ChargeJob", "jid": "9c00d0"})
        for line in pretty.splitlines()
    )
    assert [(r["event"], r["job_id"]) for r in _rows(as_json)] == [
        ("deliver", "9c00d0"), ("deliver", "9c00d0"), ("ack", "9c00d0"),
    ]


def test_a_push_back_at_shutdown_settles_the_run_on_the_workers_behalf() -> None:
    rows = _rows(PUSHED_BACK)
    assert [r["event"] for r in rows] == ["deliver", "nack"]  # the killed thread's fail: none
    attrs = _attrs(rows[1])
    assert attrs["reason"] == "pushed back to Redis at shutdown"
    assert attrs["settled_by"] == "web-1.log:20903 shutdown" != rows[1]["worker_id"]
    assert attrs["sidekiq.args.0"] == "order-9"  # from the job named in progress
    assert rows[1]["execution_id"] == rows[0]["execution_id"]


def test_a_pushed_back_job_that_runs_again_reads_as_a_lost_worker(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(PUSHED_BACK)
    (tmp_path / "b.log").write_bytes(RERUN)
    store = EmbeddedStore(tmp_path / "store")
    ingest_files([str(tmp_path / "a.log"), str(tmp_path / "b.log")], store)
    found = duplicates(store)
    assert dict(zip(found["key"], found["cause"], strict=True)) == {"b4e2ac": "worker_crash"}


def test_a_run_again_after_its_failure_is_a_retry_after_failure(tmp_path: Path) -> None:
    (tmp_path / "w.log").write_bytes(RETRIED)
    store = EmbeddedStore(tmp_path / "store")
    ingest_files([str(tmp_path / "w.log")], store)
    found = duplicates(store)
    assert dict(zip(found["key"], found["cause"], strict=True)) == {
        "9c00d0": "retry_after_failure"
    }


def test_a_job_moved_to_the_dead_set_fails_for_good() -> None:
    dead = (
        b"2026-12-05T09:00:00.000Z pid=1 tid=t1 class=ChargeJob jid=9c00d0 INFO: start\n"
        b"2026-12-05T09:00:00.010Z pid=1 tid=t1 class=ChargeJob jid=9c00d0 INFO: Adding dead "
        b"ChargeJob job 9c00d0\n"
        b"2026-12-05T09:00:00.011Z pid=1 tid=t1 class=ChargeJob jid=9c00d0 elapsed=0.01 "
        b"INFO: fail\n"
        b'2026-12-05T09:00:00.011Z pid=1 tid=t1 WARN: {"context":"Job raised exception",'
        b'"job":' + JOB.encode() + b',"retry_count":3}}\n'
    )
    settle = _rows(dead)[1]
    assert settle["event"] == "fail" and _attrs(settle)["sidekiq.retry_count"] == 3
    assert _attrs(settle)["reason"].endswith("moved to the dead set")


def test_a_mapping_keys_a_job_by_its_args() -> None:
    mapping = FieldMapping(fields={"idempotency_key": ("sidekiq.args.0",)})
    nack = _rows(RETRIED, Normaliser(mapping))[1]
    assert nack["idempotency_key"] == "order-7"


def test_damaged_lines_are_rejected_with_file_and_line_and_the_rest_kept() -> None:
    body = (
        b"2026-12-05T08:00:45.240Z pid=1 tid=a class=ChargeJob jid=j1 INFO: start\n"
        b"2026-13-45T08:00:45.240Z pid=1 tid=a class=ChargeJob jid=j1 INFO: done\n"
        b'{"ts":"2026-12-05T08:00:46.000Z","pid":1,"tid":"a","lvl":"INFO","msg":"done",'
        b'"ctx":{"class":"ChargeJob"}}\n'
        b'{"ts":"2026-12-05T08:00:46.000Z","pid":1,\n'
        b"2026-12-05T08:00:45.240Z pid=1 class=ChargeJob jid=j1 INFO: start\n"
        b"2026-12-05T08:00:47.240Z pid=1 tid=a class=ChargeJob jid=j1 INFO: done\n"
    )
    decoded = SidekiqLogReader(name="w.log").decode(body, 1, "w.log")
    assert [str(r).split(":")[1] for r in decoded.rejected] == ["2", "3", "4", "5"]
    assert "not a date" in decoded.rejected[0].reason
    assert "without its jid" in decoded.rejected[1].reason
    assert [r["event"] for r in decoded.rows] == ["deliver", "ack"]


def test_a_sidekiq_log_is_told_from_json_lines_and_celery_logs() -> None:
    assert looks_like_sidekiq_log(RETRIED) and looks_like_sidekiq_log(PUSHED_BACK)
    contract = b'{"ts":"2026-12-05T08:00:45Z","event":"deliver","job_id":"j1"}\n'
    celery = b"[2026-12-01 20:16:32,454: INFO/MainProcess] Task app.charge[3f1c] received\n"
    assert not looks_like_sidekiq_log(contract) and not looks_like_sidekiq_log(celery)


def _ingest(store: Path, log: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["ingest", "--store", str(store), *args, str(log)])
    assert result.exit_code == 0, result.stderr
    return result.stderr


def test_ingest_detects_a_sidekiq_log(tmp_path: Path) -> None:
    log, store = tmp_path / "sidekiq.log", tmp_path / "store"
    log.write_bytes(RETRIED)
    assert "4 events stored" in _ingest(store, log)
    out = CliRunner().invoke(main, ["duplicates", "--store", str(store), "--format", "json"])
    assert [row["cause"] for row in json.loads(out.stdout)] == ["retry_after_failure"]


def test_format_sidekiq_log_reads_a_log_its_start_does_not_tell(tmp_path: Path) -> None:
    log, store = tmp_path / "sidekiq.log", tmp_path / "store"
    log.write_bytes(b"".join(b"loading %d\n" % i for i in range(300)) + RETRIED)
    assert "4 events stored" in _ingest(store, log, "--format", "sidekiq-log")


def test_collect_tail_follows_a_growing_sidekiq_log(tmp_path: Path) -> None:
    log, state = tmp_path / "sidekiq.log", tmp_path / "tail-state.json"
    store = EmbeddedStore(tmp_path / "store")
    lines = PUSHED_BACK.splitlines(keepends=True)
    log.write_bytes(lines[0])
    with running(store, tail=[str(log)], state=state, http_port=None, grpc_port=None) as c:
        wait_for_rows(store, 1)
        time.sleep(0.3)
        append(log, b"".join(lines[1:]) + RERUN)  # the run's end comes in a later poll
        wait_for_rows(store, 4)
        health = c.collector.health()
    assert health["rejected"] == 0
    found = duplicates(store)
    assert dict(zip(found["key"], found["cause"], strict=True)) == {"b4e2ac": "worker_crash"}


def test_a_chunk_taken_back_is_read_again_from_the_same_state() -> None:
    reader = SidekiqLogReader(name="w.log")
    before = reader.checkpoint()
    first = reader.decode(RETRIED, 1, "w.log").rows
    reader.restore(before)  # its rows could not be stored: read again later
    again = reader.decode(RETRIED, 1, "w.log").rows
    assert [(r["event_uid"], r["delivery_attempt"]) for r in again] == [
        (r["event_uid"], r["delivery_attempt"]) for r in first
    ]


def test_lines_without_sidekiqs_time_are_read_with_the_log_drains() -> None:
    drained = (
        b"2026-12-05T08:00:45.240000+00:00 app[worker.1]: pid=4 tid=t1 class=ChargeJob "
        b"jid=j1 INFO: start\n"
        b"2026-12-05T08:00:45.300000+00:00 app[worker.1]: pid=4 tid=t1 class=ChargeJob "
        b"jid=j1 elapsed=0.06 INFO: done\n"
    )
    rows = _rows(drained)
    assert [(r["event"], r["worker_id"]) for r in rows] == [
        ("deliver", "web-1.log:4"), ("ack", "web-1.log:4"),
    ]
    assert rows[1]["ts"] - rows[0]["ts"] == 60_000


def test_an_internal_exception_is_no_retry() -> None:
    internal = RETRIED.replace(b"Job raised exception", b"Internal exception!")
    settle = _rows(internal)[1]
    assert settle["event"] == "fail"
    assert _attrs(settle)["reason"] == "Internal exception!: not retried"
