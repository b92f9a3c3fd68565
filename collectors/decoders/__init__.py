"""Every source behind one `Decoder` protocol, registered by signal and media type.

Adding a source is one module here that defines its reference decoder (and any
accelerator), and its registration below; the receivers find it through `REGISTRY`.
"""

from __future__ import annotations

from collectors.decoders.arq_log import ArqLogText
from collectors.decoders.base import (
    MEDIA,
    SIGNALS,
    Decoder,
    GivesViews,
    Output,
    Refused,
    Registry,
    UnknownSource,
)
from collectors.decoders.celery_log import CeleryLogText
from collectors.decoders.dramatiq_log import DramatiqLogText
from collectors.decoders.json_lines import LinesBlocks, LinesReference
from collectors.decoders.otlp_logs import LogsReference
from collectors.decoders.otlp_traces import TracesColumns, TracesNative, TracesReference
from collectors.decoders.rq_log import RqLogText
from collectors.decoders.sidekiq_log import SidekiqLogText

__all__ = [
    "MEDIA", "REGISTRY", "SIGNALS", "Decoder", "GivesViews", "Output", "Refused", "Registry",
    "UnknownSource",
]

REGISTRY = Registry()

for _media in ("protobuf", "json"):
    _traces = REGISTRY.register(TracesReference(_media))
    REGISTRY.register(TracesColumns(_media), accelerates=_traces)
    if _media == "protobuf":
        REGISTRY.register(TracesNative(), accelerates=_traces)
    REGISTRY.register(LogsReference(_media))

_lines = REGISTRY.register(LinesReference())
REGISTRY.register(LinesBlocks(), accelerates=_lines)
REGISTRY.register(CeleryLogText())
REGISTRY.register(SidekiqLogText())
REGISTRY.register(RqLogText())
REGISTRY.register(ArqLogText())
REGISTRY.register(DramatiqLogText())
