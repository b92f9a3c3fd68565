"""Derivation on ClickHouse and chDB: rows versioned by unit beside `events`."""
