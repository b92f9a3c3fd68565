"""The contract module is the one list of fields and kinds: the rest follows from it."""

import pyarrow as pa
import pytest

from collectors.mapping import FieldMapping
from collectors.normalise import Normaliser, RecordError
from store import contract
from store.clickhouse import events_ddl
from store.schema import EVENTS_SCHEMA

TS = "2025-11-30T12:00:00Z"


def test_the_arrow_schema_is_the_contract_columns_in_order() -> None:
    assert tuple(EVENTS_SCHEMA.names) == contract.COLUMN_NAMES
    assert EVENTS_SCHEMA.field("delivery_attempt").type == pa.int32()
    assert EVENTS_SCHEMA.field("lock_ttl_ms").type == pa.int64()
    assert not EVENTS_SCHEMA.field("ts").nullable


def test_clickhouse_columns_follow_the_contract_types() -> None:
    create = events_ddl()[1]
    assert "queue LowCardinality(Nullable(String))" in create
    assert "delivery_attempt Nullable(Int32)" in create
    assert "event LowCardinality(String)" in create
    assert "ts DateTime64(6, 'UTC')" in create


def test_fields_are_the_head_then_strings_then_integers() -> None:
    assert contract.FIELDS[:2] == ("ts", "event")
    assert set(contract.FIELDS) == {c.name for c in contract.COLUMNS if c.mapped}
    assert contract.INT_FIELDS == ("delivery_attempt", "lock_ttl_ms", "visibility_timeout_ms")


def test_a_field_is_spelled_by_name_then_job_prefix_then_aliases() -> None:
    assert contract.spellings("queue") == (
        "queue", "job.queue", "messaging.destination.name", "messaging.destination"
    )


def test_a_mapping_files_names_come_before_the_contracts() -> None:
    mapping = FieldMapping(fields={"queue": ("topic",)})
    assert mapping.sources_for("queue")[:2] == ("topic", "queue")


@pytest.mark.parametrize("kind", contract.NO_JOB_ID_KINDS)
def test_kinds_without_a_job_id_are_kept_without_one(kind: str) -> None:
    row = Normaliser().normalise({"ts": TS, "event": kind}, uid="u", source="test")
    assert row["event"] == kind and "job_id" not in row


def test_other_kinds_need_a_job_id() -> None:
    with pytest.raises(RecordError, match="needs a job_id"):
        Normaliser().normalise({"ts": TS, "event": "deliver"}, uid="u", source="test")


def test_an_integer_field_holds_what_its_column_holds() -> None:
    too_big = contract.int_range("delivery_attempt")[1] + 1
    with pytest.raises(RecordError, match="out of range"):
        Normaliser().normalise(
            {"ts": TS, "event": "deliver", "job_id": "j", "delivery_attempt": too_big},
            uid="u", source="test",
        )


def test_content_uid_is_blake2b_of_the_separated_parts() -> None:
    assert contract.content_uid("t", "s", -1) == contract.content_uid("t", "s", "-1")
    assert contract.content_uid("ab", "c") != contract.content_uid("a", "bc")
    assert len(contract.content_uid("x")) == 2 * contract.UID_DIGEST_SIZE
