"""A new derived table is one query file and one catalogue line, on both engines.

A throwaway table (each key's executions counted) is declared in a test: the build makes
it, a batch derives again only the keys it touches, and a rebuild gives the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from forensics_cases import run

from derive import catalogue, library
from queries import derived
from store.base import Store

THROWAWAY = catalogue.Table("derived_throwaway", "derive_throwaway", "key")
SQL = """-- Each key's executions, counted (a table only the tests declare).
SELECT key, count(*) AS executions
FROM derived_executions
GROUP BY key
"""


@pytest.fixture
def declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    folder = tmp_path / "sql"
    folder.mkdir()
    (folder / "derive_throwaway.sql").write_text(SQL)
    monkeypatch.setattr(library, "FOLDERS", (folder, *library.FOLDERS))
    monkeypatch.setattr(catalogue, "TABLES", (*catalogue.TABLES, THROWAWAY))
    catalogue.check(catalogue.TABLES)
    yield


def acked(job: str, key: str, at: str) -> list[dict]:
    return run(job, 1, "w1", at, [(at, "ack")], idempotency_key=key)


def counts(store: Store) -> dict[str, int]:
    rows = derived.table(store, THROWAWAY.name).to_pylist()
    return {row["key"]: int(row["executions"]) for row in rows}


def test_a_new_table_is_built_absorbed_and_rebuilt(store, make_table, declared) -> None:
    store.write(make_table(acked("j1", "a", "00:01") + acked("j2", "a", "00:02")))
    assert counts(store) == {"a": 2}
    built, _ = derived.touched_since(store, None)

    store.write(make_table(acked("j3", "a", "00:03") + acked("j4", "b", "00:04")))
    assert counts(store) == {"a": 3, "b": 1}
    absorbed, touched = derived.touched_since(store, built)
    assert built is not None and absorbed is not None
    assert (absorbed.epoch, absorbed.generation) == (built.epoch, built.generation + 1)
    # The batch's keys were derived again, and the untouched jobs' were not.
    assert touched is not None and touched.keys & {"a", "b", "j1", "j2"} == {"a", "b"}

    derived.rebuild(store)
    rebuilt, _ = derived.touched_since(store, None)
    assert rebuilt is not None and rebuilt.epoch != built.epoch
    assert counts(store) == {"a": 3, "b": 1}


def test_a_table_whose_unit_no_engine_derives_is_refused_at_import() -> None:
    odd = catalogue.Table("derived_odd", "derive_odd", "lock_key")
    with pytest.raises(ValueError, match="unit 'lock_key' has no touched set"):
        catalogue.check((*catalogue.TABLES, odd))


def test_a_kept_table_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        catalogue.check((*catalogue.TABLES, catalogue.TABLES[1]))
