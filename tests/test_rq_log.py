"""RQ's worker logs as written by `rq worker` 3.0 at INFO (lines taken from real workers):
what each line becomes, the date and order of time-only lines, and bad lines."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

from support.rq_log_lines import FAILED, KILLED, OK, STARTED, W

from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from collectors.rq_log import RqLogReader, sniff
from collectors.time_of_day import DayBasis

DAY = DayBasis(date=date(2026, 12, 5))


def _rows(body: bytes, basis: DayBasis = DAY, normaliser: Normaliser | None = None
          ) -> tuple[list[dict], list[str], int]:
    out = RqLogReader(normaliser, basis, name="worker-1.log").decode(body, 1, "worker-1.log")
    return out.rows, [str(r) for r in out.rejected], out.ignored


def _attrs(row: dict) -> dict:
    return json.loads(row["attrs"] or "{}")


def test_a_start_line_is_a_deliver_with_its_queue_function_and_arguments() -> None:
    rows, _, _ = _rows(STARTED + OK)
    deliver = rows[0]
    assert (deliver["event"], deliver["job_id"], deliver["queue"], deliver["job_type"],
            deliver["worker_id"]) == ("deliver", "1444b288-07e1-4a7e-a893-3ca47f4f1763", "q1",
                                      "billing.charge", W)
    assert _attrs(deliver)["rq.args.0"] == "o-1"
    assert _attrs(deliver)["rq.description"] == "billing.charge('o-1')"


def test_job_ok_acks_the_run_it_ends_and_the_other_lines_are_ignored() -> None:
    rows, rejected, ignored = _rows(STARTED + OK)
    assert [r["event"] for r in rows] == ["deliver", "ack"]
    assert rows[1]["execution_id"] == rows[0]["execution_id"] == rows[0]["event_uid"]
    assert rejected == [] and ignored == 3


def test_an_exception_is_a_fail_whose_reason_is_its_last_line() -> None:
    rows, _, _ = _rows(FAILED)
    fail = rows[1]
    assert fail["event"] == "fail"
    assert _attrs(fail)["reason"] == "ValueError: card declined"
    assert "raise ValueError" in _attrs(fail)["traceback"]
    assert _attrs(rows[0])["rq.kwargs.retries"] == 1


def test_a_killed_work_horse_is_settled_by_the_main_process_once() -> None:
    rows, _, _ = _rows(KILLED)
    assert [r["event"] for r in rows] == ["deliver", "nack", "deliver", "ack"]
    nack = _attrs(rows[1])
    assert nack["settled_by"] == f"{W} main process" != rows[1]["worker_id"]
    assert nack["reason"].startswith("Work-horse terminated unexpectedly")
    assert rows[2]["execution_id"] != rows[0]["execution_id"]


def test_a_mapping_names_an_argument_as_the_key() -> None:
    mapping = FieldMapping(fields={"idempotency_key": ("rq.args.0",)})
    rows, _, _ = _rows(OK, normaliser=Normaliser(mapping))
    assert rows[0]["idempotency_key"] == "o-1"


def test_date_gives_the_first_lines_date_and_midnight_moves_to_the_next() -> None:
    late = (f"23:59:59 Worker {W}: q1: a.b('x') (id-00000001)\n"
            f"00:00:01 Worker {W}: q1: Job OK (id-00000001)\n").encode()
    rows, _, _ = _rows(late)
    days = [datetime.fromtimestamp(r["ts"] / 1e6, UTC).date() for r in rows]
    assert days == [date(2026, 12, 5), date(2026, 12, 6)]


def test_without_a_date_each_line_is_the_latest_moment_before_the_files_time() -> None:
    written = DayBasis(reference=datetime(2026, 12, 6, 0, 30, tzinfo=UTC))
    late = (f"23:59:59 Worker {W}: q1: a.b('x') (id-00000001)\n"
            f"00:10:00 Worker {W}: q1: Job OK (id-00000001)\n").encode()
    rows, _, _ = _rows(late, written)
    moments = [datetime.fromtimestamp(r["ts"] / 1e6, UTC) for r in rows]
    assert moments[0].date() == date(2026, 12, 5) and moments[1].date() == date(2026, 12, 6)


def test_within_one_second_an_earlier_runs_end_comes_before_a_new_start() -> None:
    # worker-2's log: its run of the job ends in the second the retry starts elsewhere.
    ended = (b"10:00:00 Worker w2: q1: a.b('x') (job-0001)\n"
             b"10:00:01 Worker w2: job job-0001 failed (Work-horse terminated unexpectedly; "
             b"waitpid returned 9 (signal 9); )\n")
    # worker-1's log: a quick run of another job, then the retry, in that second.
    started = (b"10:00:01 Worker w1: q1: a.c('y') (job-0002)\n"
               b"10:00:01 Worker w1: q1: Job OK (job-0002)\n"
               b"10:00:01 Worker w1: q1: a.b('x') (job-0001)\n")
    end_row = _rows(ended)[0][1]
    quick_start, quick_end, retry = _rows(started)[0]
    assert end_row["ts"] < quick_start["ts"] < quick_end["ts"] < retry["ts"]


def test_a_line_cut_short_is_rejected_with_file_and_line_and_the_rest_kept() -> None:
    cut = f"07:57:17 Worker {W}: q1: billing.charge('o-9') (1444b2\n".encode()
    broken_ok = f"07:57:17 Worker {W}: q1: Job OK\n".encode()
    bad_time = f"07:61:17 Worker {W}: q1: Job OK (1444b288-07e1)\n".encode()
    rows, rejected, _ = _rows(STARTED + cut + broken_ok + bad_time + OK)
    assert [r.split(":")[1] for r in rejected] == ["2", "3", "4"]
    assert "cut short" in rejected[0] and "HH:MM:SS" not in rejected[0]
    assert "no time of day" in rejected[2]
    assert [r["event"] for r in rows] == ["deliver", "ack"]


def test_the_same_line_twice_within_one_second_is_two_events() -> None:
    again = (f"07:57:18 Worker {W}: q1: a.b('x') (job-0001)\n"
             f"07:57:18 Worker {W}: job job-0001: exception raised while executing (a.b)\n"
             f"07:57:18 Worker {W}: q1: a.b('x') (job-0001)\n").encode()
    rows, _, _ = _rows(again)
    assert len({r["event_uid"] for r in rows}) == 3


def test_reading_a_log_again_gives_the_same_uids() -> None:
    first = [r["event_uid"] for r in _rows(STARTED + OK + FAILED + KILLED)[0]]
    again = [r["event_uid"] for r in _rows(STARTED + OK + FAILED + KILLED)[0]]
    assert first == again and len(set(first)) == len(first)


def test_an_rq_log_is_told_from_its_first_lines() -> None:
    assert sniff(STARTED + OK)
    assert sniff(KILLED)
    assert not sniff(b'{"ts": 1, "event": "deliver"}\n')
    assert not sniff(b"[2026-12-01 20:16:32,454: INFO/MainProcess] Task a[b] received\n")


def test_within_one_second_a_run_that_failed_comes_before_one_that_succeeded() -> None:
    # Both runs of the job start and end in the same second, on two workers.
    killed = (b"10:00:01 Worker w2: q1: a.b('x') (job-0001)\n"
              b"10:00:01 Worker w2: job job-0001 failed (Work-horse terminated unexpectedly; "
              b"waitpid returned 9 (signal 9); )\n")
    retried = (b"10:00:01 Worker w1: q1: a.b('x') (job-0001)\n"
               b"10:00:01 Worker w1: q1: Job OK (job-0001)\n")
    first_start, first_end = _rows(killed)[0]
    second_start, second_end = _rows(retried)[0]
    assert first_start["ts"] < first_end["ts"] < second_start["ts"] < second_end["ts"]


def test_rq_2_0_lines_name_the_worker_once_and_no_job_when_a_horse_dies() -> None:
    old = (b"09:00:00 Worker rq:worker:abc123 started with PID 77, version 2.0.0\n"
           b"09:00:01 q1: billing.charge('o-4') (job-0004)\n"
           b"09:00:02 [Job job-0004]: exception raised while executing (billing.charge)\n"
           b"Traceback (most recent call last):\n"
           b"ValueError: card declined\n"
           b"09:00:03 q1: billing.charge('o-4') (job-0004)\n"
           b"09:00:04 Moving job to FailedJobRegistry (Work-horse terminated unexpectedly; "
           b"waitpid returned 9 (signal 9); )\n")
    rows, rejected, _ = _rows(old)
    assert rejected == []
    assert [(r["event"], r["worker_id"]) for r in rows] == [
        ("deliver", "abc123"), ("fail", "abc123"), ("deliver", "abc123"), ("nack", "abc123")]
    assert rows[3]["execution_id"] == rows[2]["execution_id"]
    assert _attrs(rows[3])["settled_by"] == "abc123 main process"


def test_rq_2_0_a_horse_killed_and_its_job_done_again_within_one_second_in_order() -> None:
    # The lines of a lab run on RQ 2.0: the kill's line names no job, and the job's rerun
    # starts and succeeds within the same second.
    old = (b"09:13:41 lab-19307: support.rq_lab_jobs.charge('order-killed-1', 'crash_once') "
           b"(753e338e-bf18-458c-9274-be9f10b7d439)\n"
           b"09:13:41 Moving job to FailedJobRegistry (Work-horse terminated unexpectedly; "
           b"waitpid returned 9 (signal 9); )\n"
           b"09:13:41 lab-19307: support.rq_lab_jobs.charge('order-killed-1', 'crash_once') "
           b"(753e338e-bf18-458c-9274-be9f10b7d439)\n"
           b"09:13:41 Successfully completed support.rq_lab_jobs.charge('order-killed-1', "
           b"'crash_once') job in 0:00:00.311367s on worker cf364abefddd49e1a36cb732971051d8\n"
           b"09:13:41 lab-19307: Job OK (753e338e-bf18-458c-9274-be9f10b7d439)\n")
    rows, rejected, _ = _rows(old)
    assert rejected == []
    assert [r["event"] for r in rows] == ["deliver", "nack", "deliver", "ack"]
    assert rows[0]["ts"] < rows[1]["ts"] < rows[2]["ts"] < rows[3]["ts"]
    assert rows[1]["execution_id"] == rows[0]["execution_id"]
