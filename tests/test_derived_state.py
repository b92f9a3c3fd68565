"""The derived state a live store keeps, batch after batch, equals a build from nothing.

A live store takes batches while its readers answer (the collector writes, the dashboard
and `watch` read), and its derived tables and kept answers follow its content: built,
persisted, reattached by the next process, replaced when the content changes. Whatever
order the workload model's events arrive in (late ones among them), resent, compacted
or cut by retention in between, every derived table and kept answer must equal a build
from nothing over the same events after every batch, and at the end the duplicates must
be the model's truth. Some duplicates arrive as a zero-code source sees them (nothing said
of their effect: outcome unknown), and for some of those the app's own effect lines,
keyed by the job id alone, arrive batches later and make their outcome known.
"""

from __future__ import annotations

import io
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path

import orjson
import pandas as pd
import pytest
from forensics_cases import run
from support.derived_rows import plain, state

import sample_data
from collectors.files import ingest_files
from collectors.normalise import Normaliser
from queries import derived, duplicates
from store.base import Store
from store.clickhouse import ChdbStore
from store.embedded import EmbeddedStore

DUPLICATE_FIELDS = ("key", "executions", "side_effects", "harmful", "outcome", "cause",
                    "causes")
#: Events by which a run says what became of its effect.
EFFECT_EVIDENCE = {"side_effect", "idempotency_hit", "lock_contended", "occ_conflict", "commit"}
#: The prefix of the keys copied as a source without effect events sees them.
SILENT = "silent-"
#: A day long before the model's, whose events retention drops.
OLD_DAY = "2026-10-01"


def model_lines(seed: int) -> tuple[list[bytes], dict]:
    workload = sample_data.generate(seed=seed, target_events=1500, hours=0.5)
    return workload.jsonl_bytes().splitlines(), workload.truth


def old_day_lines(lines: list[bytes]) -> list[bytes]:
    """Some of the model's lines (every eighth: job events as well as worker starts)
    again under keys of their own, on OLD_DAY: what retention drops."""
    old = []
    for line in lines[::8][:200]:
        record = orjson.loads(line)
        record["ts"] = OLD_DAY + record["ts"][10:]
        for field in ("job_id", "idempotency_key"):
            if record.get(field):
                record[field] = "old-" + record[field]
        old.append(orjson.dumps(record))
    return old


def silent_lines(lines: list[bytes], truth: dict) -> tuple[list[bytes], list[bytes]]:
    """Six of the model's duplicates again under keys of their own (SILENT), without the
    events that say what became of their effect; and, apart, the side effects of the
    first three as an app logs them beside such a source: keyed by the job id alone."""
    chosen = sorted(d["key"] for d in truth["duplicates"])[:6]
    logged = set(chosen[:3])
    silent, effects = [], []
    for line in lines:
        record = orjson.loads(line)
        key = record.get("idempotency_key") or record.get("job_id")
        if key not in chosen:
            continue
        for field in ("job_id", "idempotency_key"):
            if record.get(field):
                record[field] = SILENT + record[field]
        if record["event"] not in EFFECT_EVIDENCE:
            silent.append(orjson.dumps(record))
        elif record["event"] == "side_effect" and key in logged:
            effects.append(orjson.dumps({k: record[k] for k in ("ts", "event", "job_id")}))
    return silent, effects


Step = tuple[str, list[bytes]]


def deliveries(seed: int, *, retention: bool) -> tuple[list[Step], dict]:
    """The model's lines in random batches and order, some batches sent twice, with
    compaction and (`retention`) an old day that retention drops in between."""
    lines, truth = model_lines(seed)
    silent, effects = silent_lines(lines, truth)
    rng = random.Random(seed)
    shuffled = lines + silent
    rng.shuffle(shuffled)  # every batch holds events older than the last one's
    cuts = sorted(rng.sample(range(1, len(shuffled)), 4))
    batches = [shuffled[a:b] for a, b in zip([0, *cuts], [*cuts, len(shuffled)], strict=True)]
    steps: list[Step] = [("batch", old_day_lines(lines))] if retention else []
    for n, batch in enumerate(batches):
        steps.append(("batch", batch))
        if rng.random() < 0.5:
            steps.append(("batch", rng.choice(batches[: n + 1])))  # a resend
        if rng.random() < 0.5:
            steps.append(("compact", []))
        if n == 1 and retention:
            steps.append(("retention", []))
        if n == 2:
            steps.append(("batch", effects))  # the app's effect lines, batches later
    return steps, truth


def _write(store: Store, lines: list[bytes], folder: Path, n: int) -> None:
    path = folder / f"batch-{n}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    ingest_files([str(path)], store, Normaliser())


def _duplicates_are_the_truth(store: Store, truth: dict, silent_copies: bool = True) -> None:
    found = duplicates(store).to_dict(orient="records")
    modelled = [r for r in found if not str(r["key"]).startswith(SILENT)]
    rows = sorted(repr(tuple(plain(r[f]) for f in DUPLICATE_FIELDS)) for r in modelled)
    expected = sorted(
        repr(tuple(plain(d[f]) for f in DUPLICATE_FIELDS)) for d in truth["duplicates"]
    )
    assert rows == expected
    if not silent_copies:
        return
    # The copies without effect events: unknown, but where the effect lines came.
    chosen = sorted(d["key"] for d in truth["duplicates"])[:6]
    silent = {str(r["key"]).removeprefix(SILENT): r for r in found if r not in modelled}
    assert sorted(silent) == chosen
    for key in chosen[3:]:
        assert (silent[key]["outcome"], silent[key]["side_effects"]) == ("unknown", 0)
    for key in chosen[:3]:
        said = next(d for d in truth["duplicates"] if d["key"] == key)
        assert silent[key]["side_effects"] == said["side_effects"], key
        known = {0: "unknown", 1: "absorbed"}.get(said["side_effects"], "harmful")
        assert silent[key]["outcome"] == known, key


