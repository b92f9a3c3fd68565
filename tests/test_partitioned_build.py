"""A full build split into parts of the keys gives every derived table and kept answer a
build in one piece gives: each key's jobs, enqueues and lookups land in one part, and the
lock incidents, whose holders come from many keys, are derived over every execution."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from forensics_cases import ev, locked, reached_and_unreached_holders, run
from support.derived_rows import state

import sample_data
from collectors.files import ingest_files
from collectors.normalise import Normaliser
from derive.embedded import partitioned
from queries import derived
from store.embedded import EmbeddedStore


def _built(folder: Path, lines: list[bytes], parts: int,
           monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[str, ...]]]:
    """Every derived table of a store of `lines`, built from nothing in `parts` parts."""
    monkeypatch.setattr(partitioned, "parts_for", lambda events: parts)
    folder.mkdir(parents=True)
    path = folder / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    store = EmbeddedStore(folder / "store")
    ingest_files([str(path)], store, Normaliser())
    ingest_files([str(path)], store, Normaliser())  # sent twice: repeats the build drops
    derived.rebuild(store)
    return state(store)


def _lines(events: list[dict]) -> list[bytes]:
    return [orjson.dumps(e) for e in events]


def _same_in_parts(tmp_path: Path, lines: list[bytes], parts: int,
                   monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[str, ...]]]:
    whole = _built(tmp_path / "whole", lines, 1, monkeypatch)
    split = _built(tmp_path / "split", lines, parts, monkeypatch)
    assert split == whole
    return split


@pytest.mark.parametrize("parts", [2, 7])
def test_the_model_built_in_parts_equals_a_build_in_one_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: int
) -> None:
    workload = sample_data.generate(seed=11, target_events=3000, hours=0.5)
    found = _same_in_parts(tmp_path, workload.jsonl_bytes().splitlines(), parts,
                           monkeypatch)
    assert found["derived_lock_incidents"] and found["answer_duplicates"]
    assert found["derived_lifecycle"]


def test_a_lock_s_holders_of_many_keys_meet_in_its_incidents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, then = reached_and_unreached_holders()
    found = _same_in_parts(tmp_path, _lines(first + then), 5, monkeypatch)
    overruns = [row for row in found["derived_lock_incidents"] if "lock_expired" in row[0]]
    assert overruns  # j1 overran while j3 held the lock: j1 and j3 are other keys


def test_a_key_enqueued_twice_counts_both_jobs_whatever_part_the_jobs_are_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # j1's events name two idempotency keys: its executions belong to the larger, but
    # its enqueue counts for the key it names, with j2's (a producer retry of k-a).
    events = [
        ev("00:00", "enqueue", "j1", idempotency_key="k-a"),
        *run("j1", 1, "w1", "00:01", [("00:02", "side_effect"), ("00:03", "ack")],
             idempotency_key="k-z"),
        ev("00:04", "enqueue", "j2", idempotency_key="k-a"),
        *run("j2", 1, "w2", "00:05", [("00:06", "side_effect"), ("00:07", "ack")],
             idempotency_key="k-a"),
        *locked("j3", 1, "w3", "o3", "00:08", 5000, [("00:09", "ack")]),
        ev("00:10", "worker_start", worker_id="w1"),
    ]
    for parts in (2, 3, 5):
        _same_in_parts(tmp_path / str(parts), _lines(events), parts, monkeypatch)


def test_a_budget_too_small_for_the_events_splits_the_build() -> None:
    events = 10_000_000
    assert partitioned.parts_for(0) == 1
    one_piece = partitioned.parts_for(partitioned.MIN_PART_EVENTS)
    assert one_piece == 1
    assert partitioned.parts_for(events) > 1
