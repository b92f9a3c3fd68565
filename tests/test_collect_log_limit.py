"""Flooding warnings (429s under overload, failed writes while the disk is full) are
logged once per interval each, the next line saying how many were held back."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import grpc
import pytest
from collect_support import FullDisk, job_spans, running, send_spans
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from collectors.service.log_limit import SummarisedLog

LOG = logging.getLogger("dupescope.tests.floods")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOG.name]


def test_the_first_warning_of_a_kind_is_logged_at_once(caplog) -> None:
    caplog.set_level(logging.WARNING)
    assert SummarisedLog(LOG, every=10, clock=Clock()).warn(429, "queue full on %s", "a")
    assert _messages(caplog) == ["queue full on a"]


def test_repeats_within_the_interval_are_counted_into_the_next_line(caplog) -> None:
    caplog.set_level(logging.WARNING)
    clock = Clock()
    held_at = time.mktime((2026, 11, 30, 9, 15, 0, 0, 0, -1))  # local time, as logged
    floods = SummarisedLog(LOG, every=10, clock=clock, wall=lambda: held_at)
    logged = [floods.warn(429, "queue full") for _ in range(4)]
    clock.now += 3600  # however long after them the next one comes
    logged.append(floods.warn(429, "queue full"))
    assert logged == [True, False, False, False, True]
    assert _messages(caplog) == [
        "queue full", "queue full (and 3 more like it since 09:15:00)"]


def test_the_summary_says_when_the_first_held_back_one_came(caplog) -> None:
    caplog.set_level(logging.WARNING)
    clock, walls = Clock(), iter([time.mktime((2026, 11, 30, h, 0, 0, 0, 0, -1))
                                 for h in (8, 9, 10)])
    floods = SummarisedLog(LOG, every=10, clock=clock, wall=lambda: next(walls))
    for _ in range(3):
        floods.warn(503, "store failed")
    clock.now += 10
    floods.warn(503, "store failed")
    assert _messages(caplog)[-1] == "store failed (and 2 more like it since 08:00:00)"


def test_each_kind_has_its_own_interval(caplog) -> None:
    caplog.set_level(logging.WARNING)
    floods = SummarisedLog(LOG, every=10, clock=Clock())
    assert floods.warn(429, "queue full") and floods.warn(503, "store failed")
    assert not floods.warn(429, "queue full")


def test_a_full_disk_logs_one_warning_for_many_failed_writes(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="dupescope.collect")
    with running(FullDisk(tmp_path / "store")) as collector:
        for _ in range(3):
            assert send_spans(collector.http.port) == 503
    failed = [r for r in caplog.records if r.getMessage().startswith("store write failed")]
    assert len(failed) == 1 and failed[0].exc_info is not None


def test_grpc_refusals_are_logged_once_for_many(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="dupescope.collect")
    with running(FullDisk(tmp_path / "store")) as collector:
        channel = grpc.insecure_channel(f"127.0.0.1:{collector.grpc.port}")
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda body: body, response_deserializer=lambda body: body,
        )
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as refused:
                export(encode_spans(job_spans(2)).SerializeToString(), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        channel.close()
    refusals = [r.getMessage() for r in caplog.records if "gRPC UNAVAILABLE" in r.getMessage()]
    assert len(refusals) == 1 and "No space left on device" in refusals[0]
