"""Which deriver keeps a store's derived state: the one engine branch of derive/."""

from __future__ import annotations

from derive.base import Deriver
from derive.clickhouse.deriver import ClickHouseDeriver
from derive.embedded.deriver import EmbeddedDeriver
from derive.embedded.layers import Rendered
from store.base import Store
from store.clickhouse import ClickHouseEngine


def _nothing(store: object, layer: str) -> None:
    """Nothing kept rendered beside a layer."""


def open_deriver(store: Store, rendered: Rendered = _nothing) -> Deriver:
    """The deriver of `store`: layers of Parquet files beside an embedded store's segments,
    tables beside `events` on ClickHouse or chDB. `rendered` is called with each layer an
    embedded deriver writes, for what is kept rendered beside it."""
    segmented = store.segmented()
    if segmented is not None:
        return EmbeddedDeriver(segmented, rendered)
    if isinstance(store, ClickHouseEngine):
        return ClickHouseDeriver(store)
    raise TypeError(f"{store.describe()} has no segments and is no ClickHouse store")
