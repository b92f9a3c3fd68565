"""Celery's plain worker logs as a source: each kind of line, told from what a real Celery
5.7 prefork worker on Redis wrote (tests/support/celery_log_lines.py holds its output, cut
down)."""

from __future__ import annotations

import orjson
import pytest
from support.celery_log_lines import ADD, BANNER, BROKEN, CRASH, FLAKY, SLOW

from collectors.celery_log import CeleryLogOptions, CeleryLogReader, parse_zone, sniff_format
from collectors.jsonlines import Decoded
from collectors.timestamps import micros_to_rfc3339


def _decode(text: bytes, **options: object) -> Decoded:
    reader = CeleryLogReader(options=CeleryLogOptions(**options), name="/var/log/worker-7.log")  # type: ignore[arg-type]
    return reader.decode(text, 1, "worker.log")


def _attrs(row: dict) -> dict:
    return orjson.loads(row["attrs"])


def test_received_is_a_deliver_of_the_task_id_and_name() -> None:
    (deliver, _) = _decode(ADD).rows
    assert (deliver["event"], deliver["job_id"], deliver["job_type"]) == (
        "deliver", "e752fc26-8130-426c-ba61-db3b4aee25d8", "celery_log_app.add"
    )
    assert deliver.get("delivery_attempt") is None  # Celery logs no delivery count


def test_success_is_the_ack_that_ends_its_run() -> None:
    deliver, ack = _decode(ADD).rows
    assert ack["event"] == "ack"
    assert ack["execution_id"] == deliver["execution_id"] == deliver["event_uid"]
    assert _attrs(ack)["celery.runtime_s"] == pytest.approx(0.000998, abs=1e-6)


def test_retry_is_a_nack_with_its_reason() -> None:
    nack = _decode(FLAKY).rows[1]
    assert nack["event"] == "nack"
    assert _attrs(nack)["reason"] == "Retry in 0.5s: ConnectionError('upstream down')"


def test_a_failure_and_its_traceback_are_one_fail() -> None:
    decoded = _decode(BROKEN)
    assert [row["event"] for row in decoded.rows] == ["deliver", "fail"]
    attrs = _attrs(decoded.rows[1])
    assert attrs["reason"] == "ValueError('bad input')"
    assert attrs["celery.traceback"].endswith("ValueError: bad input")
    assert decoded.ignored == 0 and not decoded.rejected


def test_a_lost_pool_process_settles_the_task_it_ran_for_it() -> None:
    rows = _decode(CRASH).rows
    lost = next(row for row in rows if "WorkerLostError" in (row["attrs"] or ""))
    first_crash = rows[1]
    assert lost["event"] == "nack" and lost["job_id"] == "8dc57862-bcda-4bc8-be09-1953ad01680a"
    assert lost["execution_id"] == first_crash["execution_id"]
    attrs = _attrs(lost)
    assert attrs["reason"].startswith("WorkerLostError(")
    assert attrs["settled_by"] == "worker-7.log MainProcess"  # not the worker itself
    assert (attrs["celery.lost_process"], attrs["celery.lost_pid"]) == ("ForkPoolWorker-2", 10853)


def test_the_task_a_live_process_goes_on_with_is_not_blamed_for_a_lost_one() -> None:
    rows = _decode(CRASH).rows
    flaky_retry = next(row for row in rows if row["event"] == "nack" and "Retry" in row["attrs"])
    assert flaky_retry["execution_id"] == rows[0]["execution_id"]


def test_a_task_s_own_log_line_tells_which_process_ran_it() -> None:
    # Two runs open when ForkPoolWorker-2 dies; the older one logged from ForkPoolWorker-1.
    text = b"""\
[2026-12-01 20:16:32,463: INFO/MainProcess] Task app.a[aaaaaaaa-0000-4000-8000-000000000001] received
[2026-12-01 20:16:32,470: INFO/ForkPoolWorker-1] app.a[aaaaaaaa-0000-4000-8000-000000000001]: charging
[2026-12-01 20:16:32,573: INFO/MainProcess] Task app.b[bbbbbbbb-0000-4000-8000-000000000002] received
[2026-12-01 20:16:32,580: INFO/ForkPoolWorker-2] app.b[bbbbbbbb-0000-4000-8000-000000000002]: charging
[2026-12-01 20:16:32,629: ERROR/MainProcess] Process 'ForkPoolWorker-2' pid:10853 exited with 'signal 9 (SIGKILL)'
[2026-12-01 20:16:32,655: ERROR/MainProcess] Task handler raised error: WorkerLostError('Worker exited prematurely: signal 9 (SIGKILL) Job: 3.')
"""  # noqa: E501
    lost = _decode(text).rows[-1]
    assert lost["job_id"] == "bbbbbbbb-0000-4000-8000-000000000002"
    assert _attrs(lost)["celery.attribution"] == "process"


