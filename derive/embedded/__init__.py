"""Derivation on the embedded store: layers of Parquet files beside the segments."""
