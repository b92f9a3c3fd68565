"""`--store` / DUPESCOPE_STORE -> a store: a folder, clickhouse://..., or chdb:///path."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlparse

from store.base import Store, StoreError

DEFAULT_STORE = "./dupescope-data"


def open_store(url: str | None = None) -> Store:
    """Open the store named by `url`, DUPESCOPE_STORE, or the default folder."""
    target = url or os.environ.get("DUPESCOPE_STORE") or DEFAULT_STORE
    if target.startswith(("clickhouse://", "clickhouses://")):
        return _clickhouse(target)
    if target.startswith("chdb://"):
        from store.clickhouse import ChdbStore

        path = urlparse(target).path or None
        return ChdbStore(path)
    if "://" in target:
        raise StoreError(
            f"unknown store {target!r}: use a folder, clickhouse://user:pass@host:8123/db "
            "or chdb:///path"
        )
    from store.embedded import EmbeddedStore

    return EmbeddedStore(target)


def _clickhouse(url: str) -> Store:
    from store.clickhouse import ClickHouseStore

    parsed = urlparse(url)
    options = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
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
