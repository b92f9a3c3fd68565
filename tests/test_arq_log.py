"""arq's worker logs as written by arq 0.28 at INFO (lines taken from real workers): what
each line becomes, arguments cut at 80 characters, and bad lines."""

from __future__ import annotations

import json
from datetime import date

from support.arq_log_lines import EXPIRED_TRY, LONG, OK, RETRIED, STARTING, TIMED_OUT

from collectors.arq_log import ArqLogReader, sniff
from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser
from collectors.time_of_day import DayBasis

DAY = DayBasis(date=date(2026, 12, 5))


def _rows(body: bytes, normaliser: Normaliser | None = None
          ) -> tuple[list[dict], list[str], int]:
    out = ArqLogReader(normaliser, DAY, name="arq-1.log").decode(body, 1, "arq-1.log")
    return out.rows, [str(r) for r in out.rejected], out.ignored


def _attrs(row: dict) -> dict:
    return json.loads(row["attrs"] or "{}")


def test_a_start_is_a_deliver_with_its_try_and_arguments() -> None:
    rows, _, _ = _rows(STARTING + OK)
    deliver = rows[0]
    assert (deliver["event"], deliver["job_id"], deliver["job_type"],
            deliver["delivery_attempt"]) == ("deliver", "d6dafe7afeb74a8ab1d05674647163ce",
                                             "ok", 1)
    assert _attrs(deliver)["arq.args.0"] == "k1"
    assert deliver["worker_id"] == "arq-1.log"


def test_a_result_acks_the_run_and_keeps_the_returned_value() -> None:
    rows, _, ignored = _rows(STARTING + OK)
    ack = rows[1]
    assert ack["event"] == "ack" and ack["execution_id"] == rows[0]["execution_id"]
    assert _attrs(ack)["arq.result"] == "k1"
    assert ignored == 2


def test_retrying_is_a_nack_and_the_next_try_a_new_execution() -> None:
    rows, _, _ = _rows(RETRIED)
    assert [(r["event"], r.get("delivery_attempt")) for r in rows] == [
        ("deliver", 1), ("nack", 1), ("deliver", 2), ("ack", 2)]
    assert _attrs(rows[1])["reason"] == "Retry: retrying job in 0.10s"
    assert rows[2]["execution_id"] != rows[0]["execution_id"]


def test_a_failure_keeps_its_exception_and_its_chained_traceback() -> None:
    rows, _, _ = _rows(TIMED_OUT)
    fail = rows[1]
    assert fail["event"] == "fail" and _attrs(fail)["reason"] == "TimeoutError"
    assert "direct cause" in _attrs(fail)["traceback"]


def test_a_try_after_the_in_progress_key_expired_carries_its_number() -> None:
    rows, _, _ = _rows(EXPIRED_TRY)
    assert rows[0]["delivery_attempt"] == 2
    assert _attrs(rows[0])["arq.delayed_s"] == 11.12


def test_arguments_cut_at_80_characters_keep_those_before_the_cut() -> None:
    mapping = FieldMapping(fields={"idempotency_key": ("arq.args.0",)})
    rows, _, _ = _rows(LONG, Normaliser(mapping))
    assert rows[0]["idempotency_key"] == "o-7"
    assert "arq.args.1" not in _attrs(rows[0])


def test_a_worker_started_again_in_the_same_file_is_another_worker() -> None:
    rows, _, _ = _rows(STARTING + OK + STARTING + OK)
    assert [r["worker_id"] for r in rows] == ["arq-1.log"] * 2 + ["arq-1.log#2"] * 2


def test_tries_that_never_ran_a_body_are_no_executions() -> None:
    never = (b"08:02:00:   0.50s ! 5a7220cc2f20439483a166e14c2f7deb:boom max retries 5 "
             b"exceeded\n08:02:01: job 5a7220cc2f20439483a166e14c2f7deb expired\n")
    rows, rejected, ignored = _rows(never)
    assert rows == [] and rejected == [] and ignored == 2


def test_a_line_cut_short_is_rejected_with_file_and_line_and_the_rest_kept() -> None:
    cut = "08:01:45:   0.12s → 2b04d2efb1a74253a5262\n".encode()
    rows, rejected, _ = _rows(cut + OK)
    assert rejected == ["arq-1.log:1: an arq job line that cannot be read (cut short?)"]
    assert [r["event"] for r in rows] == ["deliver", "ack"]


def test_an_arq_log_is_told_from_its_first_lines() -> None:
    assert sniff(STARTING)
    assert sniff(RETRIED)
    assert not sniff(b"07:57:16 Worker w: q1: Job OK (id-0001)\n")
