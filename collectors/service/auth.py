"""The bearer token check both receivers make."""

from __future__ import annotations

import hmac


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries `token` with the Bearer scheme, whose name
    is case-insensitive (RFC 9110 11.1: `bearer` and `BEARER` are Bearer too)."""
    scheme, _, given = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())