def _same_duplicates(live: Store, fresh: Store) -> None:
    """The duplicates the live store's reader lists (its frame from the steps before,
    brought up to date) are those of a build from nothing, in the same order."""
    pd.testing.assert_frame_equal(duplicates(live), duplicates(fresh))


def _listing(store: EmbeddedStore) -> bytes:
    """Every duplicate as `dupescope duplicates --format json` prints it from the listing
    kept with the derived state."""
    out = io.BytesIO()
    assert derived.write_duplicates_listing(store, out)
    return out.getvalue()


@pytest.fixture
def batch_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "batches"
    folder.mkdir()
    return folder


@contextmanager
def _from_nothing(live: EmbeddedStore, into: Path) -> Iterator[EmbeddedStore]:
    """A new store over a copy of the live one's events, with no derived state."""
    shutil.copytree(live.root, into, ignore=shutil.ignore_patterns("derived"))
    fresh = EmbeddedStore(into)
    try:
        yield fresh
    finally:
        fresh.close()


@pytest.mark.parametrize("seed", [5, 21])
def test_an_embedded_store_s_derived_state_equals_a_build_from_nothing_after_every_step(
    seed: int, tmp_path: Path, batch_folder: Path
) -> None:
    steps, truth = deliveries(seed, retention=True)
    live = EmbeddedStore(tmp_path / "live")
    try:
        for n, (kind, lines) in enumerate(steps):
            if kind == "batch":
                _write(live, lines, batch_folder, n)
            elif kind == "compact":
                live.compact()
            else:
                assert live.drop_days_before(date.fromisoformat(OLD_DAY) + timedelta(days=1))
            kept = state(live)
            with _from_nothing(live, tmp_path / f"fresh-{n}") as fresh:
                assert kept == state(fresh), f"after step {n} ({kind})"
                _same_duplicates(live, fresh)
                assert _listing(live) == _listing(fresh), f"listing after step {n} ({kind})"
            reread = EmbeddedStore(live.root)  # a second reader attaches the kept build
            try:
                assert state(reread) == kept, f"attached after step {n} ({kind})"
            finally:
                reread.close()
        _duplicates_are_the_truth(live, truth)
    finally:
        live.close()


def _chdb_from_nothing(live: ChdbStore, database: str) -> ChdbStore:
    """A new database of the live one's chDB (one per process) holding its events, with
    nothing derived."""
    fresh = ChdbStore(live.path, database=database)
    fresh.write(live.arrow("SELECT * FROM events"))
    return fresh


def test_a_chdb_store_s_derived_state_equals_a_build_from_nothing_after_every_step(
    tmp_path: Path, batch_folder: Path
) -> None:
    steps, truth = deliveries(9, retention=True)
    live = ChdbStore(str(tmp_path / "chdb"))
    try:
        for n, (kind, lines) in enumerate(steps):
            if kind == "batch":
                _write(live, lines, batch_folder, n)
            elif kind == "compact":
                live.command("OPTIMIZE TABLE events FINAL")
            else:  # what TTL with ttl_only_drop_parts does to a day past retention
                live.command("ALTER TABLE events DROP PARTITION {day:Date}", {"day": OLD_DAY})
            kept = state(live)
            fresh = _chdb_from_nothing(live, f"fresh_{n}")
            try:
                assert kept == state(fresh), f"after step {n} ({kind})"
                _same_duplicates(live, fresh)
            finally:
                fresh.close()
        _duplicates_are_the_truth(live, truth)
        derived.rebuild(live)
        assert state(live) == kept
    finally:
        live.close()


def test_rebuild_repairs_a_damaged_kept_build(tmp_path: Path, batch_folder: Path) -> None:
    lines, truth = model_lines(5)
    store = EmbeddedStore(tmp_path / "store")
    _write(store, lines, batch_folder, 0)
    kept = state(store)
    store.close()
    executions = next((tmp_path / "store" / "derived").glob("derived_executions-*.parquet"))
    executions.write_bytes(b"not parquet")
    damaged = EmbeddedStore(tmp_path / "store")
    try:
        with pytest.raises(Exception, match="(?i)parquet"):
            state(damaged)
        derived.rebuild(damaged)
        assert state(damaged) == kept
        _duplicates_are_the_truth(damaged, truth, silent_copies=False)
    finally:
        damaged.close()


def test_the_tables_read_at_once_are_each_as_it_is_kept(store: Store, make_table) -> None:
    store.write(make_table(run("j1", 1, "w1", "00:01", [("00:02", "ack")], idempotency_key="a")
                           + run("j2", 1, "w2", "00:05", [("00:06", "ack")], idempotency_key="a")))
    read = derived.tables(store)
    assert list(read) == list(derived.BUILT_TABLES)
    assert read["derived_executions"].num_rows == 2
    assert read["answer_duplicates"].column("key").to_pylist() == ["a"]
    for name in ("derived_executions", "answer_duplicates", "derived_lookup"):
        assert read[name].equals(derived.table(store, name)), name
