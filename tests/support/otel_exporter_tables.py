"""The OpenTelemetry Collector's ClickHouse tables, made in a chDB folder with the
exporter's DDL and holding the rows the exporter would write."""

from __future__ import annotations

from pathlib import Path

from chdb import session

from sample_data.clickhouse_exporter import insert, logs_ddl, traces_ddl


def exporter_tables(folder: Path, *, json_attrs: bool, logs: str, spans: list | None = None,
                    logs_rows: list | None = None) -> Path:
    """A chDB folder holding the exporter's tables (database `otel`) with these rows."""
    s = session.Session(str(folder))
    try:
        s.query("CREATE DATABASE IF NOT EXISTS otel")
        s.query(traces_ddl("otel", json=json_attrs))
        s.query(logs_ddl("otel", layout=logs))
        insert(s, "otel.otel_traces", spans or [])
        insert(s, "otel.otel_logs", logs_rows or [])
    finally:
        s.close()
    return folder
