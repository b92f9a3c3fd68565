"""The event_uid of a JSON line: BLAKE3 of the line without surrounding whitespace, the
first 128 bits in hex, computed for a whole batch of lines in one call.

Both ingest paths (line by line and block by block) take it from here, so the same line
always gets the same uid and a repeat collapses. BLAKE3 is a specified, cryptographic
hash, so the uid is the same in every version and process and a crafted line cannot
collide with another to hide it; `polars-hash` computes it in Rust for a column at once,
where a Python loop over `hashlib` cost more per line than reading the JSON.
"""

from __future__ import annotations

import polars as pl
import polars_hash as plh

UID_HEX_DIGITS = 32  # 128 bits: the first 16 bytes of BLAKE3's output, as BLAKE3 defines it


def uid_expr(lines: pl.Expr) -> pl.Expr:
    """The uid of each (already stripped) line in a Binary column."""
    return plh.col(lines.meta.output_name()).chash.blake3().str.slice(0, UID_HEX_DIGITS)


def line_uids(lines: list[bytes]) -> list[str]:
    """The uids of stripped lines, in order."""
    if not lines:
        return []
    column = pl.Series("line", lines, dtype=pl.Binary)
    return column.to_frame().select(uid_expr(pl.col("line"))).to_series().to_list()
