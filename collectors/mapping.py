"""Field mapping: the contract's built-in aliases plus a user's TOML mapping file.

A mapping file names the user's fields for canonical ones and may rename event values:

    [fields]
    ts = "when"
    job_id = "task.uuid"          # nested objects are addressed with dots
    idempotency_key = ["order_id", "payment.key"]   # the first present wins

    [events]
    "task-received" = "deliver"
    "task-succeeded" = "ack"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from store import contract
from store.contract import (
    CELERY_ATTEMPT,
    CELERY_RETRIES,
    OPERATION_EVENTS,
    OPERATION_KEYS,
    RESOURCE_WORKER_ID,
)

# The contract's spellings; a mapping file's names are tried before them.
__all__ = [
    "BUILTIN_ALIASES", "CELERY_ATTEMPT", "CELERY_RETRIES", "DEFAULT_MAPPING", "FieldMapping",
    "MappingError", "OPERATION_EVENTS", "OPERATION_KEYS", "RESOURCE_WORKER_ID",
]

#: Canonical name -> source names tried in order (after the canonical name itself and its
#: `job.`-prefixed form).
BUILTIN_ALIASES: dict[str, tuple[str, ...]] = {
    c.name: c.aliases for c in contract.COLUMNS if c.mapped and c.aliases
}


class MappingError(ValueError):
    """A mapping file that cannot be used."""


@dataclass(frozen=True)
class FieldMapping:
    """Which source keys feed each canonical field, and how event names translate."""

    fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)

    def sources_for(self, canonical: str) -> tuple[str, ...]:
        user = self.fields.get(canonical, ())
        return (*user, *contract.spellings(canonical))

    @classmethod
    def load(cls, path: str | Path) -> FieldMapping:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise MappingError(f"{path}: {exc}") from exc
        fields: dict[str, tuple[str, ...]] = {}
        for canonical, names in data.get("fields", {}).items():
            if isinstance(names, str):
                names = [names]
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise MappingError(
                    f"{path}: [fields] {canonical} must be a name or a list of names"
                )
            fields[canonical] = tuple(names)
        events = data.get("events", {})
        if not all(isinstance(v, str) for v in events.values()):
            raise MappingError(f"{path}: [events] values must be event names")
        return cls(fields=fields, events=dict(events))


DEFAULT_MAPPING = FieldMapping()
