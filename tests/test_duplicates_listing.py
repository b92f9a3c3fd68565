"""The listing of every duplicate kept rendered beside each derived layer (embedded store):
printed, it is byte for byte what rendering the duplicates' rows prints, after builds,
batches, folds and merges; where a layer has none, the rows are rendered as before."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from forensics_cases import run

from derive.embedded import listing
from derive.embedded import state as derived_state
from derive.embedded.listing import LISTING, listing_path
from dupescope.cli import main
from queries import derived
from queries.duplicates_table import duplicates_arrow
from queries.json_lines import json_lines
from store.embedded import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]


def twice(key: str, minute: int) -> list[dict]:
    """Key `key` delivered twice from minute `minute`, charged both times: a duplicate."""
    start = f"{minute:02d}:00"
    events = run(f"{key}-j", 1, "w1", start, [(f"{minute:02d}:02", "side_effect")],
                 idempotency_key=key)
    events += run(f"{key}-j", 2, "w2", f"{minute:02d}:31", [(f"{minute:02d}:32", "side_effect")],
                  idempotency_key=key)
    return events


def rendered(store: EmbeddedStore) -> bytes:
    """Every duplicate rendered from its rows, as a filtered listing is printed."""
    body = b"".join(json_lines(duplicates_arrow(store))).replace(b"\n", b",\n")
    return b"[" + body[:-2] + b"]\n" if body else b"[]\n"


def listed(store: EmbeddedStore) -> bytes:
    """Every duplicate printed from the kept listing."""
    out = io.BytesIO()
    assert derived.write_duplicates_listing(store, out), "no listing was kept"
    return out.getvalue()


@pytest.fixture
def store(tmp_path: Path, make_table) -> EmbeddedStore:
    opened = EmbeddedStore(tmp_path / "store")
    opened.write(make_table(twice("inv-b", 3) + twice("inv-a", 3) + twice("inv-c", 1)))
    return opened


def test_a_build_keeps_a_listing_that_prints_what_the_rows_render(store) -> None:
    printed = listed(store)
    assert printed == rendered(store)
    assert [row["key"] for row in orjson.loads(printed)] == ["inv-c", "inv-a", "inv-b"]


def test_a_listing_rendered_a_slice_at_a_time_prints_what_the_rows_render(
    tmp_path: Path, make_table, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "RENDERED_A_SLICE", 2)
    opened = EmbeddedStore(tmp_path / "store")
    keys = [f"inv-{n}" for n in range(5)]
    opened.write(make_table([e for n, key in enumerate(keys) for e in twice(key, n)]))
    printed = listed(opened)
    assert printed == rendered(opened)
    assert [row["key"] for row in orjson.loads(printed)] == keys


def test_a_store_without_duplicates_lists_an_empty_array(tmp_path: Path, make_table) -> None:
    empty = EmbeddedStore(tmp_path / "store")
    empty.write(make_table(run("j1", 1, "w1", "00:00", [("00:01", "ack")])))
    assert listed(empty) == b"[]\n"


def test_a_batch_s_keys_take_their_places_and_replace_their_old_rows(store, make_table) -> None:
    listed(store)
    # inv-a runs a third time (its row changes), inv-0 is new and comes first; inv-ab and
    # inv-bb are new and began when inv-a and inv-b did: they go among them, by key.
    third = run("inv-a-j", 3, "w3", "03:50", [("03:51", "side_effect")],
                idempotency_key="inv-a")
    store.write(make_table(third + twice("inv-0", 0) + twice("inv-ab", 3) + twice("inv-bb", 3)))
    printed = listed(store)
    assert printed == rendered(store)
    rows = orjson.loads(printed)
    assert [row["key"] for row in rows] == ["inv-0", "inv-c", "inv-a", "inv-ab", "inv-b",
                                            "inv-bb"]
    assert rows[2]["executions"] == 3


def test_a_key_of_unknown_outcome_is_listed_so_and_known_once_its_effects_arrive(
    store, make_table
) -> None:
    silent = (run("j9", None, "w1", "04:00", [("04:40", "ack")])
              + run("j9", None, "w2", "04:31", [("04:33", "ack")]))
    store.write(make_table(silent))
    printed = listed(store)
    assert printed == rendered(store)
    row = orjson.loads(printed)[-1]
    assert (row["key"], row["harmful"], row["outcome"]) == ("j9", None, "unknown")
    store.write(make_table([{"ts": f"2025-11-30T12:{ts}Z", "event": "side_effect",
                             "job_id": "j9"} for ts in ("04:01", "04:32")]))
    printed = listed(store)
    assert printed == rendered(store)
    row = orjson.loads(printed)[-1]
    assert (row["key"], row["harmful"], row["outcome"]) == ("j9", True, "harmful")


def test_the_listing_follows_folded_and_merged_layers(store, make_table) -> None:
    for minute in range(10, 40):  # past MAX_LAYERS (folds) and a quarter of the base (merge)
        store.write(make_table(twice(f"inv-{minute}", minute)))
        assert listed(store) == rendered(store), f"after the batch of minute {minute}"
    state = derived_state.load(store)
    assert state is not None and len(state.layers) < 31
    assert len(orjson.loads(listed(store))) == 33


def test_a_state_without_kept_listings_is_rendered_from_its_rows(store) -> None:
    expected = listed(store)
    state = derived_state.load(store)
    assert state is not None
    listing_path(store, state.layers[0]).unlink()
    assert not derived.write_duplicates_listing(store, io.BytesIO())
    result = CliRunner().invoke(main, ["duplicates", "--store", str(store.root),
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    assert result.output.encode() == expected


def test_listings_of_layers_no_state_names_are_removed_with_them(
    store, make_table, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed(store)
    first = derived_state.load(store)
    assert first is not None
    monkeypatch.setattr(derived_state, "STALE_GRACE_SECONDS", -1.0)
    derived.rebuild(store)
    assert not listing_path(store, first.layers[0]).exists()
    assert not derived_state.rows_path(store, LISTING, first.layers[0]).exists()
    assert listed(store) == rendered(store)


@pytest.mark.parametrize("into", ["pipe", "file"])
def test_the_command_prints_the_kept_listing_to_a_pipe_or_a_file(
    store, tmp_path: Path, into: str
) -> None:
    expected = listed(store)
    command = [sys.executable, "-m", "dupescope.cli", "duplicates", "--store",
               str(store.root), "--format", "json"]
    if into == "pipe":
        printed = subprocess.run(command, cwd=ROOT, capture_output=True, check=True).stdout
    else:
        target = tmp_path / "duplicates.json"
        with open(target, "wb") as out:
            subprocess.run(command, cwd=ROOT, stdout=out, check=True)
        printed = target.read_bytes()
    assert printed == expected

