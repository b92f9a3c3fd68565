"""Prometheus metrics of alerting, in a registry of their own, served on `--metrics-port`.

A private registry keeps tests and several watchers in one process from colliding, and
keeps the default process collectors' noise out of what an operator scrapes here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from alerts.model import Alert

if TYPE_CHECKING:
    from store import Store

OVERRUN_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)


class AlertMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.alerts = Counter(
            "dupescope_alerts",
            "Incidents fired (each alert id once), by rule, job type and severity.",
            ["rule", "job_type", "severity"],
            registry=r,
        )
        self.overrun = Histogram(
            "dupescope_lock_overrun_seconds",
            "How long executions ran past their lock's expiry (fired incidents).",
            ["job_type"],
            buckets=OVERRUN_BUCKETS,
            registry=r,
        )
        self.evaluations = Counter(
            "dupescope_alert_evaluations", "Rule evaluations run.", registry=r
        )
        self.evaluation_seconds = Histogram(
            "dupescope_alert_evaluation_seconds",
            "Time one evaluation of all rules took.",
            registry=r,
        )
        self.lag = Gauge(
            "dupescope_alert_evaluation_lag_seconds",
            "Wall clock minus the newest event time seen at the last evaluation.",
            registry=r,
        )
        self.watermark = Gauge(
            "dupescope_alert_watermark_timestamp_seconds",
            "Event-time watermark of alert evaluation (Unix seconds).",
            registry=r,
        )
        self.deliveries = Counter(
            "dupescope_alert_deliveries",
            "Alert deliveries a sink accepted.",
            ["sink", "rule"],
            registry=r,
        )
        self.failures = Counter(
            "dupescope_alert_delivery_failures",
            "Failed delivery attempts (each retry counts).",
            ["sink", "retryable"],
            registry=r,
        )
        self.abandoned = Counter(
            "dupescope_alert_deliveries_abandoned",
            "Deliveries given up after the last attempt or a permanent error.",
            ["sink"],
            registry=r,
        )
        self.pending = Gauge(
            "dupescope_alert_outbox_pending",
            "Deliveries queued and not yet accepted.",
            registry=r,
        )

    def follow_reads(self, store: object) -> None:
        """Gauges of a read of the Collector's tables (a first read takes minutes), where
        the store reads them (store/otel_progress.py)."""
        from store.otel_progress import Progress, ReadProgress

        progress = getattr(store, "progress", None)
        if not isinstance(progress, Progress):
            return
        r = self.registry
        rows = Gauge("dupescope_otel_read_rows", "Rows of the Collector's tables read by "
                     "the current (or last) read.", registry=r)
        total = Gauge("dupescope_otel_read_rows_total_planned", "Rows the current (or last) "
                      "read of the Collector's tables has to read.", registry=r)
        left = Gauge("dupescope_otel_read_chunks_left", "Chunks the current read of the "
                     "Collector's tables has still to read.", registry=r)
        rate = Gauge("dupescope_otel_read_rows_per_second", "Rows a second of the current "
                     "(or last) read of the Collector's tables.", registry=r)

        def show(p: ReadProgress) -> None:
            rows.set(p.rows_read)
            total.set(p.rows_total)
            left.set(p.chunks_total - p.chunks_read)
            rate.set(p.rate())

        progress.follow(show)

    def follow_builds(self, store: Store) -> None:
        """Gauges of a build of the derived tables from nothing (minutes on a large
        store), as the store's deriver tells its steps (derive/progress.py)."""
        from queries.derived import BuildProgress, builds

        r = self.registry
        left = Gauge("dupescope_derived_build_steps_left", "Steps the current build of the "
                     "derived tables from nothing has still to run (0 when none runs).",
                     registry=r)
        seconds = Gauge("dupescope_derived_build_seconds", "Seconds the current (or last) "
                        "build of the derived tables from nothing has run.", registry=r)

        def show(p: BuildProgress) -> None:
            left.set(p.steps_total - p.steps_done)
            seconds.set(p.seconds())

        builds(store).follow(show)

    def fired(self, alert: Alert) -> None:
        job_type = alert.job_type or ""
        self.alerts.labels(alert.rule, job_type, alert.severity).inc()
        if alert.rule == "lock_expired_while_running" and alert.overrun_ms is not None:
            self.overrun.labels(job_type).observe(alert.overrun_ms / 1000.0)

    def serve(self, port: int, host: str = "127.0.0.1") -> object:
        """Start `/metrics` on a daemon thread; returns the server (for shutdown)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server
