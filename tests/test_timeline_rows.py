"""The embedded store's timeline (Python over a key's rows) gives timeline.sql's answer."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from support.timeline_events import REDELIVERED, ev, next_day

from collectors.files import ingest_files
from collectors.normalise import Normaliser
from queries.timeline import sql_timeline, timeline
from queries.timeline_rows import execution_numbers

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"

def _without(record: dict, *names: str) -> dict:
    return {k: v for k, v in record.items() if k not in names}


CASES: dict[str, list[dict]] = {
    "redelivered": REDELIVERED,
    "reversed": list(reversed(REDELIVERED)),
    "celery, no attempt, one worker": [
        {**_without(r, "delivery_attempt"), "worker_id": "w1"} if "worker_id" in r else r
        for r in REDELIVERED
    ],
    "lock rows without the key": [
        *REDELIVERED,
        _without(ev("00:01.5", "lock_acquire", job_id="j1", delivery_attempt=1,
                    worker_id="w1", lock_key="acct-1", lock_owner="o1", lock_ttl_ms=10000),
                 "idempotency_key"),
    ],
    "other keys": REDELIVERED
    + [{**r, "idempotency_key": "inv-2", "job_id": "j2"} for r in REDELIVERED],
    "a job spanning two days": [*REDELIVERED[:-1], next_day(REDELIVERED[-1])],
    "a key enqueued as two jobs": REDELIVERED
    + [{**r, "job_id": "j9", "ts": r["ts"].replace("12:0", "13:0")} for r in REDELIVERED],
    "no deliver at all": [r for r in REDELIVERED if r["event"] != "deliver"],
    "rows of the key without a job": [
        ev("00:00", "enqueue_deduped"),
        *REDELIVERED,
        ev("00:35", "worker_stop", worker_id="w1", delivery_attempt=1),
    ],
    "a worker-less deliver": [
        ev("00:00", "deliver", job_id="j1"),
        ev("00:01", "side_effect", job_id="j1"),
        ev("00:02", "deliver", job_id="j1", worker_id="w1"),
        ev("00:03", "ack", job_id="j1"),
    ],
    "effects logged apart, by the job id alone": [
        *[_without(r, "delivery_attempt") for r in REDELIVERED if r["event"] != "side_effect"],
        _without(ev("00:02", "side_effect", job_id="j1"), "idempotency_key"),
        _without(ev("00:32.5", "side_effect", job_id="j1"), "idempotency_key"),
        ev("00:00.5", "commit", job_id="j1"),  # before any deliver: in no execution
    ],
    "an event at the deliver's instant": [
        ev("00:01", "deliver", job_id="j1", delivery_attempt=1, worker_id="w1"),
        ev("00:01", "lock_acquire", job_id="j1", delivery_attempt=1, worker_id="w1"),
        ev("00:01", "ack", job_id="j1", delivery_attempt=2, worker_id="w1"),
    ],
}
KEYS = ["inv-1", "j1", "j9", "inv-2", "nope"]


def _answers(embedded, key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return timeline(embedded, key), sql_timeline(embedded, key)


@pytest.mark.parametrize("case", list(CASES))
def test_the_embedded_timeline_is_timeline_sql_before_compaction(embedded, make_table, case):
    embedded.write(make_table(CASES[case]))
    for key in KEYS:
        fast, reference = _answers(embedded, key)
        pd.testing.assert_frame_equal(fast, reference)


@pytest.mark.parametrize("case", list(CASES))
def test_the_embedded_timeline_is_timeline_sql_after_compaction(embedded, make_table, case):
    embedded.write(make_table(CASES[case]))
    embedded.compact()
    for key in KEYS:
        fast, reference = _answers(embedded, key)
        pd.testing.assert_frame_equal(fast, reference)


def test_repeated_rows_are_shown_once(embedded, make_table) -> None:
    embedded.write(make_table(REDELIVERED))
    embedded.write(make_table(REDELIVERED))  # a resent batch: the same event_uids
    fast, reference = _answers(embedded, "inv-1")
    pd.testing.assert_frame_equal(fast, reference)
    assert len(fast) == len(REDELIVERED)


def test_spans_name_their_execution(embedded, make_table) -> None:
    table = make_table(REDELIVERED)
    spans = [None, "span-a", "span-a", None, "span-a", "span-b", None]
    column = table.schema.get_field_index("execution_id")
    embedded.write(table.set_column(column, "execution_id", pa.array(spans, pa.string())))
    fast, reference = _answers(embedded, "inv-1")
    pd.testing.assert_frame_equal(fast, reference)
    assert fast["execution_uid"].tolist()[1:3] == ["span-a", "span-a"]


def test_executions_are_numbered_in_order_of_first_appearance() -> None:
    assert execution_numbers([None, "b", "a", "b", None, "a"]) == [None, 1, 2, 1, None, 2]


@pytest.mark.parametrize("form", ["sample.jsonl.gz", "sample.otlp.jsonl.gz"])
def test_the_model_samples_keys_give_timeline_sql_answers(embedded, form) -> None:
    """Logs and spans of the model's sample, compacted, plus a segment repeating one row:
    the hand-written cases above at scale, over duplicated keys of every cause."""
    truth = json.loads((SAMPLE / "sample.truth.json").read_text())
    ingest_files([str(SAMPLE / form)], embedded, Normaliser())
    embedded.compact()
    last = sql_timeline(embedded, truth["duplicates"][0]["key"])["event_uid"].iloc[-1]
    embedded.write(embedded.arrow("SELECT * FROM events WHERE event_uid = $u", {"u": last}))
    for row in truth["duplicates"][::12]:
        for key in [row["key"], *row["job_ids"]]:
            fast, reference = _answers(embedded, key)
            pd.testing.assert_frame_equal(fast, reference)
