"""One row per execution of a key, read off its timeline: what each run did and how it ended.

The verdict (queries/verdict.py), the dashboard's swimlane chart and `dupescope timeline`
all talk about executions ("the first worker went silent after its side effect"), so they
share this summary of the key's timeline (queries/timeline.py) rather than each reading
the events again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a frame is asked for: `dupescope timeline` needs none
    import pandas as pd

#: One event of a timeline, or one execution of its summary, as plain values (missing
#: values None, times datetimes).
Row = dict[str, Any]

#: Events that settle a delivery; the last one is how the execution ended.
SETTLED = ("ack", "nack", "fail")
#: Events by which an extra execution avoided repeating the effect.
ABSORBING = ("idempotency_hit", "lock_contended", "occ_conflict")
#: Events by which a run said what became of its effect (the contract's evidence of harm
#: or of its absence); a key none of whose runs sent one has an unknown outcome.
EFFECT_EVIDENCE = ("side_effect", *ABSORBING, "commit")
COLUMNS = [
    "execution",
    "job_id",
    "worker_id",
    "delivery_attempt",
    "start",
    "end",
    "duration_ms",
    "side_effect",
    "absorbed_by",
    "outcome",
    "reason",
    "settled_by",
    "visibility_timeout_ms",
    "lock_key",
    "lock_owner",
    "lock_valid_until",
    "effect_reported",
]


def attrs_of(value: Any) -> dict[str, Any]:
    """The attrs JSON of a row as a dict (empty when missing or not an object)."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def frame_rows(frame: pd.DataFrame) -> list[Row]:
    """A frame's rows as dicts, missing values (NaN, NaT, NA) as None: what the row
    functions here and in queries/verdict.py read."""
    plain = frame.astype(object).where(frame.notna(), None)
    return [{str(k): v for k, v in row.items()} for row in plain.to_dict("records")]


def _first(rows: Sequence[Mapping[str, Any]], column: str) -> Any:
    return next((r[column] for r in rows if r[column] is not None), None)


def _lock_valid_until(rows: Sequence[Mapping[str, Any]]) -> Any:
    grants = [r for r in rows
              if r["event"] in ("lock_acquire", "lock_renew") and r["lock_ttl_ms"] is not None]
    if not grants:
        return None
    last = grants[-1]
    return last["ts"] + timedelta(milliseconds=int(last["lock_ttl_ms"]))


def _execution(number: int, events_of_run: list[Row]) -> Row:
    events = [r["event"] for r in events_of_run]
    settled = [r for r in events_of_run if r["event"] in SETTLED]
    last_settle = settled[-1] if settled else None
    details = attrs_of(last_settle["attrs"]) if last_settle is not None else {}
    start = min(r["ts"] for r in events_of_run)
    end = max(r["ts"] for r in events_of_run)
    return {
        "execution": number,
        "job_id": _first(events_of_run, "job_id"),
        "worker_id": _first(events_of_run, "worker_id"),
        "delivery_attempt": _first(events_of_run, "delivery_attempt"),
        "start": start,
        "end": end,
        "duration_ms": (end - start).total_seconds() * 1000,
        "side_effect": "side_effect" in events,
        "absorbed_by": next((e for e in events if e in ABSORBING), None),
        "outcome": last_settle["event"] if last_settle is not None else "silent",
        "reason": details.get("reason"),
        "settled_by": details.get("settled_by"),
        "visibility_timeout_ms": _first(
            [r for r in events_of_run if r["event"] == "deliver"], "visibility_timeout_ms"),
        "lock_key": _first(events_of_run, "lock_key"),
        "lock_owner": _first(events_of_run, "lock_owner"),
        "lock_valid_until": _lock_valid_until(events_of_run),
        "effect_reported": any(e in EFFECT_EVIDENCE for e in events),
    }


def summarise_rows(timeline: Sequence[Mapping[str, Any]]) -> list[Row]:
    """Executions of a timeline's rows (`queries.timeline`'s, as plain values), in the
    order they started.

    Keys (COLUMNS): execution (the timeline's number), job_id, worker_id,
    delivery_attempt, start, end, duration_ms, side_effect (it ran the effect),
    absorbed_by (the event by which it avoided the effect, if any), outcome (its last
    ack/nack/fail, else `silent`), reason and settled_by (from that event's attrs),
    visibility_timeout_ms (of its deliver), lock_key, lock_owner, lock_valid_until (its
    last grant plus TTL), effect_reported (it sent an event of EFFECT_EVIDENCE).
    """
    runs: dict[int, list[Row]] = {}
    for row in sorted((r for r in timeline if r.get("execution") is not None),
                      key=lambda r: r["ts"]):
        runs.setdefault(int(row["execution"]), []).append(dict(row))
    return [_execution(number, runs[number]) for number in sorted(runs)]


def summarise(timeline: pd.DataFrame) -> pd.DataFrame:
    """`summarise_rows` of a timeline frame (`queries.timeline`'s), as a frame of COLUMNS."""
    import pandas as pd

    if timeline.empty or "execution" not in timeline:
        return pd.DataFrame(columns=COLUMNS)
    return pd.DataFrame(summarise_rows(frame_rows(timeline)), columns=COLUMNS)


def overlaps(executions: pd.DataFrame) -> list[tuple[pd.Timestamp, pd.Timestamp, int, int]]:
    """Spans where two executions ran at once: (from, to, first execution, second)."""
    found = []
    ordered = executions.sort_values("start").to_dict(orient="records")
    for i, one in enumerate(ordered):
        for other in ordered[i + 1 :]:
            begin, finish = max(one["start"], other["start"]), min(one["end"], other["end"])
            if begin < finish:
                found.append((begin, finish, one["execution"], other["execution"]))
    return found