def test_a_success_ends_the_run_that_was_received_before_it_began() -> None:
    first, second, second_ack, first_ack = _decode(SLOW).rows
    assert second_ack["execution_id"] == second["event_uid"]
    assert first_ack["execution_id"] == first["event_uid"]


def test_celery_4_received_task_line_is_a_deliver() -> None:
    # Celery 3 and 4 wrote "Received task: name[id]" (with an ETA for delayed tasks).
    text = (b"[2019-03-04 10:00:00,123: INFO/MainProcess] Received task: "
            b"proj.tasks.add[2d2b5c6e-6f1e-4d5e-9f44-08d1e0c0c111]  ETA:[2019-03-04 10:05:00]\n")
    (deliver,) = _decode(text).rows
    assert (deliver["event"], deliver["job_type"]) == ("deliver", "proj.tasks.add")


def test_the_worker_is_the_node_the_log_names() -> None:
    rows = _decode(BANNER + ADD).rows
    assert {row["worker_id"] for row in rows} == {"dupescope-test@vm"}


def test_a_hostname_given_names_the_worker() -> None:
    rows = _decode(BANNER + ADD, hostname="celery@web-1").rows
    assert {row["worker_id"] for row in rows} == {"celery@web-1"}


def test_a_log_that_names_no_node_is_named_after_its_file() -> None:
    rows = _decode(ADD).rows
    assert {row["worker_id"] for row in rows} == {"worker-7.log"}


def test_pool_processes_are_kept_as_attributes() -> None:
    deliver, ack = _decode(ADD).rows
    assert _attrs(deliver)["celery.process"] == "MainProcess"
    assert _attrs(ack)["celery.process"] == "ForkPoolWorker-1"


def test_times_are_utc_unless_a_zone_is_given() -> None:
    (deliver, _) = _decode(ADD).rows
    assert micros_to_rfc3339(deliver["ts"]) == "2026-12-01T20:26:39.561000Z"
    (deliver, _) = _decode(ADD, zone=parse_zone("Europe/Berlin")).rows
    assert micros_to_rfc3339(deliver["ts"]) == "2026-12-01T19:26:39.561000Z"
    (deliver, _) = _decode(ADD, zone=parse_zone("-05:30")).rows
    assert micros_to_rfc3339(deliver["ts"]) == "2026-12-02T01:56:39.561000Z"


def test_an_unknown_zone_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="Mars/Olympus"):
        parse_zone("Mars/Olympus")


def test_the_banner_and_other_loggers_are_ignored_and_counted() -> None:
    decoded = _decode(BANNER)
    assert decoded.rows == [] and decoded.rejected == []
    assert decoded.ignored == 9  # 7 banner lines, "Connected to", "ready."


def test_a_broken_task_line_is_rejected_where_it_is_and_the_rest_kept() -> None:
    text = ADD + (
        b"[2026-12-01 20:26:40,000: INFO/MainProcess] Task celery_log_app.add[e752fc26 received\n"
        b"[2026-12-01 25:26:40,000: INFO/MainProcess] Task celery_log_app.add[e7] received\n"
        b"[2026-12-01 20:26:40,001: INFO/ForkPoolWorker-1] Task celery_log_app.add[e7] "
        b"succeeded in soon: 3\n"
    )
    decoded = _decode(text)
    assert len(decoded.rows) == 2
    assert [str(r) for r in decoded.rejected] == [
        "worker.log:3: a task line without a task name and [id]",
        "worker.log:4: time '2026-12-01 25:26:40,000' is not a date: hour must be in 0..23",
        "worker.log:5: a success line without its runtime ('succeeded in Ns: ')",
    ]


def test_reading_a_log_again_gives_the_same_event_uids() -> None:
    first = [row["event_uid"] for row in _decode(FLAKY).rows]
    again = [row["event_uid"] for row in _decode(FLAKY).rows]
    assert first == again and len(set(first)) == 4


def test_a_run_s_lines_meet_across_chunks() -> None:
    reader = CeleryLogReader(name="worker.log")
    lines = CRASH.splitlines(keepends=True)
    received = reader.decode(b"".join(lines[:2]), 1, "tail").rows
    rest = reader.decode(b"".join(lines[2:]), 3, "tail").rows
    lost = next(row for row in rest if "WorkerLostError" in (row["attrs"] or ""))
    assert lost["execution_id"] == received[1]["event_uid"]
    assert rest[-1]["execution_id"] == rest[-2]["event_uid"]  # the redelivered run's ack


