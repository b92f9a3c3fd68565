"""Every accelerator gives its reference decoder's answer on every body of its source.

The pairs come from the registry (collectors/decoders), the bodies from each source's
corpus (support/decoder_corpus.py): an accelerator registered tomorrow is checked here
without a new test. Rows are compared column by column after sorting by event_uid (an accelerator
may order a body's rows otherwise), `attrs` as the JSON objects it spells; rejections by
where and why; and a body refused whole must be refused by both.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from support.decoder_corpus import CORPUS, bodies, json_objects

from collectors.decoders import REGISTRY, Decoder, Output, Refused
from collectors.mapping import DEFAULT_MAPPING, FieldMapping
from collectors.normalise import Normaliser
from store.schema import as_events

MAPPINGS = {
    "built-in": DEFAULT_MAPPING,
    "user": FieldMapping(fields={"job_id": ("task.uuid",), "idempotency_key": ("order_id",),
                                 "resource_key": ("tenant",)}),
}

PAIRS = [
    pytest.param(REGISTRY.reference(*source), accelerator, name, body,
                 id=f"{source[0]}-{source[1]}-{accelerator.name}-{name}")
    for source in REGISTRY.sources()
    for accelerator in REGISTRY.accelerators(*source)
    for name, body in bodies(*source)
]


def _outcome(decoder: Decoder, body: bytes, mapping: FieldMapping) -> object:
    try:
        output = decoder.decode(body, Normaliser(mapping), "corpus")
    except Refused:
        return "refused"
    return _comparable(output)


def _comparable(output: Output) -> tuple[dict[str, list], list[tuple[str, str]], int]:
    table = as_events(output.table)
    table = table.take(pa.compute.sort_indices(table, [("event_uid", "ascending")]))
    columns = {name: table[name].to_pylist() for name in table.column_names}
    columns["attrs"] = json_objects(columns["attrs"])
    rejected = sorted((r.where, r.reason) for r in output.rejected)
    return columns, rejected, output.ignored


@pytest.mark.parametrize("mapping", MAPPINGS.values(), ids=MAPPINGS.keys())
@pytest.mark.parametrize(("reference", "accelerator", "name", "body"), PAIRS)
def test_an_accelerator_gives_its_references_answer(
    reference: Decoder, accelerator: Decoder, name: str, body: bytes, mapping: FieldMapping
) -> None:
    if not accelerator.available():
        pytest.skip(f"{accelerator.name} is not built here")
    assert _outcome(accelerator, body, mapping) == _outcome(reference, body, mapping)


def test_every_source_has_a_corpus() -> None:
    assert set(REGISTRY.sources()) <= set(CORPUS)


@pytest.mark.parametrize("source", REGISTRY.sources(), ids="-".join)
def test_a_sources_corpus_gives_rows_and_rejections(source: tuple[str, str]) -> None:
    # A corpus of bodies every decoder refuses would hold the accelerators to nothing.
    reference = REGISTRY.reference(*source)
    outcomes = [_outcome(reference, body, DEFAULT_MAPPING) for _, body in bodies(*source)]
    decoded = [o for o in outcomes if o != "refused"]
    assert any(columns["event_uid"] for columns, _, _ in decoded)
    assert any(rejected for _, rejected, _ in decoded)
