"""`--store` / DUPESCOPE_STORE -> a store: a folder, clickhouse://..., or chdb:///path.

`?source=otel` on either ClickHouse form reads the OpenTelemetry Collector's exporter
tables in place (store/otel.py): `clickhouse://host:8123/otel?source=otel` names the
exporter's database in the path; `chdb:///path?source=otel&database=otel` names it as an
option. `dupescope_db=`, `traces_table=` and `logs_table=` name the rest; `since=7d` (hours,
days or weeks) reads only the days from then on.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlparse

from store.base import Store, StoreError

if TYPE_CHECKING:
    from store.otel import OtelSource

DEFAULT_STORE = "./dupescope-data"


def open_store(
    url: str | None = None, *, existing: bool = False, writable: bool = False
) -> Store:
    """Open the store named by `url`, DUPESCOPE_STORE, or the default folder.

    `existing`: a folder store (or chDB path) must already be there, so that a query on a
    mistyped path fails instead of answering "nothing found". `writable`: the folder is
    created if need be and must take files, checked before any work is done.
    """
    target = url or os.environ.get("DUPESCOPE_STORE") or DEFAULT_STORE
    if target.startswith(("clickhouse://", "clickhouses://")):
        return _clickhouse(target)
    if target.startswith("chdb://"):
        from store.clickhouse import ChdbStore

        parsed = urlparse(target)
        path = parsed.path or None
        if path:
            check_folder(Path(path), existing=existing, writable=writable)
        options = _options(parsed.query)
        if _otel(options):
            from store.otel import OtelChdbStore

            return OtelChdbStore(path, _otel_source(options.get("database") or "otel", options))
        return ChdbStore(path)
    if "://" in target:
        raise StoreError(
            f"unknown store {target!r}: use a folder, clickhouse://user:pass@host:8123/db "
            "or chdb:///path"
        )
    from store.embedded import EmbeddedStore

    check_folder(Path(target), existing=existing, writable=writable)
    return EmbeddedStore(target)


def check_folder(folder: Path, *, existing: bool = False, writable: bool = False) -> None:
    """Raise StoreError, in words, where `folder` cannot serve as a store folder."""
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"the store {str(folder)!r} is a file, not a folder")
    if existing and not folder.exists():
        raise StoreError(
            f"no store at {str(folder)!r}: the folder does not exist (a typo? events are "
            "loaded with dupescope ingest, collect or demo)"
        )
    if writable:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # Try a real file: permission bits say nothing for root or on a read-only mount.
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
                pass
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise StoreError(f"cannot write to the store {str(folder)!r}: {reason}") from exc


def _options(query: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(query).items()}


def _otel(options: dict[str, str]) -> bool:
    """`?source=otel`: the store is the OpenTelemetry Collector's tables, read in place."""
    source = options.get("source")
    if source is None:
        return False
    if source != "otel":
        raise StoreError(f"unknown store source {source!r}: the one known is source=otel")
    return True


def _otel_source(database: str, options: dict[str, str]) -> OtelSource:
    from store.otel import DEFAULT_LOGS, DEFAULT_TRACES, OtelSource
    from store.otel_chunks import parse_since

    since = None
    if "since" in options:
        try:
            since = parse_since(options["since"])
        except ValueError as exc:
            raise StoreError(f"in the store URL: {exc}") from exc
    return OtelSource(
        database,
        options.get("dupescope_db"),
        traces_table=options.get("traces_table", DEFAULT_TRACES),
        logs_table=options.get("logs_table", DEFAULT_LOGS),
        since=since,
    )


def _clickhouse(url: str) -> Store:
    from store.clickhouse import ClickHouseStore

    parsed = urlparse(url)
    options = _options(parsed.query)
    if _otel(options):
        from store.otel import OtelClickHouseStore

        database = (parsed.path or "/otel").strip("/") or "otel"
        return OtelClickHouseStore(
            source=_otel_source(database, options),
            host=parsed.hostname or "localhost",
            port=parsed.port or 8123,
            username=unquote(parsed.username or "default"),
            password=unquote(parsed.password or ""),
            secure=parsed.scheme == "clickhouses",
        )
    ttl = options.get("ttl_days")
    return ClickHouseStore(
        host=parsed.hostname or "localhost",
        port=parsed.port or 8123,
        username=unquote(parsed.username or "default"),
        password=unquote(parsed.password or ""),
        database=(parsed.path or "/default").strip("/") or "default",
        secure=parsed.scheme == "clickhouses",
        cluster=options.get("cluster"),
        ttl_days=int(ttl) if ttl else None,
    )
