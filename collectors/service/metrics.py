"""The collector's own counters in Prometheus' text format, served as `GET /metrics`.

The same numbers as `/healthz`, named and typed as a Prometheus scrape expects them:
totals as counters, the queue as gauges, and the group commits' durations as a
histogram, so that write latency percentiles and rates can be graphed and alerted on.
They are read from the collector at each scrape, in a registry of this collector's own
(several collectors in one process, as in tests, never share one).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from derive.open import open_deriver
from store.clickhouse import ClickHouseEngine
from store.embedded import EmbeddedStore
from store.status import Status, status

if TYPE_CHECKING:
    from collectors.service.collector import Collector

PREFIX = "dupescope_collector"

#: /healthz counter -> (metric name without prefix and `_total`, help text).
COUNTERS = {
    "received": ("received_rows", "Rows decoded from requests and handed to the writer."),
    "rejected": ("rejected_records", "Records refused as invalid (partial_success)."),
    "ignored": ("ignored_spans", "Spans that are not job events, read past."),
    "deduplicated": ("deduplicated_rows", "Rows dropped as repeats of rows already taken."),
    "written": ("written_rows", "Rows made durable in the store."),
    "write_errors": ("write_errors", "Group commits the store failed (senders retry)."),
    "throttled": ("throttled_requests", "Requests answered 429 / RESOURCE_EXHAUSTED."),
    "bad_requests": ("bad_requests", "Requests refused with a 4xx other than 401 and 429."),
}

#: /healthz gauge -> (metric name without prefix, help text).
GAUGES = {
    "queue_depth": ("queue_rows", "Rows waiting for the writer."),
    "queue_batches": ("queue_batches", "Batches waiting for the writer."),
    "queue_capacity": ("queue_capacity_rows", "Rows the queue holds before answering 429."),
    "queue_bytes": ("queue_bytes", "Bytes of rows waiting for the writer (429 beyond 64 MB)."),
    "uptime_s": ("uptime_seconds", "Seconds since the collector started."),
    "recent_uids": ("recent_uids", "Event uids remembered to skip resent batches."),
    "bodies_held_bytes": (
        "bodies_held_bytes",
        "Bytes of request bodies being received, decoded or claimed (429 beyond the budget).",
    ),
    "body_budget_bytes": ("body_budget_bytes", "The budget of bodies_held_bytes."),
}


class _Scrape:
    """Reads one collector's numbers each time the registry is collected."""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def collect(self) -> Iterator[Metric]:
        health = self.collector.health()
        for key, (name, text) in COUNTERS.items():
            yield CounterMetricFamily(f"{PREFIX}_{name}", text, value=health[key])
        for key, (name, text) in GAUGES.items():
            yield GaugeMetricFamily(f"{PREFIX}_{name}", text, value=health[key])
        if health["dedupe_window_s"] is not None:
            yield GaugeMetricFamily(
                f"{PREFIX}_dedupe_window_seconds",
                "How far back the uid memory reaches: resends older than this are written "
                "again (readers still count them once).",
                value=health["dedupe_window_s"],
            )
        info = GaugeMetricFamily(
            f"{PREFIX}_info", "The store this collector writes to.", labels=["store"]
        )
        info.add_metric([health["store"]], 1)
        yield info
        yield GaugeMetricFamily(
            f"{PREFIX}_store_failing",
            "1 while the latest store write failed (for 30 s, or while another is under way) "
            "or one has run for over 60 s; senders are answered 503 meanwhile.",
            value=int(health["status"] != "ok"),
        )
        segmented = self.collector.store.segmented()
        lag: float | None
        if segmented is not None or isinstance(self.collector.store, ClickHouseEngine):
            lag = open_deriver(self.collector.store).lag_seconds()
            yield GaugeMetricFamily(
                f"{PREFIX}_derivation_lag_seconds",
                "How long the oldest rows no reader has derived yet have waited (0: the "
                "kept derived state holds everything; -1: no reader has derived any).",
                value=-1.0 if lag is None else round(lag, 3),
            )
        if isinstance(self.collector.store, EmbeddedStore):
            yield from _store_status(status(self.collector.store))
        durations = self.collector.pipeline.durations()
        cumulative, buckets = 0, []
        for bound, count in zip(durations.bounds, durations.counts, strict=False):
            cumulative += count
            buckets.append((repr(bound), cumulative))
        buckets.append(("+Inf", sum(durations.counts)))
        yield HistogramMetricFamily(
            f"{PREFIX}_write_seconds",
            "How long each group commit took, from taking its batches to durable.",
            buckets=buckets,
            sum_value=durations.total_seconds,
        )


def _store_status(found: Status) -> Iterator[Metric]:
    """The figures of `dupescope status` (store/status.py)."""
    yield GaugeMetricFamily(f"{PREFIX}_store_events", "Events in the store.", value=found.events)
    segments = GaugeMetricFamily(f"{PREFIX}_store_segments", "Segments per day.", labels=["day"])
    awaiting = GaugeMetricFamily(
        f"{PREFIX}_store_segments_awaiting_compaction",
        "Segments per day that compaction has not merged yet.", labels=["day"],
    )
    for day in found.days:
        segments.add_metric([day.day], day.segments)
        awaiting.add_metric([day.day], day.awaiting_compaction)
    yield segments
    yield awaiting
    disk = GaugeMetricFamily(
        f"{PREFIX}_store_disk_bytes", "Disk the store takes, per part.", labels=["part"]
    )
    for part, size in found.disk_bytes.items():
        disk.add_metric([part], size)
    yield disk
    yield GaugeMetricFamily(f"{PREFIX}_store_disk_free_bytes", "Free disk where the store is.",
                            value=found.disk_free_bytes)
    yield GaugeMetricFamily(f"{PREFIX}_memory_budget_bytes",
                            "The memory budget of the heavy steps (--memory).",
                            value=found.memory_budget_bytes)
    yield GaugeMetricFamily(f"{PREFIX}_store_warnings",
                            "Warnings `dupescope status` prints (fragmented days, derived "
                            "state behind, disk nearly full).", value=len(found.warnings))


class CollectorMetrics:
    """The `/metrics` page of one collector."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, collector: Collector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Scrape(collector))  # type: ignore[arg-type]

    def page(self) -> bytes:
        return generate_latest(self.registry)
