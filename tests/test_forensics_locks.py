"""Locks: expired while running (with and without overlap), split brain, stale writes."""

from __future__ import annotations

from forensics_cases import ev, locked

from queries import duplicates, lint, lock_overruns, split_brains, stale_owner_writes

KEY = {"idempotency_key": "inv-1"}


def test_a_lock_renewed_in_time_raises_no_alert(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000,
                    [("00:08", "lock_renew"), ("00:15", "side_effect"), ("00:16", "lock_release"),
                     ("00:16", "ack")])
    store.write(make_table(events))
    assert lock_overruns(store).empty


def test_a_lock_that_expired_before_the_run_ended_is_an_overrun(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000,
                    [("00:15", "side_effect"), ("00:16", "ack")])
    store.write(make_table(events))
    rows = lock_overruns(store)
    assert len(rows) == 1
    row = rows.iloc[0]
    assert (row["rule"], row["job_id"], row["delivery_attempt"], row["lock_owner"]) == (
        "lock_expired_while_running", "j1", 1, "o1")
    assert str(row["expired_at"]) == "2025-11-30 12:00:10+00:00"
    assert row["overrun_ms"] == 6000.0
    assert row["overlapped_by"] is None or row["overlapped_by"] != row["overlapped_by"]


def test_another_owner_acquiring_inside_the_gap_is_an_overlap(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000,
                    [("00:15", "side_effect"), ("00:16", "ack")])
    events += locked("j1", 2, "w2", "o2", "00:12", 10_000,
                     [("00:13", "side_effect"), ("00:14", "lock_release"), ("00:14", "ack")])
    store.write(make_table([{**e, **KEY} for e in events]))
    row = lock_overruns(store).iloc[0]
    assert (row["lock_owner"], row["overlapped_by"]) == ("o1", "o2")
    dup = duplicates(store).iloc[0]
    assert (dup["lock_expired_while_running"], dup["overlapped"], dup["split_brain"]) == (
        True, True, False)


def test_two_owners_holding_unexpired_locks_at_once_is_split_brain(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 30_000,
                    [("00:05", "side_effect"), ("00:06", "lock_release"), ("00:06", "ack")])
    events += locked("j2", 1, "w2", "o2", "00:03", 30_000,
                     [("00:04", "side_effect"), ("00:05", "lock_release"), ("00:05", "ack")])
    store.write(make_table(events))
    rows = split_brains(store)
    assert len(rows) == 1
    row = rows.iloc[0]
    assert (row["lock_owner"], row["other_owner"], row["lock_key"]) == ("o1", "o2", "lock:acct-1")
    assert str(row["overlap_from"]) == "2025-11-30 12:00:03+00:00"


def test_a_lock_released_before_the_next_acquire_is_not_split_brain(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 30_000,
                    [("00:02", "side_effect"), ("00:02", "lock_release"), ("00:03", "ack")])
    events += locked("j2", 1, "w2", "o2", "00:03", 30_000,
                     [("00:04", "side_effect"), ("00:05", "lock_release"), ("00:05", "ack")])
    store.write(make_table(events))
    assert split_brains(store).empty
    assert stale_owner_writes(store).empty


def test_a_write_after_the_lock_passed_to_another_owner_is_stale(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000,
                    [("00:15", "side_effect"), ("00:16", "ack")])
    events += locked("j2", 1, "w2", "o2", "00:12", 10_000,
                     [("00:13", "side_effect"), ("00:14", "lock_release"), ("00:14", "ack")])
    store.write(make_table(events))
    rows = stale_owner_writes(store)
    assert sorted(rows["event"]) == ["ack", "side_effect"]
    assert set(rows["lock_owner"]) == {"o1"}
    assert set(rows["taken_by"]) == {"o2"}
    assert rows["lock_expired"].all()


def test_a_release_whose_token_no_longer_matched_is_a_lint_finding(store, make_table) -> None:
    events = locked("j1", 1, "w1", "o1", "00:00", 10_000, [("00:15", "side_effect")])
    events.append(ev("00:16", "lock_release", "j1", delivery_attempt=1, worker_id="w1",
                     lock_key="lock:acct-1", lock_owner="o1", released=False))
    events.append(ev("00:16", "ack", "j1", delivery_attempt=1, worker_id="w1"))
    store.write(make_table(events))
    findings = lint(store)
    mismatch = findings[findings["finding"].str.contains("token")]
    assert len(mismatch) == 1
    assert mismatch.iloc[0]["setting"] == "lock_ttl_ms"
    assert "1 lock_release with released=false" in mismatch.iloc[0]["evidence"]
