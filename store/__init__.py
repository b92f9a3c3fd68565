"""The store stage: where canonical events are kept (embedded Parquet+DuckDB, ClickHouse)."""

from store.base import Store, StoreError
from store.open import DEFAULT_STORE, open_store

__all__ = ["DEFAULT_STORE", "Store", "StoreError", "open_store"]