def test_a_worker_log_is_told_from_json_lines() -> None:
    assert sniff_format(BANNER) == "celery-log"
    assert sniff_format(ADD) == "celery-log"
    assert sniff_format(b'{"ts": 1, "event": "deliver"}\n') == "json-lines"
    assert sniff_format(b"starting up\n") is None


def _up_to_the_retry(text: bytes) -> tuple[bytes, bytes]:
    at = text.index(b"[2026-12-01 20:16:32,648")
    return text[:at], text[at:]


def test_a_growing_log_waits_at_a_worker_lost_error_several_runs_could_be_behind() -> None:
    reader = CeleryLogReader(name="worker.log")
    written, later = _up_to_the_retry(CRASH)
    decoded, read = reader.decode_growing(written, 1, "tail", now=0.0)
    assert [row["event"] for row in decoded.rows] == ["deliver", "deliver"]
    assert written[read:].startswith(b"[2026-12-01 20:16:32,655: ERROR/MainProcess] Task handler")
    decoded, _ = reader.decode_growing(written[read:] + later, 1, "tail", now=1.0)
    lost = decoded.rows[0]
    assert lost["job_id"] == "8dc57862-bcda-4bc8-be09-1953ad01680a"  # the retry ruled out flaky


def test_a_growing_log_waits_no_longer_than_the_hold() -> None:
    reader = CeleryLogReader(name="worker.log")
    written, _ = _up_to_the_retry(CRASH)
    _, read = reader.decode_growing(written, 1, "tail", now=0.0)
    decoded, read_later = reader.decode_growing(written[read:], 1, "tail", now=11.0)
    assert read_later == len(written) - read
    assert _attrs(decoded.rows[0])["celery.attribution"] == "oldest_open_run"


def test_a_mapping_file_may_name_a_field_of_the_lines_as_the_key() -> None:
    from collectors.mapping import FieldMapping
    from collectors.normalise import Normaliser

    mapping = FieldMapping(fields={"idempotency_key": ("celery.result",)})
    reader = CeleryLogReader(Normaliser(mapping), name="worker.log")
    deliver, ack = reader.decode(ADD, 1, "worker.log").rows
    assert ack["idempotency_key"] == "3" and deliver.get("idempotency_key") is None


def test_success_stored_before_the_worker_was_lost_is_an_ack() -> None:
    # Celery 5.7's warning, in its format 'Task %s[%s] succeeded before the worker was lost'.
    text = ADD.splitlines(keepends=True)[0] + (
        b"[2026-12-01 20:26:39,900: WARNING/MainProcess] Task celery_log_app.add"
        b"[e752fc26-8130-426c-ba61-db3b4aee25d8] succeeded before the worker was lost: "
        b"WorkerLostError('Worker exited prematurely: signal 9 (SIGKILL) Job: 1.')\n"
    )
    deliver, ack = _decode(text).rows
    assert ack["event"] == "ack" and ack["execution_id"] == deliver["event_uid"]


def test_a_custom_log_format_is_read_with_the_main_process_pid() -> None:
    fmt = "%(asctime)s %(levelname)-8s %(processName)s pid=%(process)d | %(message)s"
    text = (
        b"2026-12-01 20:26:39,142 INFO     MainProcess pid=4242 | dupescope-test@vm ready.\n"
        b"2026-12-01 20:26:39,561 INFO     MainProcess pid=4242 | Task celery_log_app.add"
        b"[e752fc26-8130-426c-ba61-db3b4aee25d8] received\n"
        b"2026-12-01 20:26:39,572 INFO     ForkPoolWorker-1 pid=4250 | Task celery_log_app.add"
        b"[e752fc26-8130-426c-ba61-db3b4aee25d8] succeeded in 0.0009977910001452983s: 3\n"
    )
    deliver, ack = _decode(text, log_format=fmt).rows
    assert deliver["worker_id"] == ack["worker_id"] == "dupescope-test@vm:4242"
    assert _attrs(ack)["celery.pid"] == 4250 and ack["execution_id"] == deliver["event_uid"]


def test_a_log_format_without_the_message_is_refused() -> None:
    from collectors.celery_log import compile_log_format

    with pytest.raises(ValueError, match=r"has no %\(message\)s"):
        compile_log_format("[%(asctime)s] %(levelname)s")
