"""Forensics of one key from queries/: its executions, the verdict and the cause, on each store."""

from __future__ import annotations

from pathlib import Path

import pytest
from forensics_cases import run

from collectors.files import ingest_files
from collectors.normalise import Normaliser
from dupescope.output import plain_rows, records
from queries import duplicates, key_forensics, timeline
from queries.forensics import duplicates_of
from queries.key_forensics import forensics_of
from queries.key_verdict import key_verdict

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"

KEY = {"idempotency_key": "inv-1"}

#: Charged once, acked: nothing ran twice.
CLEAN = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:03", "ack")], **KEY)
#: The first worker charged and went silent; the redelivery charged again.
HARMFUL = run("j1", 1, "w1", "00:00", [("00:02", "side_effect")], **KEY) + run(
    "j1", 2, "w2", "00:40", [("00:41", "side_effect"), ("00:42", "ack")], **KEY
)
#: The first run outlived the 30 s visibility timeout; the second found the idempotency record.
ABSORBED = run("j1", 1, "w1", "00:00", [("00:02", "side_effect"), ("00:40", "ack")], **KEY) + run(
    "j1", 2, "w2", "00:31", [("00:32", "idempotency_hit"), ("00:33", "ack")], **KEY
)

#: Two runs of one task, as Celery's event stream or worker logs see them: delivered and
#: acked, nothing said of the effect.
SILENT_ON_EFFECT = run("j1", None, "w1", "00:00", [("00:40", "ack")]) + run(
    "j1", None, "w2", "00:31", [("00:33", "ack")]
)


def test_a_clean_key_ran_once_and_is_no_duplicate(store, make_table) -> None:
    store.write(make_table(CLEAN))
    found = key_forensics(store, "inv-1")
    assert found.executions["outcome"].tolist() == ["ack"]
    assert found.duplicate is None
    assert found.verdict.text == "Ran once and ran its side effect: not a duplicate."
    assert found.verdict.harmful is None
    assert found.verdict.cause is None and found.verdict.cause_line is None


def test_a_harmful_duplicate_names_the_lost_worker_and_the_repeated_effect(
    store, make_table
) -> None:
    store.write(make_table(HARMFUL))
    said = key_forensics(store, "inv-1").verdict
    assert said.text == (
        "Delivered twice because the first worker (w1) went silent after its side effect; "
        "the second execution ran the effect again: harmful."
    )
    assert said.harmful is True
    assert (said.cause, said.causes, said.job_type) == (
        "worker_crash", ("worker_crash",), "billing.charge"
    )
    assert said.cause_line == "billing.charge · cause worker_crash (all that apply: worker_crash)"


def test_an_absorbed_duplicate_names_the_timeout_and_what_stopped_the_effect(
    store, make_table
) -> None:
    store.write(make_table(ABSORBED))
    found = key_forensics(store, "inv-1")
    assert found.executions["absorbed_by"].fillna("-").tolist() == ["-", "idempotency_hit"]
    assert found.verdict.text == (
        "Delivered twice because the visibility timeout (30 s) ran out while the first "
        "execution was still running (it ran 40 s); the second execution found the "
        "idempotency record and skipped the effect: absorbed."
    )
    assert found.verdict.harmful is False
    assert found.verdict.cause == "visibility_timeout"


def test_a_job_id_finds_its_keys_row_and_the_same_verdict(embedded, make_table) -> None:
    embedded.write(make_table(HARMFUL))
    by_job = key_forensics(embedded, "j1")
    assert by_job.duplicate is not None and by_job.duplicate["key"] == "inv-1"
    assert by_job.verdict == key_forensics(embedded, "inv-1").verdict


def test_without_a_forensic_answer_the_cause_is_not_classified(embedded, make_table) -> None:
    embedded.write(make_table(HARMFUL))
    said = forensics_of(timeline(embedded, "inv-1"), None, "inv-1").verdict
    assert said.text == (
        "Ran twice for a reason the events do not show; the second execution ran the effect "
        "again: harmful. (Cause not classified: no forensic answer for this key.)"
    )
    assert said.cause is None and said.cause_line is None


