"""Which deriver keeps a store's derived state: the one engine branch of derive/."""

from __future__ import annotations

from derive.base import Deriver, RenderRows
from derive.embedded.deriver import EmbeddedDeriver
from store.base import Store


def open_deriver(store: Store, render: RenderRows | None = None) -> Deriver:
    """The deriver of `store`: layers of Parquet files beside an embedded store's segments,
    tables beside `events` on ClickHouse or chDB. With `render`, an embedded deriver
    keeps the duplicates rendered by it beside each layer it writes (`write_listing`)."""
    segmented = store.segmented()
    if segmented is not None:
        return EmbeddedDeriver(segmented, render)
    # Imported here: a command on an embedded store does not pay for the ClickHouse side.
    from derive.clickhouse.deriver import ClickHouseDeriver
    from store.clickhouse import ClickHouseEngine

    if isinstance(store, ClickHouseEngine):
        return ClickHouseDeriver(store)
    raise TypeError(f"{store.describe()} has no segments and is no ClickHouse store")
