"""Stable alert ids: one incident, one id, whenever and however often it is detected.

The id is a hash of the rule and the incident's identity (job_id, attempt, lock key and
owner, ...), never of detection or ingestion times, so a restart of `watch` or a second
ingestion of the same events finds the same id and the state store says "already fired".
Receivers use it as the Idempotency-Key to drop repeats of a delivery.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any


def _part(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def alert_id(rule: str, *identity: Any) -> str:
    """`rule|part|part|...` hashed; missing parts count as empty strings."""
    text = "|".join([rule, *(_part(v) for v in identity)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]
