"""Alert rules: the shipped defaults, overlaid by the user's TOML file, validated.

A user's file names only what it changes, so an upgrade that adds a rule or a threshold
reaches everyone who did not override it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_RULES_PATH = Path(__file__).with_name("default_rules.toml")
SEVERITIES = ("info", "warning", "critical")


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file, rule and key."""


@dataclass(frozen=True)
class Rule:
    """One rule's switch, severity and thresholds (everything else in its TOML table)."""

    name: str
    enabled: bool = True
    severity: str = "warning"
    params: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise RulesError(f"cannot read rules file {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"rules file {path} is not valid TOML: {exc}") from exc


def load_rules(path: str | Path | None = None) -> dict[str, Rule]:
    """The default rules, with the tables of `path` (if given) laid over them."""
    merged = _read(DEFAULT_RULES_PATH)
    source = DEFAULT_RULES_PATH
    if path is not None:
        source = Path(path)
        for name, table in _read(source).items():
            if name not in merged:
                known = ", ".join(sorted(merged))
                raise RulesError(f"{source}: unknown rule {name!r} (known: {known})")
            if not isinstance(table, dict):
                raise RulesError(f"{source}: [{name}] must be a table")
            unknown = set(table) - set(merged[name])
            if unknown:
                raise RulesError(
                    f"{source}: [{name}] has unknown key(s) {', '.join(sorted(unknown))}"
                )
            for key, value in table.items():
                if isinstance(merged[name][key], bool) != isinstance(value, bool):
                    kind = "true or false" if isinstance(merged[name][key], bool) else "a number"
                    raise RulesError(f"{source}: [{name}] {key} must be {kind}, got {value!r}")
            merged[name] = {**merged[name], **table}
    return {name: _validate(source, name, table) for name, table in merged.items()}


def _validate(source: Path, name: str, table: dict[str, Any]) -> Rule:
    params = dict(table)
    enabled = params.pop("enabled", True)
    severity = params.pop("severity", "warning")
    if not isinstance(enabled, bool):
        raise RulesError(f"{source}: [{name}] enabled must be true or false")
    for key, value in [("severity", severity)] + [
        (k, v) for k, v in params.items() if k.startswith("severity_")
    ]:
        if value not in SEVERITIES:
            raise RulesError(
                f"{source}: [{name}] {key} = {value!r}; use one of {', '.join(SEVERITIES)}"
            )
    for key, value in params.items():
        if key.startswith("severity_") or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or value < 0:
            raise RulesError(f"{source}: [{name}] {key} must be a number >= 0, got {value!r}")
    share = params.get("share")
    if share is not None and not 0 < share <= 1:
        raise RulesError(f"{source}: [{name}] share must be in (0, 1], got {share!r}")
    return Rule(name=name, enabled=enabled, severity=severity, params=params)
