"""The registry serves a body with the fastest decoder that can run, else the reference."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from collectors import otlp_native
from collectors.celery_log import CeleryLogOptions
from collectors.decoders import REGISTRY, Output, Registry, UnknownSource
from collectors.normalise import Normaliser
from store.schema import EVENTS_SCHEMA


@dataclass(frozen=True)
class Fake:
    """A decoder that decodes nothing, and says whether it can run here."""

    name: str
    runs: bool = True
    bulk: bool = False
    signal: str = "logs"
    media: str = "json"

    def available(self) -> bool:
        return self.runs

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        return Output(EVENTS_SCHEMA.empty_table())


def _registry(*accelerators: Fake) -> Registry:
    registry = Registry()
    reference = registry.register(Fake("reference"))
    for accelerator in accelerators:
        registry.register(accelerator, accelerates=reference)
    return registry


def test_the_last_accelerator_that_runs_here_serves() -> None:
    registry = _registry(Fake("columns"), Fake("native"))
    assert registry.serving("logs", "json").name == "native"


def test_an_accelerator_that_cannot_run_here_leaves_the_body_to_the_next() -> None:
    registry = _registry(Fake("columns"), Fake("native", runs=False))
    assert registry.serving("logs", "json").name == "columns"


def test_a_bulk_decoder_serves_only_bulk_reads() -> None:
    registry = _registry(Fake("blocks", bulk=True))
    assert registry.serving("logs", "json").name == "reference"
    assert registry.serving("logs", "json", bulk=True).name == "blocks"


def test_an_accelerator_needs_its_reference_registered() -> None:
    with pytest.raises(ValueError, match="accelerates no registered reference"):
        Registry().register(Fake("native"), accelerates=Fake("reference"))


def test_a_source_without_a_decoder_is_named() -> None:
    with pytest.raises(UnknownSource, match="traces in ndjson"):
        REGISTRY.serving("traces", "ndjson")


def test_protobuf_traces_are_served_natively_where_the_extension_is_built() -> None:
    served = REGISTRY.serving("traces", "protobuf")
    assert served.name == ("otlp_native" if otlp_native.available() else "otlp_columns")
    decoded = served.decode(b"", Normaliser(), "s")
    assert decoded.table.num_rows == 0 and decoded.table.schema.equals(EVENTS_SCHEMA)


def test_a_celery_log_is_read_by_its_registered_decoder() -> None:
    log = (
        b"[2026-12-01 20:26:39,561: INFO/MainProcess] Task app.add[e752fc26] received\n"
        b"[2026-12-01 20:26:39,572: INFO/ForkPoolWorker-1] Task app.add[e752fc26] "
        b"succeeded in 0.001s: 3\n"
        b"[2026-12-01 20:26:39,600: INFO/MainProcess] Connected to redis://h:6379/0\n"
    )
    output = REGISTRY.serving("celery-log", "text").decode(log, Normaliser(), "worker.log")
    columns = ["event", "job_id", "job_type", "worker_id"]
    rows = list(zip(*(output.table[name].to_pylist() for name in columns), strict=True))
    assert rows == [
        ("deliver", "e752fc26", "app.add", "worker.log"),  # the log's name, as none is given
        ("ack", "e752fc26", "app.add", "worker.log"),
    ]
    assert (output.ignored, output.lines, output.rejected) == (1, 3, [])


def test_a_celery_log_decoder_takes_what_the_log_does_not_say() -> None:
    decoder = REGISTRY.reference("celery-log", "text")
    log = b"[2026-12-01 20:26:39,561: INFO/MainProcess] Task app.add[e752fc26] received\n"
    named = decoder.configured(CeleryLogOptions(hostname="celery@web-1"))  # type: ignore[attr-defined]
    output = named.decode(log, Normaliser(), "worker.log")
    assert output.table["worker_id"].to_pylist() == ["celery@web-1"]
