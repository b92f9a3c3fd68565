"""Rows -> one Arrow table: polars builds it where polars is loaded, pyarrow elsewhere, and
both give the same table."""

from __future__ import annotations

from collectors import arrow_batch
from collectors.jsonlines import decode_lines
from collectors.normalise import Normaliser
from store.schema import EVENTS_SCHEMA

LINES = [
    b'{"ts":"2025-11-30T23:59:59.5Z","event":"deliver","job_id":"j1","idempotency_key":"k",'
    b'"delivery_attempt":2147483647,"visibility_timeout_ms":30000,"queue":"q"}',
    b'{"ts":1764547200123456,"event":"lock_acquire","job_id":"j\\u00e9","lock_key":"L",'
    b'"lock_owner":"o","lock_ttl_ms":9223372036854775807,"attrs":{"a":[1,{"b":null}]}}',
    b'{"ts":"2025-12-01T00:00:01+05:30","event":"ack","job_id":"j2","worker_id":"\\ud83d\\ude00"}',
]


def _columns() -> dict[str, list]:
    rows = decode_lines(list(enumerate(LINES, 1)), Normaliser(), "x.jsonl").rows
    assert len(rows) == len(LINES)
    return {f.name: [row.get(f.name) for row in rows] for f in EVENTS_SCHEMA}


def test_polars_and_pyarrow_build_the_same_table() -> None:
    by_polars = arrow_batch._by_polars(_columns())
    by_pyarrow = arrow_batch._by_pyarrow(_columns())
    assert by_polars.schema == EVENTS_SCHEMA
    assert by_polars.equals(by_pyarrow)


def test_no_rows_give_an_empty_table_either_way() -> None:
    empty = {f.name: [] for f in EVENTS_SCHEMA}
    assert arrow_batch._by_polars(empty).equals(arrow_batch._by_pyarrow(empty))
    assert arrow_batch._by_polars(empty).num_rows == 0
