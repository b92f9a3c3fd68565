"""A few keys' rows of a kept answer, as `dupescope timeline` reads its verdict's row.

A process that only asks for one key's `duplicates` row of a current kept state reads
that answer's layers and attaches nothing else (every other view cost a third of the
command); a state behind the segments is brought current first, as for any question.
"""

from __future__ import annotations

from pathlib import Path

from forensics_cases import run

from derive.embedded.build import exists
from queries import derived, duplicates
from store.embedded import EmbeddedStore

FIRST = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], idempotency_key="inv-1")
AGAIN = run("j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")],
            idempotency_key="inv-1")
OTHER = run("j2", 1, "w1", "00:10", [("00:11", "side_effect")], idempotency_key="inv-2") + run(
    "j2", 2, "w2", "00:50", [("00:51", "side_effect"), ("00:52", "ack")],
    idempotency_key="inv-2")


def _kept(folder: Path, make_table, *batches: list[dict]) -> None:
    """A store whose derived state is kept current for `batches`, then closed."""
    store = EmbeddedStore(folder)
    for batch in batches:
        store.write(make_table(batch))
    duplicates(store)
    store.close()


def _keys(rows) -> list[str]:
    return rows.column("key").to_pylist()


def test_one_keys_row_of_a_current_state_is_read_from_that_answer_alone(
    tmp_path: Path, make_table
) -> None:
    _kept(tmp_path / "store", make_table, FIRST + AGAIN, OTHER)
    store = EmbeddedStore(tmp_path / "store")
    try:
        rows = derived.answer_of_keys(store, "answer_duplicates", ["inv-1"])
        assert _keys(rows) == ["inv-1"]
        assert rows.column("harmful").to_pylist() == [True]
        con = store.connection(events=False)
        assert exists(con, "answer_duplicates_layers")
        assert not exists(con, "derived_executions")
        # A question that needs the whole state still gets it.
        assert sorted(duplicates(store)["key"]) == ["inv-1", "inv-2"]
    finally:
        store.close()


def test_a_batch_not_yet_derived_is_derived_before_one_keys_row_is_read(
    tmp_path: Path, make_table
) -> None:
    _kept(tmp_path / "store", make_table, FIRST + AGAIN)
    store = EmbeddedStore(tmp_path / "store")
    try:
        store.write(make_table(OTHER))
        assert _keys(derived.answer_of_keys(store, "answer_duplicates", ["inv-2"])) == ["inv-2"]
    finally:
        store.close()
