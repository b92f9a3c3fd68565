"""SQS consumers traced by opentelemetry-instrument alone (tests/sqs_lab), against a real
moto server and a real collector: a visibility timeout that expires during a slow job, a
consumer killed before its delete, a producer that sends twice. Scored against the
consumers' own side-effect ledger, for the spans alone and for the spans with the receive
count that one line of the consumer records."""

from __future__ import annotations

import pyarrow as pa
import pytest
from collect_support import free_port, running
from sqs_lab import lab
from support.scoring import score

from queries import duplicates
from store.embedded import EmbeddedStore
from store.schema import as_events

#: Two message ids for one piece of work: the spans carry no business key to join them.
UNSEEN = {"order-twice"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[lab.Lab, list[dict], list[dict]]:
    """The lab's duplicates from its spans with the receive count, and from the same
    spans without it (the spans alone)."""
    why = lab.available()
    if why:
        pytest.skip(why)
    workdir = tmp_path_factory.mktemp("sqs-lab")
    store = EmbeddedStore(workdir / "store")
    port = free_port()
    with running(store, http_port=port, grpc_port=None) as collector:
        result = lab.run(workdir, free_port(), port, record_receive_count=True)
        health = collector.collector.health()
    assert health["rejected"] == 0, health
    events = as_events(store.arrow("SELECT * FROM events"))
    alone = EmbeddedStore(workdir / "spans-alone")
    index = events.schema.get_field_index("delivery_attempt")
    alone.write(events.set_column(index, "delivery_attempt",
                                  pa.nulls(len(events), events.schema.field(index).type)))
    key_of = dict((message_id, key) for key, message_id in result.sends)

    def keyed(found: list[dict]) -> list[dict]:
        return [{**row, "key": key_of.get(row["key"], row["key"])} for row in found]

    return (result, keyed(duplicates(store).to_dict("records")),
            keyed(duplicates(alone).to_dict("records")))


def test_the_lab_injected_every_fault(world) -> None:
    result, _, _ = world
    assert lab.truth(result.runs) == {
        "order-slow": "visibility_timeout",
        "order-crash": "worker_crash",
        "order-twice": "producer_retry",
    }


def test_spans_with_the_receive_count_find_the_timeout_and_the_lost_consumer(world) -> None:
    result, with_count, _ = world
    truth = {k: c for k, c in lab.truth(result.runs).items() if k not in UNSEEN}
    scored = score(with_count, truth, {"visibility_timeout", "worker_crash"})
    print(f"sqs spans + receive count: {scored.summary()}; lab {result.seconds:.1f} s")
    assert scored.precision >= 0.99 and scored.recall >= 0.99, scored.summary()
    assert scored.cause_accuracy >= 0.95, scored.summary()


def test_spans_alone_find_the_timeout_and_cannot_see_the_lost_consumer(world) -> None:
    result, _, alone = world
    truth = {k: c for k, c in lab.truth(result.runs).items()
             if k not in UNSEEN and c == "visibility_timeout"}
    scored = score(alone, truth, {"visibility_timeout"})
    print(f"sqs spans alone: {scored.summary()}")
    assert scored.precision >= 0.99 and scored.recall >= 0.99, scored.summary()
    assert scored.cause_accuracy >= 0.95, scored.summary()
    # The killed consumer's span never ended, so it was never exported: its message's
    # second delivery is the only one the spans show.
    assert "order-crash" not in {row["key"] for row in alone}


def test_a_producers_second_send_is_not_joined_to_the_first(world) -> None:
    _, with_count, alone = world
    assert "order-twice" not in {row["key"] for row in with_count + alone}
