"""A watch round after the first asks the per-key rules about what batches touched since
the round before, and still finds every incident a look at everything would."""

from __future__ import annotations

import shutil

from alert_receiver import make_watcher
from forensics_cases import locked, run

from alerts.sinks import MemorySink
from queries import derived, duplicates
from store.embedded import EmbeddedStore


def twice(job: str, key: str, start: str = "00:00") -> list[dict]:
    """A key run twice with its side effect: a harmful duplicate."""
    first = run(job, 1, "w1", start, [("00:02", "side_effect"), ("00:40", "ack")],
                idempotency_key=key)
    again = run(job, 2, "w2", "00:31", [("00:32", "side_effect"), ("00:33", "ack")],
                idempotency_key=key)
    return first + again


def test_what_changed_since_a_mark_is_the_keys_of_the_batches_since(
    store, make_table
) -> None:
    store.write(make_table(twice("j1", "a")))
    mark, everything = derived.touched_since(store, None)
    assert mark is not None and everything is None  # no mark yet: anything may have
    store.write(make_table(twice("j2", "b")))
    store.write(make_table(twice("j3", "c")))
    later, touched = derived.touched_since(store, mark)
    assert later is not None and later.generation == mark.generation + 1  # one derivation
    assert touched is not None and {"b", "c"} <= touched.keys and "a" not in touched.keys


def test_a_build_from_nothing_makes_every_mark_before_it_unanswerable(
    store, make_table
) -> None:
    store.write(make_table(twice("j1", "a")))
    mark, _ = derived.touched_since(store, None)
    derived.rebuild(store)
    assert derived.touched_since(store, mark)[1] is None


def test_questions_narrowed_to_touched_keys_answer_for_those_alone(
    store, make_table
) -> None:
    store.write(make_table(twice("j1", "a")))
    mark, _ = derived.touched_since(store, None)
    store.write(make_table(twice("j2", "b")))
    _, touched = derived.touched_since(store, mark)
    assert touched is not None
    with derived.only(store, touched):
        assert list(duplicates(store)["key"]) == ["b"]
    assert sorted(duplicates(store)["key"]) == ["a", "b"]  # everything again after


def test_the_same_touched_keys_asked_again_after_a_batch_see_the_batch(
    store, make_table
) -> None:
    store.write(make_table(twice("j1", "a")))
    mark, _ = derived.touched_since(store, None)
    store.write(make_table(run("j2", 1, "w1", "00:00", [("00:01", "ack")], idempotency_key="b")))
    _, touched = derived.touched_since(store, mark)
    assert touched is not None
    with derived.only(store, touched):
        assert list(duplicates(store)["key"]) == []
    store.write(make_table(run("j2", 2, "w2", "00:05", [("00:06", "ack")], idempotency_key="b")))
    derived.ensure(store)
    with derived.only(store, touched):  # the same units, of the state after the batch
        assert list(duplicates(store)["key"]) == ["b"]


def test_a_new_holder_of_an_old_lock_raises_the_old_holder_s_incidents(
    store, make_table
) -> None:
    sink = MemorySink()
    watcher = make_watcher(store, [sink])
    holder = locked("j1", 1, "w1", "o1", "00:00", 30_000, [("00:20", "ack")])
    store.write(make_table(holder))
    assert watcher.tick() == []  # held within its TTL, alone
    other = locked("j2", 1, "w2", "o2", "00:05", 30_000, [("00:10", "ack")])
    store.write(make_table(other))
    fired = {a.rule: a for a in watcher.tick()}
    assert sorted(fired) == ["split_brain", "stale_owner_write"]
    assert {fired["split_brain"].job_id, fired["split_brain"].overlapped_by} == {"j1", "o2"}
    # j1 (a key no batch touched since) acked after o2 took its lock
    assert (fired["stale_owner_write"].job_id, fired["stale_owner_write"].overlapped_by) == (
        "j1", "o2")


def test_a_narrowed_round_finds_what_a_round_over_everything_finds(
    embedded, make_table, tmp_path
) -> None:
    narrowed, whole = MemorySink(), MemorySink()
    watcher = make_watcher(embedded, [narrowed])
    embedded.write(make_table(twice("j1", "a")))
    watcher.tick()
    embedded.write(make_table(twice("j2", "b") + locked("j3", 1, "w1", "o1", "00:00", 5_000,
                                                          [("00:15", "ack")])))
    watcher.tick()
    shutil.copytree(embedded.root, tmp_path / "copy", ignore=shutil.ignore_patterns("alerts"))
    make_watcher(EmbeddedStore(tmp_path / "copy"), [whole]).tick()  # its first: everything
    assert sorted(k for k, _ in narrowed.received) == sorted(k for k, _ in whole.received)
    found = {(body["rule"], body["key"]) for _, body in narrowed.received}
    assert {("harmful_duplicate", "a"), ("harmful_duplicate", "b"),
            ("lock_expired_while_running", "j3")} <= found
