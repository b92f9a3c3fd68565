"""`--store` / DUPESCOPE_STORE -> a store: a folder, clickhouse://..., or chdb:///path."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from store.base import Store, StoreError

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

        path = urlparse(target).path or None
        if path:
            check_folder(Path(path), existing=existing, writable=writable)
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
