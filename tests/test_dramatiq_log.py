"""Dramatiq worker logs (`--format dramatiq-log`): the lines Dramatiq 2.x writes, as the
events they are, the runs they end, and the duplicates and causes they show."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
from collect_support import append, running, wait_for_rows

from collectors.dramatiq_log import DramatiqLogReader, parse_call, sniff_dramatiq
from collectors.files import ingest_files
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from queries import duplicates
from store.embedded import EmbeddedStore

H = "[2026-12-05 08:08:{s}] [PID {pid}] [{thread}] [{logger}] [{level}] "
WORKER = "dramatiq.worker.WorkerThread"
CONSUMER = "dramatiq.worker.ConsumerThread(billing)"
RETRIES = "dramatiq.middleware.retries.Retries"
ID = "571ad69d-7bb1-4cac-8bb6-a4898c72d894"
ID4 = "c61ad730-7726-4db7-9969-b2c1cc3c0783"


def line(s: str, message: str, *, pid: int = 3338, thread: str = "Thread-4",
         logger: str = WORKER, level: str = "DEBUG") -> bytes:
    head = H.format(s=s, pid=pid, thread=thread, logger=logger, level=level)
    return (head + message + "\n").encode()


BOOT = line("15,503", "Worker process is ready for action.", thread="MainThread",
            logger="dramatiq.WorkerProcess(0)", level="INFO")
OK = (
    line("15,524", f"Received message charge('k1', fault=None) with id '{ID}'.")
    + line("15,525", f"Acknowledging message '{ID}'.", logger=CONSUMER)
)
FLAKY = (
    line("15,526", f"Received message charge('k2') with id '{ID}'.")
    + line("15,527", "Failed to process message charge('k2') with unhandled exception.",
           level="ERROR")
    + b"Traceback (most recent call last):\n"
    + b'  File "app.py", line 9, in charge\n'
    + b"ValueError: boom\n"
    + line("15,528", f"Retrying message '{ID}' in 181 milliseconds.", logger=RETRIES,
           level="INFO")
    + line("15,529", f"Acknowledging message '{ID}'.", logger=CONSUMER)
    + line("15,700", f"Acknowledging message '{ID}'.", thread="Thread-3",
           logger="dramatiq.worker.ConsumerThread(billing.DQ)")
    + line("15,830", f"Received message charge('k2') with id '{ID}'.", thread="Thread-5")
    + line("15,831", f"Acknowledging message '{ID}'.", thread="Thread-5", logger=CONSUMER)
)
EXHAUSTED = (
    line("16,017", f"Received message charge('k3') with id '{ID}'.")
    + line("16,019", f"Retries exceeded for message '{ID}'.", logger=RETRIES, level="WARNING")
    + line("16,019", f"Rejecting message '{ID}'.", logger=CONSUMER)
)
#: A worker process killed mid-run (no end line), its message run again by another one.
KILLED = line("20,000", f"Received message charge('k4') with id '{ID4}'.", pid=4001)
AGAIN = (
    line("23,100", f"Received message charge('k4') with id '{ID4}'.", pid=4100)
    + line("23,101", f"Acknowledging message '{ID4}'.", pid=4100, logger=CONSUMER)
)


def _rows(body: bytes, source: str = "worker.log") -> list[dict[str, object]]:
    return DramatiqLogReader(name=source).decode(body, 1, source).rows


def _attrs(row: dict[str, object]) -> dict[str, object]:
    return orjson.loads(str(row["attrs"]))


def test_a_run_is_a_deliver_and_an_ack_of_one_execution() -> None:
    rows = _rows(BOOT + OK)
    assert [(r["event"], r["job_id"], r["job_type"], r["worker_id"]) for r in rows] == [
        ("deliver", ID, "charge", "worker.log:3338"), ("ack", ID, "charge", "worker.log:3338"),
    ]
    assert rows[0]["execution_id"] == rows[1]["execution_id"] == rows[0]["event_uid"]


def test_the_actors_arguments_are_kept_for_a_mapping_to_name_the_key() -> None:
    attrs = _attrs(_rows(OK)[0])
    assert attrs["dramatiq.args.0"] == "k1" and attrs["dramatiq.kwargs.fault"] == "None"


def test_arguments_that_are_no_literals_are_left_out_and_the_rest_kept() -> None:
    assert parse_call("charge(<object at 0x7f>, 'k', n=3)") == ("charge", {})
    assert parse_call("charge(Decimal('1.5'), 'k', n=3)") == (
        "charge", {"dramatiq.args.1": "k", "dramatiq.kwargs.n": "3"},
    )


def test_a_retry_is_a_nack_with_its_exception_and_the_ack_after_it_is_no_event() -> None:
    rows = _rows(FLAKY)
    assert [r["event"] for r in rows] == ["deliver", "nack", "deliver", "ack"]
    assert _attrs(rows[1])["reason"] == "retry: ValueError: boom"
    assert rows[1]["execution_id"] == rows[0]["execution_id"] != rows[2]["execution_id"]
    assert _attrs(rows[2])["dramatiq.retries_seen"] == 1


def test_the_delay_queues_own_ack_ends_no_run() -> None:
    assert not any(_attrs(r).get("dramatiq.thread") == "Thread-3" for r in _rows(FLAKY))


def test_retries_exceeded_then_rejected_is_one_fail() -> None:
    rows = _rows(EXHAUSTED)
    assert [r["event"] for r in rows] == ["deliver", "fail"]
    assert _attrs(rows[1])["reason"] == "retries exceeded"


def test_bad_lines_are_rejected_with_file_and_line_and_the_rest_kept() -> None:
    body = (
        line("15,000", "Received message charge('k') with id 571ad69d.")  # no quotes
        + line("99,000", f"Acknowledging message '{ID}'.", logger=CONSUMER)  # no time
        + line("15,524", f"Acknowledging message '{ID}", logger=CONSUMER)  # cut short
        + OK
    )
    out = DramatiqLogReader(name="w.log").decode(body, 1, "w.log")
    assert [r.where for r in out.rejected] == ["w.log:1", "w.log:2", "w.log:3"]
    assert [r["event"] for r in out.rows] == ["deliver", "ack"]


def test_a_dramatiq_log_is_told_from_its_first_lines() -> None:
    assert sniff_dramatiq(b"some banner\n" + BOOT + OK)
    assert not sniff_dramatiq(b'{"event": "deliver"}\n' + OK)
    assert not sniff_dramatiq(b"[2026-12-01 20:16:32,454: INFO/MainProcess] Task x[1] received\n")


def _store_of(tmp_path: Path, *logs: tuple[str, bytes]) -> EmbeddedStore:
    store = EmbeddedStore(tmp_path / "store")
    paths = []
    for name, body in logs:
        (tmp_path / name).write_bytes(body)
        paths.append(str(tmp_path / name))
    mapping = FieldMapping(fields={"idempotency_key": ("dramatiq.args.0",)})
    report = ingest_files(paths, store, Normaliser(mapping))
    assert not report.rejected
    return store


def test_ingest_finds_a_retry_and_a_killed_worker_with_their_causes(tmp_path: Path) -> None:
    store = _store_of(tmp_path, ("a.log", BOOT + FLAKY + KILLED), ("b.log", AGAIN))
    found = duplicates(store)
    assert dict(zip(found["key"], found["cause"], strict=True)) == {
        "k2": "retry_after_failure", "k4": "worker_crash",
    }


def test_a_growing_dramatiq_log_is_followed_by_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    store = EmbeddedStore(tmp_path / "store")
    log.write_bytes(BOOT)
    flaky = FLAKY.splitlines(keepends=True)
    with running(store, tail=[str(log)], state=tmp_path / "state.json", http_port=None,
                 grpc_port=None) as c:
        time.sleep(0.6)  # the boot line alone: nothing to store
        append(log, b"".join(flaky[:3]))  # received and half a traceback
        wait_for_rows(store, 1)
        append(log, b"".join(flaky[3:]))
        wait_for_rows(store, 4)
        health = c.collector.health()
    assert health["rejected"] == 0 and health["received"] == 4
    found = duplicates(store)
    assert list(found["cause"]) == ["retry_after_failure"]


def test_at_info_each_retry_line_is_a_run_that_failed(tmp_path: Path) -> None:
    info = b"".join(
        piece + b"\n" for piece in (FLAKY + EXHAUSTED).splitlines()
        if b"[DEBUG]" not in piece
    )
    found = duplicates(_store_of(tmp_path, ("info.log", info)))
    assert list(zip(found["executions"], found["cause"], strict=True)) == [
        (2, "retry_after_failure")
    ]


def test_format_dramatiq_log_reads_a_log_whose_first_lines_are_something_else(
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(b"starting...\n" * 300 + OK)
    store = EmbeddedStore(tmp_path / "store")
    assert ingest_files([str(log)], store, fmt="dramatiq-log").rows == 2
    assert ingest_files([str(log)], EmbeddedStore(tmp_path / "auto")).rows == 0


def test_a_message_received_again_after_its_ack_is_a_broker_redelivery(tmp_path: Path) -> None:
    again = line("25,000", f"Received message charge('k1', fault=None) with id '{ID}'.",
                 pid=4100)
    found = duplicates(_store_of(tmp_path, ("a.log", OK), ("b.log", again)))
    assert list(found["cause"]) == ["broker_redelivery"]