def test_an_unknown_key_has_no_events_and_no_verdict_on_executions(embedded, make_table) -> None:
    embedded.write(make_table(CLEAN))
    found = key_forensics(embedded, "nope")
    assert found.timeline.empty and found.executions.empty and found.duplicate is None
    assert found.verdict.text == "No execution recorded: the job was never delivered to a worker."


def test_a_duplicate_no_run_reported_the_effect_of_says_so_and_what_would_tell(
    store, make_table
) -> None:
    store.write(make_table(SILENT_ON_EFFECT))
    said = key_forensics(store, "j1").verdict
    assert (said.harmful, said.outcome) == (None, "unknown")
    assert "absorbed." not in said.text and "harmful." not in said.text
    assert "whether it harmed is unknown" in said.text
    assert "side_effect" in said.text and "task id" in said.text
    assert said.as_dict()["outcome"] == "unknown"


def test_an_effect_line_logged_apart_makes_the_outcome_known(store, make_table) -> None:
    # The app logs its effect keyed by the task id alone (no worker): it joins the run
    # delivered last before it, whichever source saw the deliver.
    effects = [{"ts": "2025-11-30T12:00:01Z", "event": "side_effect", "job_id": "j1"},
               {"ts": "2025-11-30T12:00:32Z", "event": "side_effect", "job_id": "j1"}]
    store.write(make_table(SILENT_ON_EFFECT + effects))
    said = key_forensics(store, "j1").verdict
    assert (said.harmful, said.outcome) == (True, "harmful")
    assert said.text.endswith("the second execution ran the effect again: harmful.")


def test_the_duplicates_of_some_keys_are_those_keys_rows_of_every_duplicate(
    store, make_table
) -> None:
    other = {"idempotency_key": "inv-2"}
    store.write(make_table(HARMFUL))
    duplicates(store)  # a state kept, which the next batch adds a layer to
    store.write(make_table(
        run("j2", 1, "w1", "01:00", [("01:02", "side_effect")], **other)
        + run("j2", 2, "w2", "01:40", [("01:41", "idempotency_hit"), ("01:42", "ack")],
              **other)))
    every = duplicates(store)
    assert sorted(every["key"]) == ["inv-1", "inv-2"]
    found = duplicates_of(store, ["inv-2", "j2", "no-such-key"])
    expected = every[every["key"] == "inv-2"].reset_index(drop=True)
    assert found.reset_index(drop=True).to_dict("records") == expected.to_dict("records")
    assert duplicates_of(store, ["no-such-key"]).empty


# ---- the command line's rows: the same answer without a data frame ----------------------


def _same_answer(store, key: str) -> None:
    """`key_verdict` (what `dupescope timeline` prints) says what `key_forensics` (the
    timeline page) says: the same events, values and verdict."""
    lean, page = key_verdict(store, key), key_forensics(store, key)
    assert lean.verdict == page.verdict
    assert plain_rows(lean.timeline) == records(page.timeline)


@pytest.mark.parametrize("events", [CLEAN, HARMFUL, ABSORBED, SILENT_ON_EFFECT],
                         ids=["clean", "harmful", "absorbed", "silent-on-effect"])
def test_the_commands_rows_and_verdict_are_the_pages(store, make_table, events) -> None:
    store.write(make_table(events))
    for key in ("inv-1", "j1", "nope"):
        _same_answer(store, key)


def test_the_commands_answer_is_the_pages_on_the_models_sample(embedded) -> None:
    ingest_files([str(SAMPLE / "sample.jsonl.gz")], embedded, Normaliser())
    every = duplicates(embedded)
    keys = [*every.groupby(["cause", "outcome"])["key"].first(), "no-such-key"]
    assert len(keys) > 5
    for key in keys:
        _same_answer(embedded, key)
